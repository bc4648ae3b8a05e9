#!/usr/bin/env bash
# Installs what scripts/compat/ runs (Debian packages only, if missing):
# redis-server and redis-tools (the Redis side of every comparison),
# memcached and libmemcached-tools (memcapable, for the memcached side),
# tcl (tclsh runs Redis's own test suite), python3 and python3-venv (the
# redis-py run's virtual environment), maven and openjdk-17-jdk-headless
# (ycsb.sh builds YCSB from its sources). Not part of scripts/deps.sh: the
# test command needs none of them. Needs root (or sudo) the first time.
# The scripts start servers of their own on free loopback ports; a service
# the packages may start is left alone.
set -euo pipefail
pkgs=(redis-server redis-tools memcached libmemcached-tools tcl python3 python3-venv maven
  openjdk-17-jdk-headless)
"$(dirname "$0")/../apt-missing.sh" "compat deps" "${pkgs[@]}"
