#!/usr/bin/env bash
# Checks the execution environment definitions without building an image (no registry here):
# builds the collection into build/ee/, runs `ansible-builder create` from execution-environment.yml
# into a scratch directory, and checks the build context: a Containerfile that installs the collection
# and its Galaxy dependencies, the very tarball just built, and that ansible-builder's introspection
# finds the Python requirements of meta/execution-environment.yml in the installed collection.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$SECONDS
export PATH=$PWD/.venv/bin:$PATH
fail() {
  echo "ee: FAILED: $*"
  exit 1
}
command -v ansible-builder > /dev/null || fail "ansible-builder is not installed; run scripts/bootstrap.sh (requirements/dev.txt pins it)"
echo "ee: $(ansible-builder --version | head -n 1 | sed 's/^/ansible-builder /')"

# The collection's own EE metadata must ship in the tarball: that is what ansible-builder reads.
for file in meta/execution-environment.yml meta/ee-requirements.txt execution-environment.yml; do
  [[ -f $file ]] || fail "$file is missing"
done
python - <<'EOF' || exit 1
import sys, yaml
meta = yaml.safe_load(open("meta/execution-environment.yml"))
ee = yaml.safe_load(open("execution-environment.yml"))
problems = []
if meta.get("version") != 1 or "python" not in (meta.get("dependencies") or {}):
    problems.append("meta/execution-environment.yml needs version: 1 and dependencies.python")
if ee.get("version") != 3:
    problems.append("execution-environment.yml must use the ansible-builder 3 schema (version: 3)")
if problems:
    print("ee: FAILED: " + "; ".join(problems))
    sys.exit(1)
EOF

version=$(python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
tarball=build/ee/ramdisk-provision-$version.tar.gz
# execution-environment.yml takes every ramdisk-provision-*.tar.gz in build/ee: keep exactly one there.
rm -rf build/ee
mkdir -p build/ee
ansible-galaxy collection build --force --output-path build/ee . > /dev/null
echo "ee: built $tarball"
listing=$(tar -tzf "$tarball")
for file in meta/execution-environment.yml meta/ee-requirements.txt; do
  grep -qxE "(\./)?$file" <<< "$listing" || fail "$file is not in $tarball (check build_ignore in galaxy.yml)"
done
grep -qxE '(\./)?execution-environment.yml' <<< "$listing" && fail "the top-level execution-environment.yml is in $tarball (add it to build_ignore)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
context=$scratch/context
echo "ee: ansible-builder create -f execution-environment.yml -c <scratch>/context"
ansible-builder create -f execution-environment.yml -c "$context" --output-filename Containerfile -v 1 > "$scratch/create.log" 2>&1 ||
  { cat "$scratch/create.log"; fail "ansible-builder create failed"; }

containerfile=$context/Containerfile
[[ -f $containerfile ]] || fail "no Containerfile in the build context"
copied=$context/_build/collections/$(basename "$tarball")
[[ -f $copied ]] || fail "the build context has no $(basename "$tarball") under _build/collections"
cmp -s "$copied" "$tarball" || fail "the tarball in the build context differs from $tarball"
[[ $(find "$context/_build/collections" -name 'ramdisk-provision-*.tar.gz' | wc -l) == 1 ]] ||
  fail "more than one collection tarball in the build context"
grep -q 'ansible-galaxy collection install .*/build/collections/ramdisk-provision-\*\.tar\.gz' "$containerfile" ||
  fail "the Containerfile does not install the collection tarball"
grep -q 'ansible-galaxy collection install .*-r requirements.yml' "$containerfile" ||
  fail "the Containerfile does not install the Galaxy requirements"
grep -q 'introspect' "$containerfile" || fail "the Containerfile does not introspect the collections' requirements"
python - "$context/_build/requirements.yml" <<'EOF' || exit 1
import sys, yaml
wanted = {"ansible.posix", "community.general"}
have = {c["name"] if isinstance(c, dict) else c for c in (yaml.safe_load(open(sys.argv[1])) or {}).get("collections", [])}
if not wanted <= have:
    print("ee: FAILED: _build/requirements.yml lacks %s" % ", ".join(sorted(wanted - have)))
    sys.exit(1)
EOF
echo "ee: build context has the Containerfile, the collection tarball and its Galaxy requirements"

# What the builder stage does with the collections the galaxy stage installed.
echo "ee: ansible-builder introspect on the installed collection"
# Only this path: with the checkout's link on the collections path, ansible-galaxy would see the
# collection as installed already and install nothing.
ANSIBLE_COLLECTIONS_PATH=$scratch/collections \
  ansible-galaxy collection install --offline --no-deps -p "$scratch/collections" "$tarball" > /dev/null
[[ -f $scratch/collections/ansible_collections/ramdisk/provision/meta/execution-environment.yml ]] ||
  fail "the tarball did not install into the scratch collections path"
ansible-builder introspect --sanitize "$scratch/collections" > "$scratch/introspect.txt" 2>&1 ||
  { cat "$scratch/introspect.txt"; fail "ansible-builder introspect failed"; }
mapfile -t wanted < <(grep -vE '^\s*(#|$)' meta/ee-requirements.txt | sed -E 's/[<>=!~ ;#].*//')
for package in "${wanted[@]}"; do
  grep -qiE "^- '?${package}\b.*from collection ramdisk\.provision" "$scratch/introspect.txt" ||
    { cat "$scratch/introspect.txt"; fail "introspection does not report $package from ramdisk.provision"; }
done
echo "ee: introspection finds ${wanted[*]} from ramdisk.provision"
echo "ee: PASSED ($((SECONDS - started)) s)"
