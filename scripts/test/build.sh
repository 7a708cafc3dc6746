#!/usr/bin/env bash
# Builds the collection tarball into build/, checks it holds only the product, installs it offline
# into an empty collections path (ansible.posix and community.general come from the ansible package)
# and uses it from there: ansible-doc lists and renders every module, filter and role,
# `ansible-playbook --syntax-check` passes for every playbook it ships, and
# `ansible localhost -m ramdisk.provision.ramdisk_facts` runs.
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
echo "build: installing the tarball offline into an empty collections path (dependencies from the ansible package)"
# Only the installed copy: not the checkout's link in .cache/collections. ansible.posix and
# community.general still come from the ansible package in the venv's site-packages.
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
for dependency in ansible.posix community.general; do
  python -c "import ansible_collections.$dependency" 2> /dev/null ||
    { echo "build: FAILED: $dependency is not installed (the ansible package brings it)"; exit 1; }
done

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
# Roles document their entry points in meta/argument_specs.yml; ansible-doc renders them too.
mapfile -t roles < <(sed -nE 's|^(\./)?roles/([a-z0-9_]+)/meta/argument_specs\.ya?ml$|\2|p' <<< "$listing" | sort)
for role in "${roles[@]}"; do
  ansible-doc -t role "ramdisk.provision.$role" > /dev/null 2>&1 || missing+=("$role (role)")
done
if ((${#missing[@]})); then
  echo "build: FAILED: ansible-doc cannot render: ${missing[*]}"
  exit 1
fi
echo "build: ansible-doc renders ${#modules[@]} modules, ${#filters[@]} filters and ${#roles[@]} roles"

# Every playbook the tarball ships, by its collection name: this resolves every role, module and
# filter it uses from the installed copy only.
mapfile -t playbooks < <(sed -nE 's|^(\./)?playbooks/([A-Za-z0-9_]+)\.ya?ml$|\2|p' <<< "$listing" | sort)
((${#playbooks[@]})) || { echo "build: FAILED: the tarball has no playbooks"; exit 1; }
echo "build: ansible-playbook --syntax-check of ${playbooks[*]} from the installed copy"
bad=()
for playbook in "${playbooks[@]}"; do
  if ! out=$(ansible-playbook -i localhost, --syntax-check "ramdisk.provision.$playbook" 2>&1); then
    echo "$out" | tail -n 20 | sed 's/^/build:   /'
    bad+=("$playbook")
  fi
done
if ((${#bad[@]})); then
  echo "build: FAILED: --syntax-check failed for: ${bad[*]}"
  exit 1
fi
# --syntax-check does not resolve include_role; every ramdisk.provision name a playbook uses must be
# a role, module, filter or playbook of the tarball.
known=" ${roles[*]} ${modules[*]} ${filters[*]} ${playbooks[*]} "
mapfile -t used < <(grep -rhoE 'ramdisk\.provision\.[a-z0-9_]+' "$tmp/ansible_collections/ramdisk/provision/playbooks" |
  sed 's/^ramdisk\.provision\.//' | sort -u)
for name in "${used[@]}"; do
  [[ $known == *" $name "* ]] || bad+=("$name")
done
if ((${#bad[@]})); then
  echo "build: FAILED: the playbooks use ramdisk.provision.${bad[*]}, which the tarball does not have"
  exit 1
fi
echo "build: the playbooks use ${used[*]}, all in the tarball"

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
    # The JSON document, without what other callbacks enabled in ansible.cfg print after it (the timer).
    text = sys.argv[1]
    document = json.JSONDecoder().raw_decode(text[text.index('{'):])[0]
    result = document['plays'][0]['tasks'][0]['hosts']['localhost']
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
