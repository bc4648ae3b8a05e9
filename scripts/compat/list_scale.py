#!/usr/bin/env python3
"""Per-operation time of LPUSH + LPOP on a big list against a small one.

Usage: list_scale.py --port P [--host H] [--big N] [--small N] [--ops N]
                     [--pipeline N] [--repeat N]

Fills key "scale:big" with N elements (RPUSH, 1000 a command) and
"scale:small" with --small elements, then on each list sends --ops
LPUSH/LPOP pairs (the list's length stays N and N + 1), pipelined
--pipeline pairs a batch on one connection, and times them. Prints, per
list, the median over --repeat runs of the time per operation (one LPUSH
or one LPOP) in microseconds, and big/small. Both keys are deleted at the
end. Standard library only; raw RESP over a socket.
"""
import argparse
import socket
import statistics
import time


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def read_lines(self, n):
        """Reads until n CRLF-terminated lines arrived; returns them."""
        while self.buf.count(b"\r\n") < n:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("server closed the connection")
            self.buf += chunk
        lines = self.buf.split(b"\r\n")
        got, rest = lines[:n], lines[n:]
        self.buf = b"\r\n".join(rest)
        for line in got:
            if line.startswith(b"-"):
                raise RuntimeError("server error: " + line.decode(errors="replace"))
        return got


def fill(c, key, n):
    c.send(resp("DEL", key))
    c.read_lines(1)
    batch = 1000
    sent = 0
    while sent < n:
        k = min(batch, n - sent)
        c.send(resp("RPUSH", key, *(["e"] * k)))
        c.read_lines(1)
        sent += k


def run_pairs(c, key, ops, pipeline):
    batch = (resp("LPUSH", key, "x") + resp("LPOP", key)) * pipeline
    # LPUSH answers ":n" (1 line), LPOP "$1" "x" (2 lines).
    start = time.perf_counter()
    done = 0
    while done < ops:
        c.send(batch)
        c.read_lines(3 * pipeline)
        done += pipeline
    return (time.perf_counter() - start) / (2 * done) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--big", type=int, default=1000000)
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--pipeline", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    c = Conn(a.host, a.port)
    fill(c, "scale:big", a.big)
    fill(c, "scale:small", a.small)
    result = {}
    for key, n in (("scale:small", a.small), ("scale:big", a.big)):
        times = [run_pairs(c, key, a.ops, a.pipeline) for _ in range(a.repeat)]
        result[key] = statistics.median(times)
        print(f"{n:>9} elements: {result[key]:.2f} us/op (runs: "
              + ", ".join(f"{t:.2f}" for t in times) + ")")
    print(f"big/small: {result['scale:big'] / result['scale:small']:.2f}")
    c.send(resp("DEL", "scale:big", "scale:small"))
    c.read_lines(1)


if __name__ == "__main__":
    main()
