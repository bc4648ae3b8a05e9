#!/usr/bin/env bash
# How evenly nutcracker (twemproxy) spreads keys over the memcached ports
# of a running local cluster (scripts/cluster/local.sh), for each of its
# hash functions with ketama distribution: the figure behind the hash
# local.sh configures (docs/cluster.md).
#
#   scripts/cluster/proxy-spread.sh DIR [KEYS] [KEY_FORMAT]
#
# For each hash it starts a nutcracker of its own in front of DIR's nodes,
# sets KEYS keys (default 30000) named by KEY_FORMAT (a Python format with
# one field, default "user{}") through it, and prints the sets each node
# received (the delta of its cmd_set counter) and the largest share over
# an even one. PY: a Python with pymemcache (default build/.venv's).
set -euo pipefail
dir=${1:?usage: proxy-spread.sh DIR [KEYS] [KEY_FORMAT]}
keys=${2:-30000}
fmt=${3:-user\{\}}
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PY:-$repo_root/build/.venv/bin/python}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mcs=()
for f in "$dir"/node-*/ports; do mcs+=("$(cut -d' ' -f2 "$f")"); done
[ ${#mcs[@]} -gt 0 ] || { echo "proxy-spread.sh: no nodes under $dir" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for h in fnv1a_64 fnv1_64 fnv1a_32 fnv1_32 md5 crc32a murmur hsieh jenkins one_at_a_time; do
  port=$(free_port)
  {
    echo "spread:"
    echo "  listen: 127.0.0.1:$port"
    echo "  hash: $h"
    echo "  distribution: ketama"
    echo "  servers:"
    for i in "${!mcs[@]}"; do echo "    - 127.0.0.1:${mcs[$i]}:1 node-$((i + 1))"; done
  } > "$work/$h.yml"
  nutcracker -c "$work/$h.yml" -o "$work/$h.log" -p "$work/$h.pid" -s "$(free_port)" \
    -a 127.0.0.1 -d
  for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
    sleep 0.1
  done
  "$py" - "$port" "$h" "$keys" "$fmt" "${mcs[@]}" <<'PY'
import sys
from pymemcache.client.base import Client
port, name, n, fmt = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
nodes = [int(p) for p in sys.argv[5:]]
def sets(p):
    c = Client(("127.0.0.1", p))
    s = c.stats()
    c.close()
    return int(s[b"cmd_set"])
before = [sets(p) for p in nodes]
c = Client(("127.0.0.1", port))
for i in range(n):
    c.set(fmt.format(i), b"x", noreply=False)
c.close()
got = [a - b for a, b in zip([sets(p) for p in nodes], before)]
print(f"{name:14s} {' '.join(f'{g:7d}' for g in got)}   largest/even {max(got) * len(got) / n:.3f}")
PY
  kill "$(cat "$work/$h.pid")"
done
