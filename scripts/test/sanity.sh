#!/usr/bin/env bash
# Runs `ansible-test sanity` on a fresh copy of the collection, offline, for the Python of the venv that runs the
# ansible-core (3.11 on this machine; Debian 13's 3.13 in the controller container for 2.20 and later).
# Usage: scripts/test/sanity.sh [--core X.Y | --all] [more ansible-test sanity options, e.g. --test pep8]
#   --core X.Y  use the ansible-core pinned in requirements/sanity-core-X.Y.txt, in .cache/venv-core-X.Y
#               (or .venv when it has that very version; scripts/test/core_venv.sh makes it)
#   --all       run once per requirements/sanity-core-*.txt (every supported ansible-core), in turn
# The copy (.cache/ansible-test[-core-X.Y]/ansible_collections/ramdisk/provision) holds the tracked and the
# untracked-but-not-ignored files, so ansible-test lints only the product and writes its
# tests/output there, not in the repo.
set -euo pipefail
cd "$(dirname "$0")/../.."

core=
all=
extra=()
while (($#)); do
  case $1 in
    --core)
      [[ $# -ge 2 && $2 =~ ^2\.[0-9]+$ ]] || { echo "sanity: --core wants a version such as 2.17" >&2; exit 2; }
      core=$2
      shift 2
      ;;
    --all)
      all=1
      shift
      ;;
    -h | --help)
      sed -n '2,10p' "$0"
      exit 0
      ;;
    *)
      extra+=("$1")
      shift
      ;;
  esac
done

started=$SECONDS
if [[ -n $all ]]; then
  [[ -z $core ]] || { echo "sanity: give --core or --all, not both" >&2; exit 2; }
  mapfile -t cores < <(find requirements -maxdepth 1 -name 'sanity-core-*.txt' | sed -E 's/.*sanity-core-([0-9.]+)\.txt$/\1/' | sort -V)
  ((${#cores[@]})) || { echo "sanity: no requirements/sanity-core-*.txt" >&2; exit 2; }
  summary=()
  failed=0
  for each in "${cores[@]}"; do
    t0=$SECONDS
    if bash "$0" --core "$each" "${extra[@]}"; then
      summary+=("ansible-core $each: passed ($((SECONDS - t0)) s)")
    else
      summary+=("ansible-core $each: FAILED ($((SECONDS - t0)) s)")
      failed=$((failed + 1))
    fi
  done
  printf 'sanity: %s\n' "${summary[@]}"
  if ((failed)); then
    echo "sanity: FAILED on $failed of ${#cores[@]} ansible-core versions ($((SECONDS - started)) s)"
    exit 1
  fi
  echo "sanity: PASSED on ansible-core ${cores[*]} ($((SECONDS - started)) s)"
  exit 0
fi

venv=.venv
if [[ -n $core ]]; then
  venv=$(bash scripts/test/core_venv.sh "$core")
fi
[[ -x $venv/bin/ansible-test ]] || { echo "sanity: $venv/bin/ansible-test missing; run scripts/bootstrap.sh" >&2; exit 2; }
read -r core_version python_version home < <("$venv/bin/python" -c 'import ansible, os, sys
print(ansible.__version__, "%d.%d" % sys.version_info[:2], os.path.expanduser("~"))')
echo "sanity: ansible-core $core_version on Python $python_version from $venv"

# ansible-test bootstraps pip in each venv it makes with get-pip.py from a host we cannot reach;
# the file name carries the pip version this ansible-test asks for.
pip_version=$("$venv/bin/python" - <<'EOF'
import os, re, ansible_test
source = open(os.path.join(os.path.dirname(ansible_test.__file__), '_internal', 'python_requirements.py')).read()
print(re.search(r"""\bpip\s*=\s*['"]([0-9.]+)['"]""", source).group(1))
EOF
)
standin=$home/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [[ -f $standin ]] && ! grep -q "Offline stand-in for pip's get-pip.py" "$standin"; then
  echo "sanity: keeping the real get-pip $pip_version already at $standin"
elif ! cmp -s scripts/test/get_pip_standin.py "$standin"; then
  mkdir -p "$(dirname "$standin")"
  cp scripts/test/get_pip_standin.py "$standin"
  echo "sanity: installed the get-pip $pip_version stand-in at $standin"
else
  echo "sanity: get-pip $pip_version stand-in present at $standin"
fi

# One copy per ansible-core so runs with --core can go on beside the default one.
work=.cache/ansible-test${core:+-core-$core}
copy=$work/ansible_collections/ramdisk/provision
rm -rf "$copy"
mkdir -p "$copy"
git ls-files -z -co --exclude-standard |
  while IFS= read -r -d '' path; do
    # a tracked file deleted in the work tree is still listed
    if [[ -e $path || -L $path ]]; then printf '%s\0' "$path"; fi
  done |
  xargs -0 -r cp -a --parents -t "$copy"
# ansible-test lists content with git from the nearest .git upwards; without one here it would
# find the repo, where .cache/ is ignored, and see no files. The copied .gitignore keeps
# tests/output out.
git init -q "$copy"
echo "sanity: copied $(find "$copy" -type f | wc -l) files to $copy"

log=$work/sanity-$core_version.log
echo "sanity: running ansible-test sanity --venv --python $python_version ${extra[*]} (log: $log)"
rc=0
(cd "$copy" && "$OLDPWD/$venv/bin/ansible-test" sanity --venv --python "$python_version" --color no "${extra[@]}") \
  > "$log" 2>&1 || rc=$?

# Summary from ansible-test's own messages; the full output stays in the log.
ran=$(grep -c '^Running sanity test ' "$log" || true)
missing=$(sed -nE 's/^WARNING: Required program "([^"]+)" not found.*/\1/p' "$log" | sort -u | paste -sd " " -)
echo "sanity: $ran tests run${missing:+; skipped for want of a program: $missing}"
if ((rc)); then
  sed -nE 's/^ERROR: Found ([0-9]+) (.+) issue\(s\).*/sanity:   FAILED \2: \1 issue(s)/p' "$log"
  grep -E '^ERROR: [^ ]+:[0-9]+:[0-9]+: ' "$log" | sed 's/^ERROR: /sanity:     /' | head -n 200 || true
  if ! grep -qE '^ERROR: Found [0-9]+ ' "$log"; then
    tail -n 20 "$log" | sed 's/^/sanity:   /'
  fi
  echo "sanity: FAILED (ansible-test exit $rc, ansible-core $core_version, $((SECONDS - started)) s; full log: $log)"
  exit 1
fi
echo "sanity: PASSED (ansible-core $core_version, $((SECONDS - started)) s)"
