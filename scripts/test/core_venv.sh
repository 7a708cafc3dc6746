#!/usr/bin/env bash
# Prints the virtualenv that runs ansible-core X.Y, making it first when needed: .venv when it has the
# very version requirements/sanity-core-X.Y.txt pins, else .cache/venv-core-X.Y from that file (without
# a file, the newest X.Y.* from PyPI). sanity.sh and tarball_lab.sh share these venvs.
# ansible-core 2.20 and later need Python 3.12 or newer, which Debian 12 has not: their venv is made with
# Debian 13's Python in the controller container (scripts/test/controller.sh), and what this prints is then
# .cache/core-X.Y, whose bin/ holds python, ansible-playbook, ansible-galaxy, ansible-inventory and
# ansible-test as small scripts that run the venv's own in that container. Callers use either the same way.
# Usage: scripts/test/core_venv.sh X.Y   (the venv's path, relative to the repo, on stdout; progress on stderr)
set -euo pipefail
cd "$(dirname "$0")/../.."

core=${1:-}
[[ $core =~ ^2\.([0-9]+)$ ]] || { echo "core_venv: wants a version such as 2.17" >&2; exit 2; }
# The first ansible-core whose controller needs Python 3.12.
contained=0
((BASH_REMATCH[1] >= 20)) && contained=1

pins=requirements/sanity-core-$core.txt
pinned=
if [[ -f $pins ]]; then
  pinned=$(sed -nE 's/^ansible-core==([0-9][^ ;#]*).*/\1/p' "$pins")
  [[ -n $pinned ]] || { echo "core_venv: $pins does not pin ansible-core==X.Y.Z" >&2; exit 2; }
else
  echo "core_venv: no $pins; taking the newest ansible-core $core.* from PyPI" >&2
fi
dev_core=$(.venv/bin/python -c 'import ansible; print(ansible.__version__)' 2> /dev/null || true)
if [[ -n $pinned && $pinned == "$dev_core" ]]; then
  echo .venv
  exit 0
fi

venv=.cache/venv-core-$core
# One maker at a time: sanity and the tarball lab may ask for the same venv at once.
mkdir -p .cache
exec 9> ".cache/venv-core-$core.lock"
flock 9
stamp=$venv/.requirements.sha256
want=$(if [[ -f $pins ]]; then sha256sum "$pins" | cut -d' ' -f1; else echo "newest $core"; fi)
run=()
if ((contained)); then
  run=(bash scripts/test/controller.sh)
  want="$want $(docker image inspect -f '{{ .Id }}' ramdisk-lab/debian:13-controller 2> /dev/null || echo none)"
fi
if [[ ! -f $venv/bin/ansible-playbook || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  where=
  ((contained)) && where=" in the Debian 13 controller container"
  echo "core_venv: creating $venv with ansible-core ${pinned:-$core.* (newest)}$where" >&2
  rm -rf "$venv"
  if ((contained)); then
    "${run[@]}" python3 -m venv "$venv"
  else
    python3.11 -m venv "$venv"
  fi
  if [[ -f $pins ]]; then
    "${run[@]}" "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$pins" >&2
  else
    "${run[@]}" "$venv/bin/python" -m pip install -q --disable-pip-version-check "ansible-core==$core.*" >&2
  fi
  echo "$want" > "$stamp"
fi
((contained)) || { echo "$venv"; exit 0; }

# The venv's programs, each as a script that runs it in the controller container.
front=.cache/core-$core
mkdir -p "$front/bin"
for program in python ansible ansible-playbook ansible-galaxy ansible-inventory ansible-test; do
  cat > "$front/bin/$program.new.$$" << SCRIPT
#!/usr/bin/env bash
# Made by scripts/test/core_venv.sh: $venv/bin/$program on Debian 13's Python (scripts/test/controller.sh).
exec bash "$PWD/scripts/test/controller.sh" "$PWD/$venv/bin/$program" "\$@"
SCRIPT
  chmod 0755 "$front/bin/$program.new.$$"
  mv "$front/bin/$program.new.$$" "$front/bin/$program"
done
echo "$front"
