#!/usr/bin/env bash
# Runs one command on a Debian 13 controller: the container image ramdisk-lab/debian:13-controller
# (scripts/lab/images.sh), Debian 13's own Python 3.13 with venv and git. ansible-core 2.20 and later need
# Python 3.12 or newer on the controller, and a Debian 12 machine has 3.11; core_venv.sh makes their venvs here.
# The repository is mounted at its own path, so a path means the same inside and out. The machine's network (pip
# reaches PyPI), its CA bundle and pip settings, and its container engine (the lab's docker connection, with this
# machine's docker client) are shared. ANSIBLE_*, PIP_* and proxy variables are passed on.
# Usage: scripts/test/controller.sh COMMAND [ARG...]   (from a working directory inside the repository)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
image=ramdisk-lab/debian:13-controller
case $PWD/ in
  "$repo"/*) ;;
  *) echo "controller: run from inside $repo (the only directory the controller sees), not $PWD" >&2; exit 2 ;;
esac
docker image inspect "$image" > /dev/null 2>&1 ||
  { echo "controller: no image $image; run scripts/lab/images.sh trixie-controller" >&2; exit 2; }

# PWD as a shell sets it: the playbooks write their results under it. The home (ansible-test's venvs, Ansible's
# temporary files) outlives the container and the clone, as the machine's own home does for the other cores.
home=${XDG_CACHE_HOME:-$HOME/.cache}/ramdisk-provision/controller-home
mkdir -p "$home"
args=(--rm -i --init --network host --user 0:0 -w "$PWD" -v "$repo:$repo" -v "$home:$home"
      -e HOME="$home" -e PWD="$PWD" -e PIP_DISABLE_PIP_VERSION_CHECK=1 -e LC_ALL=C.UTF-8)
# The lab's hosts are containers of this machine's engine, reached with its client.
[[ -S /var/run/docker.sock ]] && args+=(-v /var/run/docker.sock:/var/run/docker.sock)
docker_client=$(command -v docker)
args+=(-v "$docker_client:/usr/local/bin/docker:ro")
# pip inside trusts what pip outside trusts: this machine's CA bundle (a proxy's own CA may be in it) and pip.conf.
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  args+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
         -e PIP_CERT=/etc/ssl/certs/ca-certificates.crt -e REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt)
fi
[[ -f /etc/pip.conf ]] && args+=(-v /etc/pip.conf:/etc/pip.conf:ro)
while IFS= read -r name; do
  args+=(-e "$name")
done < <(compgen -e | grep -E '^(ANSIBLE_|PIP_|MOLECULE_|https?_proxy$|HTTPS?_PROXY$|no_proxy$|NO_PROXY$)' || true)
exec docker run "${args[@]}" "$image" "$@"
