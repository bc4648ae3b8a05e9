#!/usr/bin/env bash
# Installs the servers scripts/figures/ycsb.sh measures pmserver against
# (Debian packages only, if missing): redis-server (Redis 7 on Debian 12)
# and memcached. Not part of scripts/deps.sh: the test command does not
# need them (pmclient's end-to-end test skips when they are absent).
# Needs root (or sudo) the first time. ycsb.sh starts servers of its own
# on free ports; a service the packages may start is left alone.
set -euo pipefail
pkgs=(redis-server memcached python3)
"$(dirname "$0")/../apt-missing.sh" "servers deps" "${pkgs[@]}"
