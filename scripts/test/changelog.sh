#!/usr/bin/env bash
# Checks the change log without releasing anything: `antsibull-changelog lint` on the fragments, then
# `antsibull-changelog release` on a scratch copy of the collection, which must turn every fragment
# into CHANGELOG.rst. The repo is not touched; the preview is kept in build/changelog-preview/.
# The real release (which consumes the fragments) is in docs/releasing.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

export PATH=$PWD/.venv/bin:$PATH
fail() {
  echo "changelog: FAILED: $*"
  exit 1
}

antsibull-changelog lint || fail "antsibull-changelog lint found problems in changelogs/ (see above)"

version=$(python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
# Once galaxy.yml's version is released, fragments belong to the next one: preview them under a
# build-metadata version, which never collides with a real one.
if python - "$version" <<'EOF'; then preview=$version; else preview=$version+unreleased; fi
import sys, yaml
releases = (yaml.safe_load(open("changelogs/changelog.yaml")) or {}).get("releases") or {}
sys.exit(1 if sys.argv[1] in releases else 0)
EOF

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Copies what git tracks or would track under the given paths into directory $1, as it is on disk.
copy_tracked() {
  local into=$1
  shift
  git ls-files -z -co --exclude-standard -- "$@" |
    while IFS= read -r -d '' path; do
      if [[ -e $path ]]; then printf '%s\0' "$path"; fi
    done |
    xargs -0 -r cp --parents -t "$into"
}

# CHANGELOG.rst must be what changelogs/changelog.yaml says (after a hand edit of changelog.yaml,
# `antsibull-changelog generate` writes it again).
if [[ -f CHANGELOG.rst ]]; then
  mkdir -p "$scratch/generated"
  copy_tracked "$scratch/generated" galaxy.yml changelogs CHANGELOG.rst
  (cd "$scratch/generated" && antsibull-changelog generate) > "$scratch/generate.log" 2>&1 ||
    { cat "$scratch/generate.log"; fail "antsibull-changelog generate cannot write CHANGELOG.rst from changelogs/changelog.yaml"; }
  diff -u CHANGELOG.rst "$scratch/generated/CHANGELOG.rst" ||
    fail "CHANGELOG.rst is not what changelogs/changelog.yaml says: run antsibull-changelog generate"
  echo "changelog: CHANGELOG.rst matches changelogs/changelog.yaml"
fi
# The product as ansible-doc sees it (antsibull-changelog lists new plugins with it): tracked files
# and untracked ones that are not ignored.
copy_tracked "$scratch" galaxy.yml meta plugins roles changelogs
fragments=$(find "$scratch/changelogs/fragments" -name '*.yml' -o -name '*.yaml' 2> /dev/null | wc -l)
if ((fragments == 0)); then
  echo "changelog: no fragments since release $version"
  exit 0
fi

(cd "$scratch" && antsibull-changelog release --version "$preview" --date "$(date -u +%Y-%m-%d)") > "$scratch/release.log" 2>&1 ||
  { cat "$scratch/release.log"; fail "antsibull-changelog release cannot build CHANGELOG.rst from the fragments"; }
[[ -s $scratch/CHANGELOG.rst ]] || fail "antsibull-changelog release wrote no CHANGELOG.rst"

# Every entry of every fragment must be in the preview (its first words are enough to find it).
python - "$scratch/CHANGELOG.rst" changelogs/fragments <<'EOF' || exit 1
import os, re, sys, yaml
text = re.sub(r"\s+", " ", open(sys.argv[1], encoding="utf-8").read())
missing = []
for name in sorted(os.listdir(sys.argv[2])):
    if not name.endswith((".yml", ".yaml")):
        continue
    data = yaml.safe_load(open(os.path.join(sys.argv[2], name), encoding="utf-8")) or {}
    for section, entries in data.items():
        if section == "trivial":
            continue
        for entry in entries if isinstance(entries, list) else [entries]:
            words = " ".join(re.sub(r"\s+", " ", str(entry)).split()[:6])
            if words not in text:
                missing.append("%s (%s): %s" % (name, section, words))
if missing:
    print("changelog: FAILED: not in the CHANGELOG.rst preview:\n  " + "\n  ".join(missing))
    sys.exit(1)
EOF
mkdir -p build/changelog-preview
cp "$scratch/CHANGELOG.rst" build/changelog-preview/CHANGELOG.rst
echo "changelog: $fragments fragments render as release $preview (preview: build/changelog-preview/CHANGELOG.rst)"
