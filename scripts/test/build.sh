#!/usr/bin/env bash
# Builds the collection tarball into build/, checks it holds only the product, installs it offline
# into an empty collections path and uses it from there: ansible-doc lists and renders every module,
# and `ansible localhost -m ramdisk.provision.ramdisk_facts` runs.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$SECONDS
export PATH=$PWD/.venv/bin:$PATH
# Test, CI and lab files that galaxy.yml's build_ignore must keep out of the tarball.
FORBIDDEN=(molecule tests scripts .ci .config .github Makefile requirements .venv .cache .ansible build .git)

version=$(python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
tarball=build/ramdisk-provision-$version.tar.gz
echo "build: ansible-galaxy collection build -> $tarball"
mkdir -p build
ansible-galaxy collection build --force --output-path build/ . > /dev/null

echo "build: checking the tarball holds no test, CI or lab files"
listing=$(tar -tzf "$tarball")
bad=()
for name in "${FORBIDDEN[@]}"; do
  if grep -qE "^(\./)?${name//./\\.}(/|$)" <<< "$listing"; then bad+=("$name"); fi
done
# Hidden files and caches (.pytest_cache, .config, ...) are never part of the product either.
mapfile -t -O "${#bad[@]}" bad < <(grep -oE '^(\./)?\.[^/]+' <<< "$listing" | sed 's|^\./||' | sort -u | grep -vxF -f <(printf '%s\n' "${bad[@]}" ""))
if grep -qE '(^|/)__pycache__/|\.pyc$' <<< "$listing"; then bad+=(__pycache__); fi
if ((${#bad[@]})); then
  echo "build: FAILED: $tarball contains ${bad[*]} (add them to build_ignore in galaxy.yml)"
  exit 1
fi
mapfile -t modules < <(sed -nE 's|^(\./)?plugins/modules/([a-z0-9_]+)\.py$|\2|p' <<< "$listing" | sort)
echo "build: tarball has $(wc -l <<< "$listing") entries, modules: ${modules[*]:-none}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "build: installing the tarball offline into an empty collections path (ansible.posix from the ansible package)"
# Only the installed copy: not the checkout's link in .cache/collections. ansible.posix still
# comes from the ansible package in the venv's site-packages.
export ANSIBLE_COLLECTIONS_PATH=$tmp
ansible-galaxy collection install --offline --no-deps -p "$tmp" "$tarball" > /dev/null
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
cd "$tmp"

where=$(ansible-galaxy collection list ramdisk.provision --format json)
python - "$where" "$tmp" <<'EOF'
import json, sys
found = json.loads(sys.argv[1])
if list(found) != [sys.argv[2] + '/ansible_collections'] or 'ramdisk.provision' not in found[sys.argv[2] + '/ansible_collections']:
    print(f'build: FAILED: ramdisk.provision should be found only in the temporary path, found: {found}')
    sys.exit(1)
EOF
python -c 'import ansible_collections.ansible.posix' 2>/dev/null ||
  { echo "build: FAILED: ansible.posix is not installed (the ansible package brings it)"; exit 1; }

echo "build: ansible-doc lists and renders the modules and filters from the installed copy"
listed=$(ansible-doc -t module -l ramdisk.provision -j)
missing=()
for module in "${modules[@]}"; do
  python -c 'import json, sys; sys.exit(sys.argv[2] not in json.loads(sys.argv[1]))' "$listed" "ramdisk.provision.$module" ||
    missing+=("$module")
  ansible-doc -t module "ramdisk.provision.$module" > /dev/null || missing+=("$module (render)")
done
# Filters are documented in plugins/filter/<name>.yml beside the Python that holds them.
mapfile -t filters < <(sed -nE 's|^(\./)?plugins/filter/([a-z0-9_]+)\.ya?ml$|\2|p' <<< "$listing" | sort)
listed=$(ansible-doc -t filter -l ramdisk.provision -j)
for filter in "${filters[@]}"; do
  python -c 'import json, sys; sys.exit(sys.argv[2] not in json.loads(sys.argv[1]))' "$listed" "ramdisk.provision.$filter" ||
    missing+=("$filter (filter)")
  ansible-doc -t filter "ramdisk.provision.$filter" > /dev/null || missing+=("$filter (filter, render)")
done
if ((${#missing[@]})); then
  echo "build: FAILED: ansible-doc cannot list or render: ${missing[*]}"
  exit 1
fi
if [[ " ${modules[*]} " != *" ramdisk_facts "* ]]; then
  echo "build: FAILED: plugins/modules/ramdisk_facts.py is not in the tarball"
  exit 1
fi

echo "build: ansible localhost -m ramdisk.provision.ramdisk_facts from the installed copy"
out=$(ANSIBLE_LOAD_CALLBACK_PLUGINS=true ANSIBLE_STDOUT_CALLBACK=json ansible localhost -m ramdisk.provision.ramdisk_facts) || true
python - "$out" <<'EOF'
import json, sys
def fail(msg):
    print('build: FAILED: ' + msg)
    sys.exit(1)
try:
    result = json.loads(sys.argv[1])['plays'][0]['tasks'][0]['hosts']['localhost']
except (ValueError, LookupError):
    fail('no result from ramdisk_facts:\n' + sys.argv[1][-2000:])
if result.get('failed') or result.get('unreachable'):
    fail('ramdisk_facts failed: ' + str(result.get('msg', result))[:2000])
if result.get('changed'):
    fail('ramdisk_facts reported changed: a facts module must not change the host')
if not result.get('ansible_facts'):
    fail('ramdisk_facts returned no ansible_facts')
print('build: ramdisk_facts returned ' + ', '.join(sorted(result['ansible_facts'])))
EOF

echo "build: PASSED ($tarball, $((SECONDS - started)) s)"
