#!/usr/bin/env bash
# Installs the given Debian packages that are not installed yet (apt-get
# update first, only when something is missing). Needs root (or sudo)
# then. Used by scripts/deps.sh, scripts/peers/deps.sh and
# scripts/figures/servers-deps.sh.
# Usage: scripts/apt-missing.sh LABEL PACKAGE...   (LABEL names the caller in the message)
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$label: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
