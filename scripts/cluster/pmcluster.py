#!/usr/bin/env python3
"""pmcluster: installs maps on a pmserver cluster and moves slots between its
nodes while clients run (docs/cluster.md). Python 3, standard library only.

  pmcluster.py map HOST:PORT
      The map the node serves by, with its own moves.
  pmcluster.py reshard HOST:PORT --from NODE --to NODE (--slots N | --range A-B)
                       [--batch SLOTS] [--keys-per-migrate K] [--timeout-ms T]
      Moves slots from one node to another: N of the source's slots (its
      last ones), or the slots A..B (all the source's). NODE is a node id or
      HOST:PORT. Each slot: IMPORTING on the target, MIGRATING on the
      source, its keys copied by MIGRATE (the source answers -ASK for keys
      it no longer holds, so no client sees a key missing); after each
      batch of slots a map with a higher epoch gives them to the target,
      installed on the target first, then the source, then every other
      node. A move left unfinished (the tool or a node died) is finished
      first, so running the tool again resumes it.
  pmcluster.py resume HOST:PORT
      Finishes the moves a previous reshard left, and nothing else.
  pmcluster.py rebalance HOST:PORT
      Moves slots until every node serves the same number (within one).
  pmcluster.py add-node HOST:PORT NEW_ID NEW_HOST:NEW_PORT
      Adds a node, with no slots, to every node's map (the new node must be
      running with a map that names it, such as the one this prints); then
      rebalance gives it slots.

HOST:PORT is any node's RESP address. Exit status 0 on success, 1 on a
failure (what failed is printed; the cluster is left in a state that
`resume` finishes), 2 on a usage error.
"""
import argparse
import socket
import sys
import time

SLOTS = 16384


class ClusterError(Exception):
    pass


class Conn:
    """A RESP connection to one node (RESP2, simple and bulk replies)."""

    def __init__(self, addr, timeout=30):
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ClusterError(f"{self.addr}: connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ClusterError(f"{self.addr}: connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ClusterError(f"{self.addr}: {rest.decode(errors='replace')}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ClusterError(f"{self.addr}: unexpected reply {line!r}")

    def pipeline(self, commands):
        out = b""
        for args in commands:
            args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
            out += b"*%d\r\n" % len(args)
            for a in args:
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return [self._reply() for _ in commands]

    def call(self, *args):
        r = self.pipeline([args])[0]
        if isinstance(r, ClusterError):
            raise r
        return r


class Map:
    """A cluster map as pmserver's map file writes it (server/cluster.h)."""

    def __init__(self, text):
        self.epoch = 0
        self.nodes = []  # [id, "host:port"]
        self.owner = [None] * SLOTS
        self.migrating = {}  # slot -> peer id (the node's own moves)
        self.importing = {}
        for raw in text.splitlines():
            w = raw.split("#", 1)[0].split()
            if not w:
                continue
            if w[0] == "epoch":
                self.epoch = int(w[1])
            elif w[0] == "node":
                self.nodes.append([w[1], w[2]])
                for r in w[3:]:
                    for slot in expand(r):
                        self.owner[slot] = w[1]
            elif w[0] in ("migrating", "importing"):
                table = self.migrating if w[0] == "migrating" else self.importing
                for slot in expand(w[1]):
                    table[slot] = w[2]
        if self.epoch == 0 or not self.nodes or None in self.owner:
            raise ClusterError("the node's map does not parse")

    def address(self, node_id):
        for i, a in self.nodes:
            if i == node_id:
                return a
        raise ClusterError(f"no node {node_id} in the map")

    def resolve(self, name):
        """A node id from an id or a HOST:PORT."""
        for i, a in self.nodes:
            if name in (i, a):
                return i
        raise ClusterError(f"no node {name} in the map")

    def slots_of(self, node_id):
        return [s for s in range(SLOTS) if self.owner[s] == node_id]

    def text(self):
        """The map without moves (what PMCLUSTER SETMAP takes)."""
        lines = [f"epoch {self.epoch}"]
        for node_id, addr in self.nodes:
            ranges, s = [], 0
            while s < SLOTS:
                if self.owner[s] != node_id:
                    s += 1
                    continue
                e = s
                while e + 1 < SLOTS and self.owner[e + 1] == node_id:
                    e += 1
                ranges.append(str(s) if s == e else f"{s}-{e}")
                s = e + 1
            lines.append(" ".join(["node", node_id, addr] + ranges))
        return "\n".join(lines) + "\n"


def expand(r):
    lo, _, hi = r.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def read_map(addr):
    c = Conn(addr)
    try:
        return Map(c.call("PMCLUSTER", "MAP").decode())
    finally:
        c.close()


def install(m, first=()):
    """Installs map m on every node: the `first` node ids in order, then the rest."""
    order = list(first) + [i for i, _ in m.nodes if i not in first]
    text = m.text()
    for node_id in order:
        c = Conn(m.address(node_id))
        try:
            have = Map(c.call("PMCLUSTER", "MAP").decode())
            if have.epoch < m.epoch:
                c.call("PMCLUSTER", "SETMAP", text)
        finally:
            c.close()


def move_keys(src, dst_addr, slot, keys_per_migrate, timeout_ms):
    """Copies every key of `slot` from src (a Conn) to dst_addr; returns how many."""
    host, port = dst_addr.rsplit(":", 1)
    moved = 0
    while True:
        keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, keys_per_migrate)
        if not keys:
            return moved
        r = src.call("MIGRATE", host, port, "", 0, timeout_ms, "REPLACE", "KEYS", *keys)
        if r not in ("OK", "NOKEY"):
            raise ClusterError(f"MIGRATE of slot {slot}: {r}")
        moved += len(keys)


def finish_moves(addr, keys_per_migrate, timeout_ms, log):
    """Finishes every move a node's map records; returns the map after."""
    m = read_map(addr)
    # First every node on the newest map any node has (a move whose map
    # reached some nodes only), which also ends the moves it completes.
    newest = max((read_map(a) for _, a in m.nodes), key=lambda x: x.epoch)
    if any(read_map(a).epoch < newest.epoch for _, a in newest.nodes):
        log(f"installing map epoch {newest.epoch} on the nodes that lack it")
        install(newest)
    m = read_map(addr)
    moves = {}  # (source, target) -> slots
    for node_id, node_addr in m.nodes:
        mine = read_map(node_addr)
        for slot, peer in mine.migrating.items():
            moves.setdefault((node_id, peer), set()).add(slot)
        for slot, peer in mine.importing.items():
            if m.owner[slot] == peer:
                moves.setdefault((peer, node_id), set()).add(slot)
    for (src_id, dst_id), slots in sorted(moves.items()):
        log(f"finishing {len(slots)} slot(s) left moving from {src_id[:8]} to {dst_id[:8]}")
        move_slots(m, src_id, dst_id, sorted(slots), len(slots), keys_per_migrate, timeout_ms, log)
        m = read_map(addr)
    return m


def move_slots(m, src_id, dst_id, slots, batch, keys_per_migrate, timeout_ms, log):
    src_addr, dst_addr = m.address(src_id), m.address(dst_id)
    src, dst = Conn(src_addr), Conn(dst_addr)
    try:
        for start in range(0, len(slots), batch):
            group = slots[start:start + batch]
            t0 = time.time()
            keys = 0
            for slot in group:
                dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
                src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
                keys += move_keys(src, dst_addr, slot, keys_per_migrate, timeout_ms)
            m = read_map(src_addr)
            for slot in group:
                m.owner[slot] = dst_id
            m.epoch += 1
            install(m, first=(dst_id, src_id))
            dt = time.time() - t0
            log(f"moved slots {group[0]}..{group[-1]} ({len(group)}) with {keys} keys to "
                f"{dst_addr} in {dt:.2f}s ({1000 * dt / len(group):.1f} ms/slot), "
                f"map epoch {m.epoch}")
    finally:
        src.close()
        dst.close()
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("map")
    p.add_argument("node")
    for name in ("reshard", "resume", "rebalance"):
        p = sub.add_parser(name)
        p.add_argument("node")
        p.add_argument("--batch", type=int, default=64, help="slots per new map (default 64)")
        p.add_argument("--keys-per-migrate", type=int, default=100)
        p.add_argument("--timeout-ms", type=int, default=5000)
        if name == "reshard":
            p.add_argument("--from", dest="src", required=True)
            p.add_argument("--to", dest="dst", required=True)
            g = p.add_mutually_exclusive_group(required=True)
            g.add_argument("--slots", type=int)
            g.add_argument("--range")
    p = sub.add_parser("add-node")
    p.add_argument("node")
    p.add_argument("new_id")
    p.add_argument("new_addr")
    a = ap.parse_args()

    def log(msg):
        print(f"pmcluster: {msg}", flush=True)

    try:
        if a.cmd == "map":
            c = Conn(a.node)
            print(c.call("PMCLUSTER", "MAP").decode(), end="")
            return 0
        if a.cmd == "add-node":
            m = read_map(a.node)
            if any(i == a.new_id for i, _ in m.nodes):
                raise ClusterError(f"node {a.new_id} is in the map already")
            m.nodes.append([a.new_id, a.new_addr])
            m.epoch += 1
            install(m, first=(a.new_id,))
            log(f"added {a.new_id} at {a.new_addr}; map epoch {m.epoch}")
            return 0
        if a.batch < 1 or a.keys_per_migrate < 1:
            ap.error("--batch and --keys-per-migrate are at least 1")
        m = finish_moves(a.node, a.keys_per_migrate, a.timeout_ms, log)
        if a.cmd == "resume":
            return 0
        if a.cmd == "reshard":
            src, dst = m.resolve(a.src), m.resolve(a.dst)
            if src == dst:
                ap.error("--from and --to are the same node")
            have = m.slots_of(src)
            if a.slots is not None:
                if not 0 < a.slots <= len(have):
                    ap.error(f"--slots: the source serves {len(have)} slots")
                slots = have[-a.slots:]
            else:
                slots = list(expand(a.range))
                if any(m.owner[s] != src for s in slots):
                    ap.error("--range: the source does not serve every slot of it")
            move_slots(m, src, dst, slots, a.batch, a.keys_per_migrate, a.timeout_ms, log)
            return 0
        # rebalance: from the fullest to the emptiest until even.
        while True:
            counts = {i: len(m.slots_of(i)) for i, _ in m.nodes}
            src = max(counts, key=counts.get)
            dst = min(counts, key=counts.get)
            target = SLOTS // len(counts)
            n = min(counts[src] - target, target - counts[dst])
            if counts[src] - counts[dst] <= 1 or n <= 0:
                log("balanced: " + ", ".join(f"{i[:8]} {c}" for i, c in counts.items()))
                return 0
            m = move_slots(m, src, dst, m.slots_of(src)[-n:], a.batch, a.keys_per_migrate,
                           a.timeout_ms, log)
    except (ClusterError, OSError) as e:
        print(f"pmcluster: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
