#!/usr/bin/env bash
# Makes sure a Docker engine answers. The lab needs no container network, so the engine runs
# without a bridge and without touching iptables; containers use network_mode: none.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
command -v dockerd >/dev/null || { echo "dockerd.sh: dockerd is missing; run scripts/bootstrap.sh first" >&2; exit 1; }
mkdir -p /var/log
echo "dockerd.sh: starting dockerd (--bridge=none --iptables=false)"
# Its own session: the engine outlives the shell (and process group) that started it.
setsid nohup dockerd --bridge=none --iptables=false --ip6tables=false >/var/log/ramdisk-lab-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "dockerd.sh: dockerd did not answer within 60 s; see /var/log/ramdisk-lab-dockerd.log" >&2
exit 1
