#!/usr/bin/env bash
# Installs the servers scripts/figures/ycsb.sh measures pmserver against
# (Debian packages only, if missing): redis-server (Redis 7 on Debian 12)
# and memcached. Not part of scripts/deps.sh: the test command does not
# need them (pmclient's end-to-end test skips when they are absent).
# Needs root (or sudo) the first time. The packages' services are not
# started here; ycsb.sh starts its own servers on free ports.
set -euo pipefail
pkgs=(redis-server memcached python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "servers deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
