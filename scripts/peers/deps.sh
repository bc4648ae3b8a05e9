#!/usr/bin/env bash
# Installs what scripts/peers/ needs to build and run the originals (Debian
# packages only, if missing): libpmem/libpmemobj (PMDK: the LB+-Tree code
# maps its NVM file with libpmem; FPTree allocates and persists with
# libpmemobj), TBB (FPTree's speculative_spin_rw_mutex), jemalloc (FPTree's
# CMake links it), Boost headers (FPTree's boost::lockfree::queue), and
# taskset (util-linux) for pinning. Needs root (or sudo) the first time.
set -euo pipefail
pkgs=(g++ python3 util-linux libpmem-dev libpmemobj-dev libtbb-dev libjemalloc-dev libboost-dev libnuma-dev)
"$(dirname "$0")/../apt-missing.sh" "peers deps" "${pkgs[@]}"
