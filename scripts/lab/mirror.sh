# shellcheck shell=bash
# Sourced by the lab's image scripts: prints the Debian mirror to debootstrap from, the one this
# machine's apt already uses unless LAB_MIRROR names another.
lab_mirror() {
  if [[ -n ${LAB_MIRROR:-} ]]; then echo "$LAB_MIRROR"; return; fi
  local uri
  uri=$(grep -hoE '^(URIs:|deb)\s+\S+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | awk '{print $2}' | grep -v -e security -e '^\[' | head -n1 || true)
  [[ -n $uri ]] || { echo "$(basename "$0"): no Debian mirror in /etc/apt sources; set LAB_MIRROR" >&2; exit 1; }
  echo "$uri"
}
