#!/usr/bin/env bash
# Installs what scripts/peers/ needs to build and run the originals (Debian
# packages only, if missing): libpmem/libpmemobj (PMDK: the LB+-Tree code
# maps its NVM file with libpmem; FPTree allocates and persists with
# libpmemobj), TBB (FPTree's speculative_spin_rw_mutex), jemalloc (FPTree's
# CMake links it), Boost headers (FPTree's boost::lockfree::queue), and
# taskset (util-linux) for pinning. Needs root (or sudo) the first time.
set -euo pipefail
pkgs=(g++ python3 util-linux libpmem-dev libpmemobj-dev libtbb-dev libjemalloc-dev libboost-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "peers deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
