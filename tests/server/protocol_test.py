#!/usr/bin/env python3
"""Protocol tests of the real pmserver binary over the real KvStore, driven
by real clients: pymemcache (memcached text protocol) and redis-py (RESP),
plus raw sockets for what clients never send (garbage, cut-off requests).

Usage: protocol_test.py --server PATH/pmserver --workdir DIR [-k NAME]

Each test starts pmserver on free ports ("auto") over a pool in DIR and
stops it. The last lines are "N passed, N failed"; the exit status is 0
only if every test passed. Registered in ctest as server_protocol
(tests/CMakeLists.txt).
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings

try:
    import pymemcache
    import redis
    import redis.backoff
    import redis.retry
    from pymemcache.client.base import Client as McClient
    from pymemcache.exceptions import MemcacheServerError
except ImportError as e:  # pragma: no cover
    print(f"server_protocol: missing Python package ({e}): run scripts/deps.sh BUILD_DIR "
          "(it installs tests/server/requirements.txt into BUILD_DIR/.venv)", file=sys.stderr)
    sys.exit(1)

MAX_DATA = 1 << 20  # memcached's item size limit (-I) by default


class Server:
    """One pmserver process on free ports over `pool`."""

    def __init__(self, binary, pool, threads=2, create=True, extra=()):
        args = [binary, "--pool", pool, "--threads", str(threads), *extra]
        for port in ("--memcached-port", "--resp-port"):
            if port not in extra:
                args += [port, "auto"]
        if create:
            args += ["--create", "lbtree"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.mc_port = self.resp_port = None
        deadline = time.time() + 30
        lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.match(r"pmserver: (memcached|resp) on [^:]+:(\d+)", line)
            if m:
                if m.group(1) == "memcached":
                    self.mc_port = int(m.group(2))
                else:
                    self.resp_port = int(m.group(2))
            if line.startswith("pmserver: ready"):
                self.ready_line = line
                return
        self.proc.kill()
        raise RuntimeError("pmserver did not start: " + "".join(lines) + self.proc.stderr.read())

    def mc(self, **kw):
        kw.setdefault("default_noreply", False)
        kw.setdefault("connect_timeout", 5)
        kw.setdefault("timeout", 10)
        return McClient(("127.0.0.1", self.mc_port), **kw)

    def redis(self, protocol=2, **kw):
        """redis-py; protocol=None: the client's default (3 for redis-py 8)."""
        if protocol is not None:
            kw["protocol"] = protocol
        return redis.Redis(host="127.0.0.1", port=self.resp_port, socket_timeout=10,
                           socket_connect_timeout=5, **kw)

    def raw(self, resp=False):
        s = socket.create_connection(("127.0.0.1", self.resp_port if resp else self.mc_port),
                                     timeout=10)
        return s

    def stop(self):
        """SIGTERM; returns (exit code, stdout rest, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


def recv_until(sock, end, limit=1 << 22):
    """Reads until the data ends with `end` (or the peer closes)."""
    data = b""
    while not data.endswith(end) and len(data) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def peer_closed(sock):
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, socket.timeout):
        return False


# ---------------------------------------------------------------- the tests
# Each takes the context (binary, workdir) and asserts.

def test_memcached_storage_commands(ctx):
    with ctx.server() as s:
        c = s.mc()
        assert c.set("a", b"alpha", flags=5) is True
        assert c.get("a") == b"alpha"
        # (raw_command strips the end token.)
        assert c.raw_command(b"get a", b"END\r\n") == b"VALUE a 5 5\r\nalpha\r\n"
        assert c.add("a", b"x") is False and c.add("b", b"beta") is True
        assert c.replace("nope", b"x") is False and c.replace("b", b"BETA") is True
        assert c.append("b", b"!") is True and c.prepend("b", b"<") is True
        assert c.get("b") == b"<BETA!"
        assert c.get_many(["a", "missing", "b"]) == {"a": b"alpha", "b": b"<BETA!"}
        assert c.delete("a") is True and c.delete("a") is False
        assert c.set("n", b"10") and c.incr("n", 5) == 15 and c.decr("n", 20) == 0
        assert c.incr("missing", 1) is None
        assert c.touch("n", 100) is True and c.touch("missing", 1) is False
        assert c.version().decode().startswith("0.")
        stats = c.stats()
        assert stats[b"cmd_get"] >= 4 and stats[b"curr_items"] >= 2, stats


def test_memcached_cas_conflict(ctx):
    with ctx.server() as s:
        c1, c2 = s.mc(), s.mc()
        c1.set("k", b"v1")
        v, cas = c1.gets("k")
        assert v == b"v1" and int(cas) > 0
        _, cas2 = c2.gets("k")
        assert cas2 == cas
        assert c2.cas("k", b"v2", cas2) is True       # first writer wins
        assert c1.cas("k", b"v3", cas) is False       # EXISTS
        assert c1.get("k") == b"v2"
        assert c1.cas("nope", b"x", cas) is None      # NOT_FOUND
        _, cas3 = c1.gets("k")
        assert cas3 != cas


def test_memcached_noreply(ctx):
    with ctx.server() as s:
        c = s.mc(default_noreply=True)
        for i in range(200):
            c.set(f"nr{i}", str(i).encode())
        c.delete("nr0")
        c.incr("nr1", 10, noreply=True)
        # Nothing acknowledges a noreply command, but one connection's
        # requests run in order: once a later reply is back they all ran.
        assert c.version()
        check = s.mc()
        got = check.get_many([f"nr{i}" for i in range(200)])
        assert "nr0" not in got and got["nr1"] == b"11" and got["nr199"] == b"199", len(got)


def test_memcached_expiry(ctx):
    with ctx.server() as s:
        c = s.mc()
        now = int(time.time())
        c.set("rel", b"r", expire=1)
        c.set("abs", b"a", expire=now + 2)          # > 30 days: a unix time
        c.set("never", b"n")
        c.set("gone", b"g", expire=now - 10)        # an absolute time in the past
        sock = s.raw()
        sock.sendall(b"set neg 0 -1 1\r\nx\r\nget neg gone\r\n")
        assert recv_until(sock, b"END\r\n") == b"STORED\r\nEND\r\n"
        assert c.get("rel") == b"r" and c.get("abs") == b"a"
        time.sleep(2.1)
        assert c.get_many(["rel", "abs", "never"]) == {"never": b"n"}
        assert c.add("rel", b"again") is True       # an expired item is absent for add


def test_memcached_flush_all(ctx):
    with ctx.server() as s:
        c = s.mc()
        for i in range(50):
            c.set(f"f{i}", b"x")
        assert c.flush_all() is True
        assert c.get_many([f"f{i}" for i in range(50)]) == {}
        c.set("later", b"y")
        assert c.get("later") == b"y"


def test_memcached_errors_and_oversize(ctx):
    with ctx.server() as s:
        c = s.mc()
        try:
            c.set("big", b"x" * (MAX_DATA + 1))
            raise AssertionError("an oversized value was stored")
        except MemcacheServerError as e:
            assert "object too large for cache" in str(e), e
        # The data was swallowed: the same connection goes on.
        assert c.set("big", b"x" * MAX_DATA) is True
        assert len(c.get("big")) == MAX_DATA
        sock = s.raw()
        sock.sendall(b"bogus command\r\nget\r\nset k notanumber 0 1\r\nz\r\nincr\r\n"
                     b"set k 0 0 1\r\nz\r\nget k\r\n")
        assert recv_until(sock, b"END\r\n") == (
            b"ERROR\r\nERROR\r\nCLIENT_ERROR bad command line format\r\n"
            b"CLIENT_ERROR bad command line format\r\nSTORED\r\nVALUE k 0 1\r\nz\r\nEND\r\n")
        sock.sendall(b"x" * 70000)
        assert recv_until(sock, b"\r\n") == b"CLIENT_ERROR line too long\r\n"
        assert peer_closed(sock)
        assert c.get("k") == b"z"  # other clients were not dropped


def test_memcached_gat_verbosity_stats_reports(ctx):
    with ctx.server() as s:
        c = s.mc()
        c.set("g", b"hi", flags=3, expire=100)
        sock = s.raw()
        # gat returns the item and sets its expiry (the unit tests check
        # the expiry with a clock they set); gats adds the cas unique.
        sock.sendall(b"gat 0 g nope\r\n")
        assert recv_until(sock, b"END\r\n") == b"VALUE g 3 2\r\nhi\r\nEND\r\n"
        sock.sendall(b"gats 100 g\r\n")
        reply = recv_until(sock, b"END\r\n")
        m = re.match(rb"VALUE g 3 2 (\d+)\r\nhi\r\nEND\r\n$", reply)
        assert m, reply
        assert c.gets("g") == (b"hi", m.group(1))
        # A bare verbosity is ERROR (as memcached); a byte count past
        # memcached's bound is malformed and swallows nothing.
        sock.sendall(b"verbosity\r\nverbosity 1\r\nset big 0 0 2147483648\r\nget g\r\n")
        assert recv_until(sock, b"END\r\n") == (
            b"ERROR\r\nOK\r\nCLIENT_ERROR bad command line format\r\n"
            b"VALUE g 3 2\r\nhi\r\nEND\r\n")
        # pymemcache's stats(<report>) parses the sub-reports.
        assert c.stats("items")[b"items:1:number"] == 1
        assert c.stats("slabs")[b"active_slabs"] == 1
        settings = c.stats("settings")
        assert settings[b"item_size_max"] == MAX_DATA and settings[b"num_threads"] == 2, settings


def test_disconnect_mid_command(ctx):
    with ctx.server() as s:
        for payload, resp in [(b"set cut 0 0 100\r\nabc", False), (b"get cu", False),
                              (b"*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$100\r\nab", True),
                              (b"*2\r\n$3\r\nGE", True)]:
            sock = s.raw(resp)
            sock.sendall(payload)
            sock.close()
        c = s.mc()
        assert c.get("cut") is None
        r = s.redis()
        assert r.ping() is True and r.get("cut") is None


def test_resp_commands(ctx):
    with ctx.server() as s:
        r = s.redis()
        assert r.ping() is True
        key, val = b"bin\x00\r\nkey", b"\x00\xff\r\n$5\r\nval"
        assert r.set(key, val) is True and r.get(key) == val
        assert r.set("a", "1", nx=True) is True and r.set("a", "2", nx=True) is None
        assert r.set("b", "1", xx=True) is None and r.set("a", "3", xx=True) is True
        assert r.get("a") == b"3"
        assert r.set("e", "v", ex=100) is True and 99 <= r.ttl("e") <= 100
        assert r.set("p", "v", px=300) is True and 0 < r.pttl("p") <= 300
        time.sleep(0.4)
        assert r.get("p") is None and r.exists("p") == 0
        assert r.mset({"m1": "x", "m2": "y"}) is True
        assert r.mget(["m1", "nope", "m2"]) == [b"x", None, b"y"]
        assert r.exists("m1", "m1", "nope") == 2
        assert r.delete("m1", "m2", "nope") == 2
        assert r.incr("cnt") == 1 and r.incrby("cnt", 41) == 42 and r.decr("cnt") == 41
        try:
            r.incr(key)
            raise AssertionError("INCR of a non-number succeeded")
        except redis.ResponseError as e:
            assert "not an integer" in str(e)
        try:
            r.execute_command("NOSUCHCMD")
            raise AssertionError("an unknown command succeeded")
        except redis.ResponseError as e:
            assert "unknown command" in str(e)
        # Larger than one store value: stored in pieces.
        assert r.set("big", b"x" * (MAX_DATA + 1)) is True and r.strlen("big") == MAX_DATA + 1
        assert r.expire("a", 100) is True and r.expire("nope", 1) is False
        info = r.info()
        assert info["server"] == "pmserver" and "curr_items" in info, info
        assert r.dbsize() == len(list(r.scan_iter(count=3)))
        p = r.pipeline(transaction=False)
        for i in range(100):
            p.set(f"pipe{i}", i)
        p.get("pipe99")
        assert p.execute()[-1] == b"99"
        assert r.flushdb() is True and r.dbsize() == 0
        # Inline commands (a terminal, telnet).
        sock = s.raw(resp=True)
        sock.sendall(b"SET inline 42\r\nGET inline\r\nPING\r\n")
        assert recv_until(sock, b"PONG\r\n") == b"+OK\r\n$2\r\n42\r\n+PONG\r\n"


def key_slot(key):
    """Redis Cluster's hash slot of a key (CRC16/XMODEM of it or its {tag})."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    crc = 0
    for byte in key:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


def test_resp_scan(ctx):
    with ctx.server() as s:
        r = s.redis()
        keys = {f"user:{i}".encode() for i in range(120)} | {f"item:{i}".encode() for i in range(30)}
        keys.add(b"\x00binary\xff")
        r.mset({k: b"v" for k in keys})
        seen = list(r.scan_iter(count=7))
        assert sorted(seen) == sorted(keys) and len(seen) == len(keys)
        users = set(r.scan_iter(match="user:1*", count=50))
        assert users == {k for k in keys if k.startswith(b"user:1")}
        # A walk is in the store's order: by hash slot, then key.
        cursor, page = r.scan(0, count=10)
        assert cursor != 0 and len(page) == 10 and page == sorted(page, key=lambda k: (key_slot(k), k))


def test_many_connections(ctx):
    with ctx.server(threads=2) as s:
        socks = []
        for i in range(300):
            sock = s.raw(resp=i % 2 == 1)
            socks.append(sock)
        for i, sock in enumerate(socks):
            if i % 2:
                sock.sendall(f"SET conn{i} {i}\r\n".encode())
            else:
                sock.sendall(f"set conn{i} 0 0 {len(str(i))}\r\n{i}\r\n".encode())
        for i, sock in enumerate(socks):
            want = b"+OK\r\n" if i % 2 else b"STORED\r\n"
            assert recv_until(sock, b"\r\n") == want, i
        c = s.mc()
        assert c.stats()[b"curr_connections"] >= 300
        got = c.get_many([f"conn{i}" for i in range(300)])
        assert len(got) == 300 and got["conn299"] == b"299"
        for sock in socks:
            sock.close()


def test_sigterm_closes_cleanly_and_data_survives(ctx):
    pool = ctx.pool("clean")
    s = Server(ctx.binary, pool)
    c = s.mc()
    for i in range(100):
        c.set(f"k{i}", f"v{i}".encode(), expire=0)
    # A client in the middle of a pipeline at shutdown gets its replies:
    # once the first reply is back the server has read the whole pipeline
    # (one small segment), and SIGTERM lets it finish.
    sock = s.raw()
    sock.sendall(b"".join(f"set p{i} 0 0 1\r\nx\r\n".encode() for i in range(50)))
    replies = recv_until(sock, b"STORED\r\n")
    s.proc.send_signal(signal.SIGTERM)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        replies += chunk
    assert replies == b"STORED\r\n" * 50, replies
    code, out, err = s.stop()
    assert code == 0, (code, out, err)
    assert "store closed" in out, out
    if ctx.pmpool:
        # The closed store verifies offline: its recovery, Verify and the
        # blocks it reaches against the allocator's (pmpool verify).
        r = subprocess.run([ctx.pmpool, "verify", pool], capture_output=True, text=True, timeout=60)
        # 150 items plus the table of databases (docs/server.md, "Databases").
        assert r.returncode == 0 and "key-value store over kind lbtree, 151 keys" in r.stdout, r
    s = Server(ctx.binary, pool, create=False)
    try:
        got = s.mc().get_many([f"k{i}" for i in range(100)] + [f"p{i}" for i in range(50)])
        assert len(got) == 150 and got["k7"] == b"v7" and got["p49"] == b"x"
    finally:
        assert s.stop()[0] == 0


def acked_writes_survive(ctx, name, stop_server):
    """Six client threads write over both protocols and record each write
    the server acknowledged; `stop_server(s)` ends the server under that
    load; a new server on the same pool must hold every recorded write."""
    pool = ctx.pool(name)
    s = Server(ctx.binary, pool, threads=2)
    acked = [dict() for _ in range(6)]
    stop = threading.Event()

    def writer(w):
        rng = random.Random(w)
        try:
            if w % 2 == 0:
                c = s.mc(timeout=5)
                i = 0
                while not stop.is_set():
                    k, v = f"w{w}-{i}", f"{w}:{i}:" + "x" * rng.randrange(0, 2000)
                    if c.set(k, v.encode()) is not True:
                        return
                    acked[w][k] = v.encode()
                    i += 1
            else:
                r = s.redis()
                i = 0
                while not stop.is_set():
                    # Single SETs and atomic MSETs of three keys.
                    if i % 5 == 0:
                        kv = {f"w{w}-{i + j}": f"{w}:{i + j}".encode() for j in range(3)}
                        if r.mset(kv) is not True:
                            return
                        acked[w].update(kv)
                        i += 3
                    else:
                        k, v = f"w{w}-{i}", f"{w}:{i}:" + "y" * rng.randrange(0, 2000)
                        if r.set(k, v) is not True:
                            return
                        acked[w][k] = v.encode()
                        i += 1
        except Exception:  # the server was killed: what was acknowledged is recorded
            return

    # MULTI/EXEC in database 3: each transaction writes a pair of keys and
    # counts itself; acknowledged ones must be whole after the restart,
    # unacknowledged ones whole or absent.
    tx_acked = []

    def transactions():
        try:
            r = s.redis(db=3)
            i = 0
            while not stop.is_set():
                p = r.pipeline(transaction=True)
                p.set(f"txa-{i}", i).set(f"txb-{i}", i).incr("txcount")
                if p.execute()[2] < 1:
                    return
                tx_acked.append(i)
                i += 1
        except Exception:
            return

    # Database 5: generations of ten keys (one MSET each) and FLUSHDBs
    # between them. A flush acknowledged is never undone; a generation is
    # whole or absent.
    flushed = [-1]  # the last generation an acknowledged FLUSHDB removed
    written = [-1]  # the last generation whose MSET was acknowledged

    def flusher():
        try:
            r = s.redis(db=5)
            g = 0
            while not stop.is_set():
                if r.mset({f"g{g}-{j}": g for j in range(10)}) is not True:
                    return
                written[0] = g
                if g % 3 == 2:
                    if r.flushdb() is not True:
                        return
                    flushed[0] = g
                g += 1
        except Exception:
            return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    threads += [threading.Thread(target=transactions), threading.Thread(target=flusher)]
    for t in threads:
        t.start()
    time.sleep(2.5)
    stop_server(s)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    total = sum(len(a) for a in acked)
    assert total > 100, f"only {total} writes were acknowledged before the kill"
    assert tx_acked and written[0] >= 3, (len(tx_acked), written[0])
    s = Server(ctx.binary, pool, create=False)
    try:
        r3 = s.redis(db=3)
        count = int(r3.get("txcount"))
        assert count >= len(tx_acked), (count, len(tx_acked))
        for i in range(count + 2):
            pair = r3.mget(f"txa-{i}", f"txb-{i}")
            want = [str(i).encode()] * 2 if i < count else [None, None]
            assert pair == want, f"transaction {i} of {count}: {pair}"
        r5 = s.redis(db=5)
        for g in range(written[0] + 2):
            got = r5.mget([f"g{g}-{j}" for j in range(10)])
            whole, gone = [str(g).encode()] * 10, [None] * 10
            if g <= flushed[0]:
                assert got == gone, f"generation {g} survived an acknowledged flush"
            elif g <= written[0] and written[0] % 3 != 2:
                # Acknowledged, and no flush was sent after it.
                assert got == whole, f"acknowledged generation {g} lost: {got}"
            else:
                assert got in (whole, gone), (g, got)
        c = s.mc()
        missing = []
        for a in acked:
            keys = list(a)
            for i in range(0, len(keys), 100):
                got = c.get_many(keys[i:i + 100])
                missing += [k for k in keys[i:i + 100] if got.get(k) != a[k]]
        assert not missing, f"{len(missing)} of {total} acknowledged writes lost, e.g. {missing[:5]}"
        # The recovered store takes writes and cas as before.
        assert c.set("after", b"1") is True
        _, cas = c.gets("after")
        assert c.cas("after", b"2", cas) is True
        print(f"    {name}: {total} acknowledged writes, all present after the restart; "
              f"{len(tx_acked)} transactions and {written[0] + 1} flushed generations checked")
    finally:
        code, out, err = s.stop()
        assert code == 0, (code, out, err)


def test_kill9_under_collection_load_keeps_every_acknowledged_write(ctx):
    """Writers of hashes, lists, sets and sorted sets, MULTI/EXEC
    transactions across the four types, and writers of values larger than
    one store value (stored in pieces), while pmserver is killed with
    SIGKILL: after the restart every acknowledged write is there, no
    transaction and no value in pieces is half applied, and `pmserver
    --verify` finds every collection's metadata in agreement with its
    elements and every large value with all its pieces."""
    pool = ctx.pool("kill9-collections")
    s = Server(ctx.binary, pool, threads=2)
    stop = threading.Event()
    hashes, lists, sets, zsets = ({} for _ in range(4))
    tx_acked = []

    def writer(w):
        try:
            r = s.redis()
            i = 0
            while not stop.is_set():
                kind = i % 4
                if kind == 0:
                    assert r.hset(f"h{w}", f"f{i}", f"v{i}") == 1
                    hashes.setdefault(f"h{w}", {})[f"f{i}".encode()] = f"v{i}".encode()
                elif kind == 1:
                    n = r.rpush(f"l{w}", i)
                    lists.setdefault(f"l{w}", []).append(str(i).encode())
                    assert n == len(lists[f"l{w}"])
                elif kind == 2:
                    assert r.sadd(f"s{w}", f"m{i}") == 1
                    sets.setdefault(f"s{w}", set()).add(f"m{i}".encode())
                else:
                    assert r.zadd(f"z{w}", {f"m{i}": i}) == 1
                    zsets.setdefault(f"z{w}", {})[f"m{i}".encode()] = float(i)
                i += 1
        except Exception:  # killed: what was acknowledged is recorded
            return

    def transactions():
        try:
            r = s.redis()
            i = 0
            while not stop.is_set():
                p = r.pipeline(transaction=True)
                p.hset("{t}h", f"f{i}", i).rpush("{t}l", i).sadd("{t}s", i)
                p.zadd("{t}z", {str(i): i}).incr("{t}count")
                if p.execute()[4] != i + 1:
                    return
                tx_acked.append(i)
                i += 1
        except Exception:
            return

    # Values in pieces (over KvStore's 1 MiB): each SET replaces one of
    # three keys by a value that names its sequence number, every third
    # one inside MULTI/EXEC with a counter. After the restart each key must
    # hold one value whole: its last acknowledged one, or the one in flight.
    big_sent, big_acked = {}, {}

    def big_size(i):
        return (1 << 20) + 1 + (i * 97_003) % (2 << 20)

    def big(i):
        return i.to_bytes(8, "little") + random.Random(i).randbytes(big_size(i) - 8)

    def big_writer():
        try:
            r = s.redis()
            i = 0
            while not stop.is_set():
                k = f"big{i % 3}"
                big_sent[k] = i
                if i % 3 == 2:
                    p = r.pipeline(transaction=True)
                    p.set(k, big(i)).incr("bigcount")
                    if p.execute()[0] is not True:
                        return
                elif r.set(k, big(i)) is not True:
                    return
                big_acked[k] = i
                i += 1
        except Exception:  # killed: what was acknowledged is recorded
            return

    # APPENDs to a value in pieces (each writes only the value's last
    # pieces and its head, in one transaction): after the restart it holds
    # every acknowledged block, and the block in flight whole or not at all.
    app_base = random.Random(7).randbytes((1 << 20) + 3)
    app_state = {"set": False, "acked": 0}

    def app_block(i):
        return bytes([i % 251]) * (100 + (i * 7919) % 20_000)

    def appender():
        try:
            r = s.redis()
            if r.set("app", app_base) is not True:
                return
            app_state["set"] = True
            i = 0
            while not stop.is_set():
                r.append("app", app_block(i))
                app_state["acked"] = i + 1
                i += 1
        except Exception:  # killed: what was acknowledged is recorded
            return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads.append(threading.Thread(target=transactions))
    threads.append(threading.Thread(target=big_writer))
    threads.append(threading.Thread(target=appender))
    for t in threads:
        t.start()
    time.sleep(2.0)
    s.kill9()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert sum(len(v) for v in hashes.values()) > 20 and len(tx_acked) > 5, (
        sum(len(v) for v in hashes.values()), len(tx_acked))
    s = Server(ctx.binary, pool, create=False)
    try:
        r = s.redis()
        for k, fields in hashes.items():
            got = r.hgetall(k)
            assert all(got.get(f) == v for f, v in fields.items()), k
            assert len(got) <= len(fields) + 1, k  # at most the write in flight
        for k, items in lists.items():
            got = r.lrange(k, 0, -1)
            assert got[:len(items)] == items and len(got) <= len(items) + 1, k
        for k, members in sets.items():
            got = r.smembers(k)
            assert members <= got and len(got) <= len(members) + 1, k
        for k, members in zsets.items():
            got = dict(r.zrange(k, 0, -1, withscores=True))
            assert all(got.get(m) == sc for m, sc in members.items()), k
        count = int(r.get("{t}count"))
        assert count >= len(tx_acked), (count, len(tx_acked))
        # Every committed transaction whole, none beyond it in part.
        assert r.hlen("{t}h") == count and r.llen("{t}l") == count
        assert r.scard("{t}s") == count and r.zcard("{t}z") == count
        assert r.lrange("{t}l", 0, -1) == [str(i).encode() for i in range(count)]
        assert len(big_acked) == 3, big_acked
        for k, acked in big_acked.items():
            v = r.get(k)
            i = int.from_bytes(v[:8], "little")
            assert i in (acked, big_sent[k]), (k, i, acked, big_sent[k])
            assert v == big(i), f"{k}: the value of write {i} is not whole"
        if app_state["set"]:
            n = app_state["acked"]
            acked = app_base + b"".join(app_block(i) for i in range(n))
            v = r.get("app")
            assert v in (acked, acked + app_block(n)), (
                f"APPEND: {len(v)} bytes, acknowledged {len(acked)} ({n} blocks)")
        print(f"    {len(tx_acked)} transactions, {max(big_acked.values()) + 1} values in "
              f"pieces and {app_state['acked']} APPENDs to one acknowledged, all whole after "
              "the restart")
    finally:
        code, out, err = s.stop()
        assert code == 0, (code, out, err)
    v = subprocess.run([ctx.binary, "--pool", pool, "--verify"], capture_output=True, text=True,
                       timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr


def test_kill9_under_load_keeps_every_acknowledged_write(ctx):
    acked_writes_survive(ctx, "kill-9", Server.kill9)


def test_sigterm_under_load_exits_cleanly_keeping_every_acknowledged_write(ctx):
    def sigterm(s):
        code, out, err = s.stop()
        assert code == 0 and "store closed" in out, (code, out, err)

    acked_writes_survive(ctx, "sigterm", sigterm)


def test_resp_databases_and_transactions(ctx):
    with ctx.server() as s:
        r0, r1 = s.redis(), s.redis(db=1)
        assert r0.set("k", "zero") and r1.set("k", "one")
        assert r0.get("k") == b"zero" and r1.get("k") == b"one"
        assert r1.dbsize() == 1 and r1.info("keyspace")["db1"]["keys"] == 1
        assert r0.config_get("databases") == {"databases": "16"}
        # redis-py's default pipeline is a MULTI/EXEC transaction.
        p = r1.pipeline()
        p.set("a", 1).incr("a").get("a").rename("a", "b").copy("b", "c").msetnx({"d": 1, "c": 2})
        assert p.execute() == [True, 2, b"2", True, True, False]
        assert r1.mget("a", "b", "c", "d") == [None, b"2", b"2", None]
        # WATCH through redis-py's transaction helper: concurrent
        # read-modify-writes lose nothing.
        r1.set("n", 0)

        def bump(pipe):
            v = int(pipe.get("n"))
            pipe.multi()
            pipe.set("n", v + 1)

        def worker():
            c = s.redis(db=1)
            for _ in range(40):
                c.transaction(bump, "n")

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert r1.get("n") == b"160"
        # WATCH fails EXEC on a change.
        p = r1.pipeline()
        p.watch("n")
        r1.set("n", 7)
        p.multi()
        p.set("n", 8)
        try:
            p.execute()
            raise AssertionError("EXEC ran although a watched key changed")
        except redis.WatchError:
            pass
        assert r1.get("n") == b"7"
        assert r1.swapdb(0, 1) is True and r0.get("k") == b"one"
        assert r1.get("k") == b"zero"
        assert r1.flushdb(asynchronous=True) is True and r1.dbsize() == 0
        assert r0.dbsize() > 0 and r0.flushall() is True and r0.dbsize() == 0


def test_flushall_is_durable_and_reclaimed_after_kill9(ctx):
    pool = ctx.pool("flush-kill")
    s = Server(ctx.binary, pool)
    r0, r1 = s.redis(), s.redis(db=1)
    for db in (r0, r1):
        for i in range(0, 3000, 500):
            db.mset({f"key{j}": j for j in range(i, i + 500)})
    assert r0.flushall() is True
    s.kill9()
    s = Server(ctx.binary, pool, create=False)
    try:
        r0, r1 = s.redis(), s.redis(db=1)
        assert r0.dbsize() == 0 and r1.dbsize() == 0 and r0.get("key1") is None
        # The flushed keys are reclaimed in the background after the
        # restart: the store's item count (memcached's curr_items, every
        # database and flushed ones included) drops to 0.
        # The maintenance cycle adds its removals to reclaimed_keys when it
        # ends, after curr_items dropped: wait for both.
        deadline = time.time() + 30
        while time.time() < deadline and (s.mc().stats()[b"curr_items"] != 0 or
                                          int(r0.info()["reclaimed_keys"]) < 6000):
            time.sleep(0.05)
        assert s.mc().stats()[b"curr_items"] == 0
        assert int(r0.info()["reclaimed_keys"]) == 6000, r0.info()["reclaimed_keys"]
    finally:
        assert s.stop()[0] == 0


def test_emulated_pm_write_latency(ctx):
    # The setting is announced and the server works with it; what it costs
    # is for benchmarks to measure, not for a test to time.
    s = Server(ctx.binary, ctx.pool("lat"), extra=("--pm-write-ns", "50"))
    try:
        assert "+50 ns per flushed line" in s.ready_line, s.ready_line
        c = s.mc()
        assert c.set("k", b"v", expire=0)
        assert c.get("k") == b"v"
    finally:
        assert s.stop()[0] == 0
    # The Optane cost model (docs/persistence-model.md): announced, and the
    # store works under it.
    s = Server(ctx.binary, ctx.pool("xpline"), extra=("--pm-model", "xpline", "--pm-cache-kb", "64"))
    try:
        assert "PM cost model xpline" in s.ready_line, s.ready_line
        c = s.mc()
        assert c.set("k", b"v", expire=0)
        assert c.get("k") == b"v"
    finally:
        assert s.stop()[0] == 0


def test_usage_errors(ctx):
    r = subprocess.run([ctx.binary, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--memcached-port" in r.stdout and "--resp-port" in r.stdout
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("none")], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "pmserver:" in r.stderr, r
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--create", "lbtree",
                        "--memcached-port", "70000"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--create", "lbtree",
                        "--pm-write-ns", "100001"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--pm-write-ns" in r.stderr, r
    for bad in (["--pm-model", "optane"], ["--pm-model", "xpline", "--pm-write-ns", "300"]):
        r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--create", "lbtree"] + bad,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "--pm-" in r.stderr, (bad, r)
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--threads", "0"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--threads" in r.stderr, r


def test_resp3_as_redis_py_8_defaults(ctx):
    # redis-py 8's default (protocol 3) opens with HELLO 3 and CLIENT
    # SETINFO; RESP3 replies (null, maps, verbatim strings) must parse to
    # what RESP2 gives.
    with ctx.server() as s:
        r = s.redis(protocol=3)
        assert r.ping() is True
        assert r.set("k", "v") is True and r.get("k") == b"v" and r.get("nope") is None
        assert r.set("k", "w", nx=True) is None
        assert r.mget("k", "nope") == [b"v", None]
        assert r.incr("n") == 1 and r.exists("k", "n") == 2 and r.delete("n") == 1
        assert r.expire("k", 100) is True and 99 <= r.ttl("k") <= 100
        hello = r.execute_command("HELLO")
        assert hello[b"proto"] == 3 and hello[b"server"] == b"redis", hello
        info = r.info()
        assert info["server"] == "pmserver", info
        assert r.client_setname("app") is True and r.client_getname() in ("app", b"app")
        me = r.client_info()
        assert me["name"] == "app" and me["resp"] == "3" and me["lib-name"] == "redis-py", me
        assert any(c["name"] == "app" for c in r.client_list())
        assert list(r.scan_iter()) == [b"k"]
        try:
            r.execute_command("HELLO", "4")
            raise AssertionError("HELLO 4 succeeded")
        except redis.ResponseError as e:
            assert "NOPROTO" in str(e), e
        # Another connection (on another event-loop thread, or not) kills
        # this one.
        victim = s.raw(resp=True)
        victim.sendall(b"CLIENT ID\r\n")
        vid = int(recv_until(victim, b"\r\n")[1:])
        assert r.client_kill_filter(_id=vid) == 1
        assert recv_until(victim, b"never") == b""  # closed


def test_resp_password(ctx):
    secret = ctx.pool("secret") + ".txt"
    with open(secret, "w") as f:
        f.write("s3cret pass\nignored second line\n")
    with ctx.server(extra=("--requirepass-file", secret)) as s:
        # (No retries: redis-py retries a refused authentication.)
        no_retry = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
        for protocol in (2, 3):
            try:
                s.redis(protocol=protocol, retry=no_retry).get("k")
                raise AssertionError("a command ran without the password")
            except redis.AuthenticationError:
                pass
            try:
                s.redis(protocol=protocol, password="wrong", retry=no_retry).get("k")
                raise AssertionError("a wrong password was accepted")
            except redis.AuthenticationError:
                pass
            r = s.redis(protocol=protocol, password="s3cret pass")
            assert r.set("k", "v") is True and r.get("k") == b"v"
        sock = s.raw(resp=True)
        sock.sendall(b"GET k\r\nAUTH default wrong\r\nAUTH default \"s3cret pass\"\r\nQUIT\r\n")
        got = recv_until(sock, b"+OK\r\n+OK\r\n")
        assert got == (b"-NOAUTH Authentication required.\r\n"
                       b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
                       b"+OK\r\n+OK\r\n"), got
        assert s.redis(password="s3cret pass").config_get("requirepass") == \
            {"requirepass": "s3cret pass"}
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--create", "lbtree",
                        "--requirepass-file", ctx.pool("missing")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--requirepass-file" in r.stderr, r


def non_loopback_address():
    """An address of this machine beyond loopback, or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("192.0.2.1", 9))  # no packet is sent
            addr = u.getsockname()[0]
        return None if addr.startswith("127.") else addr
    except OSError:
        return None


def test_protected_mode_and_memcached_beyond_loopback(ctx):
    # memcached has no password: binding it beyond loopback needs consent.
    r = subprocess.run([ctx.binary, "--pool", ctx.pool("x"), "--create", "lbtree", "--bind",
                        "0.0.0.0", "--memcached-port", "auto", "--resp-port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--memcached-insecure" in r.stderr, r
    addr = non_loopback_address()
    with ctx.server(extra=("--bind", "0.0.0.0", "--memcached-insecure")) as s:
        assert s.redis().ping() is True  # loopback peers are served
        if addr is None:
            print("    protected mode: no address beyond loopback here; remote peer not tried")
            return
        sock = socket.create_connection((addr, s.resp_port), timeout=10)
        got = recv_until(sock, b"\r\n")
        assert got.startswith(b"-DENIED "), got
        assert peer_closed(sock)
        # With protected mode off, the same peer is served.
        assert s.redis().config_set("protected-mode", "no") is True
        far = redis.Redis(host=addr, port=s.resp_port, protocol=2, socket_timeout=10)
        assert far.ping() is True


def test_resp_string_and_keyspace_commands(ctx):
    # What redis-py users call, in both protocol versions.
    warnings.simplefilter("ignore", DeprecationWarning)  # setex, psetex, ...
    with ctx.server() as s:
        for protocol in (2, 3):
            r = s.redis(protocol=protocol)
            r.flushall()
            assert r.setex("e", 100, "v") is True and 99 <= r.ttl("e") <= 100
            assert r.psetex("p", 100000, "v") is True and r.pexpiretime("p") > 0
            assert r.setnx("n", "1") is True and r.setnx("n", "2") is False
            assert r.getset("n", "3") == b"1" and r.getdel("n") == b"3" and r.get("n") is None
            assert r.append("a", "hello") == 5 and r.append("a", " world") == 11
            assert r.strlen("a") == 11 and r.getrange("a", 0, 4) == b"hello"
            assert r.setrange("a", 6, "WORLD") == 11 and r.get("a") == b"hello WORLD"
            assert r.type("a") == b"string" and r.type("nope") == b"none"
            assert sorted(r.keys("*")) == [b"a", b"e", b"p"]
            assert r.set("a", "x", get=True) == b"hello WORLD"
            assert r.expire("a", 100) is True and r.set("a", "y", keepttl=True) is True
            assert 99 <= r.ttl("a") <= 100
            assert r.expire("a", 10, nx=True) is False and r.expire("a", 10, lt=True) is True
            assert r.persist("a") is True and r.ttl("a") == -1
            assert r.expireat("a", int(time.time()) + 50) is True and 49 <= r.ttl("a") <= 50
            assert r.getex("a", persist=True) == b"y" and r.ttl("a") == -1
            assert r.setbit("b", 7, 1) == 0 and r.getbit("b", 7) == 1 and r.get("b") == b"\x01"
            assert r.set("f", "10.5") and r.incrbyfloat("f", 0.1) == 10.6
            assert r.mset({"l1": "ohmytext", "l2": "mynewtext"})
            assert r.lcs("l1", "l2") == b"mytext" and r.lcs("l1", "l2", len=True) == 6
            assert r.touch("a", "b", "nope") == 2 and r.unlink("b", "nope") == 1
            assert r.object("encoding", "f") in (b"embstr", "embstr")
            assert r.randomkey() in {b"a", b"e", b"p", b"f", b"l1", b"l2"}
            # Both walk the store's order (hash slot, then key).
            assert [k for k in r.scan_iter(_type="string")] == r.keys()
            seconds, micros = r.time()
            assert abs(seconds - time.time()) < 5 and 0 <= micros < 1000000
            assert r.config_get("save") == {"save": ""}
            assert r.config_get("appendonly") == {"appendonly": "no"}
            assert len(r.client_list()) >= 1
            try:
                r.expire("a", 10, nx=True, xx=True)
                raise AssertionError("EXPIRE NX XX succeeded")
            except (redis.ResponseError, redis.DataError):
                pass
            # COMMAND's key positions, which cluster clients route by.
            assert r.command_getkeys("MSET", "x", "1", "y", "2") in ([b"x", b"y"], ["x", "y"])
            cmds = r.command()  # redis-py's parse of COMMAND, which its cluster client uses
            m = cmds["mset"]
            assert (m["first_key_pos"], m["last_key_pos"], m["step_count"]) == (1, -1, 2), m
            assert cmds["get"]["arity"] == 2 and "readonly" in cmds["get"]["flags"], cmds["get"]
            names = [n.decode() if isinstance(n, bytes) else n for n in r.command_list()]
            assert r.command_count() == len([n for n in names if "|" not in n])
        # Inline commands with quotes (redis-cli style) and the protocol
        # error for unbalanced ones.
        sock = s.raw(resp=True)
        sock.sendall(b'SET "a key" \'it\\\'s\'\r\nGET "a key"\r\nGET "unbalanced\r\n')
        got = recv_until(sock, b"request\r\n")
        assert got == (b"+OK\r\n$4\r\nit's\r\n"
                       b"-ERR Protocol error: unbalanced quotes in request\r\n"), got
        assert peer_closed(sock)


def big_value(n, seed):
    """n bytes whose every 8-byte word names the value (seed) and its
    position, so a piece of another value or out of place shows."""
    words = (n + 7) // 8
    return b"".join(((seed << 32) | i).to_bytes(8, "little") for i in range(words))[:n]


def test_resp_and_memcached_values_larger_than_one_store_value(ctx):
    """Values over KvStore's 1 MiB value limit, stored in pieces: round
    trips on both protocols, partial writes, the limits of both protocols
    (the connection usable after as Redis and memcached leave it), and a
    restart keeps them."""
    pool = ctx.pool("large-values")
    s = Server(ctx.binary, pool, extra=("--max-item-size", "2m"))
    try:
        r = s.redis()
        mib = 1 << 20
        values = {f"v{n}": big_value(n, n) for n in (mib - 1, mib + 1, 5 * mib)}
        for k, v in values.items():
            assert r.set(k, v) is True
            assert r.get(k) == v and r.strlen(k) == len(v), k
        # Partial overwrite across a piece boundary, and APPEND.
        patch = b"P" * 100
        v = bytearray(values[f"v{5 * mib}"])
        v[mib - 50:mib + 50] = patch
        assert r.setrange(f"v{5 * mib}", mib - 50, patch) == len(v)
        v += b"tail"
        assert r.append(f"v{5 * mib}", b"tail") == len(v)
        values[f"v{5 * mib}"] = bytes(v)
        assert r.getrange(f"v{5 * mib}", mib - 60, mib + 60) == bytes(v[mib - 60:mib + 61])
        assert r.get(f"v{5 * mib}") == bytes(v)
        # memcached: within -I (2 MiB here) in pieces, with flags and cas.
        c = s.mc()
        mv = big_value(mib + mib // 2, 7)
        assert c.set("mc", mv, flags=5) is True
        got, cas = c.gets("mc")
        assert got == mv and c.cas("mc", mv[::-1], cas) is True and c.get("mc") == mv[::-1]
        assert r.get("mc") == mv[::-1]
        try:
            c.set("mc-big", b"x" * (2 * mib + 1))
            raise AssertionError("an item over -I was stored")
        except MemcacheServerError as e:
            assert "object too large for cache" in str(e), e
        assert c.get("mc") == mv[::-1]  # the data was swallowed; the connection goes on
        assert c.stats("settings")[b"item_size_max"] == 2 * mib
        # RESP: over proto-max-bulk-len, Redis's protocol error and the
        # connection closes (as Redis's); SETRANGE/APPEND past it are
        # errors and the connection goes on.
        assert r.config_get("proto-max-bulk-len") == {"proto-max-bulk-len": str(512 << 20)}
        assert r.config_set("proto-max-bulk-len", "2mb") is True
        try:
            r.setrange("v1048577", 2 * mib, b"x")
            raise AssertionError("SETRANGE past proto-max-bulk-len succeeded")
        except redis.ResponseError as e:
            assert "string exceeds maximum allowed size (proto-max-bulk-len)" in str(e), e
        assert r.strlen("v1048577") == mib + 1
        sock = s.raw(resp=True)
        sock.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + str(2 * mib + 1).encode() + b"\r\n")
        assert recv_until(sock, b"\r\n") == b"-ERR Protocol error: invalid bulk length\r\n"
        assert peer_closed(sock)
        assert r.config_set("proto-max-bulk-len", str(512 << 20)) is True
        assert r.ping() is True
        assert r.delete("v1048575") == 1
        del values["v1048575"]
    finally:
        code, out, err = s.stop()
        assert code == 0, (code, out, err)
    s = Server(ctx.binary, pool, create=False)
    try:
        r = s.redis()
        for k, v in values.items():
            assert r.get(k) == v, k
        assert r.exists("v1048575") == 0 and r.get("mc") == mv[::-1]
    finally:
        code, out, err = s.stop()
        assert code == 0, (code, out, err)
    v = subprocess.run([ctx.binary, "--pool", pool, "--verify"], capture_output=True, text=True,
                       timeout=120)
    assert v.returncode == 0 and " 0 problems" in v.stdout, v.stdout + v.stderr


# ---------------------------------------------------------------- the runner

class Context:
    def __init__(self, binary, workdir):
        self.binary, self.workdir, self.n = binary, workdir, 0

    def pool(self, name):
        self.n += 1
        return os.path.join(self.workdir, f"{name}-{self.n}.pool")

    def server(self, threads=2, extra=()):
        ctx = self

        class Running:
            def __enter__(self):
                self.s = Server(ctx.binary, ctx.pool("t"), threads=threads, extra=extra)
                return self.s

            def __exit__(self, *exc):
                code, out, err = self.s.stop()
                if exc[0] is None:
                    assert code == 0, (code, out, err)
                return False

        return Running()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_local_launcher(ctx):
    """scripts/cluster/local.sh: start prints one `node HOST:PORT` per node
    (and `proxy HOST:PORT` with nutcracker, when it is installed), the
    nodes serve as one cluster, the proxy spreads memcached keys over
    them, and stop ends every process it started."""
    from redis.cluster import RedisCluster
    import shutil as sh
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    script = os.path.join(root, "scripts", "cluster", "local.sh")
    d = os.path.join(ctx.workdir, "launcher")
    proxy = sh.which("nutcracker") is not None
    args = ["bash", script, "start", "3", d, "--pmserver", ctx.binary] + ([] if proxy else ["--no-proxy"])
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.split("\n")
        nodes = [l.split()[1] for l in lines if l.startswith("node ")]
        proxies = [l.split()[1] for l in lines if l.startswith("proxy ")]
        assert len(nodes) == 3 and len(proxies) == (1 if proxy else 0), r.stdout
        host, port = nodes[2].split(":")
        rc = RedisCluster(host=host, port=int(port), socket_timeout=10)
        for i in range(300):
            rc.set(f"k{i}", i)
        assert all(rc.get(f"k{i}") == str(i).encode() for i in range(300))
        if proxy:
            h, p = proxies[0].split(":")
            c = McClient((h, int(p)), default_noreply=False, timeout=10)
            for i in range(300):
                assert c.set(f"m{i}", b"v") is True
            assert c.get_many([f"m{i}" for i in range(300)]) == {f"m{i}": b"v" for i in range(300)}
    finally:
        pids = [int(open(os.path.join(d, f"node-{i}", "pid")).read()) for i in (1, 2, 3)
                if os.path.exists(os.path.join(d, f"node-{i}", "pid"))]
        st = subprocess.run(["bash", script, "stop", d], capture_output=True, text=True, timeout=120)
    assert st.returncode == 0, st.stdout + st.stderr
    assert len(pids) == 3, pids
    for pid in pids:
        try:
            os.kill(pid, 0)
            raise AssertionError(f"node process {pid} still runs after stop")
        except ProcessLookupError:
            pass


def test_cluster_mode_with_redis_py_cluster_client(ctx):
    """Three pmservers in cluster mode (static map): redis-py's RedisCluster
    with its defaults routes every command; keys spread evenly; a node
    killed with SIGKILL leaves the others serving, and restarts on its pool
    with every acknowledged write."""
    from redis.cluster import RedisCluster
    ports = [free_port() for _ in range(3)]
    ids = [f"{i + 1:x}" * 40 for i in range(3)]
    lines = ["epoch 1"] + [
        f"node {ids[i]} 127.0.0.1:{ports[i]} {16384 * i // 3}-{16384 * (i + 1) // 3 - 1}"
        for i in range(3)]
    nodes = []

    def start(i, create=True):
        d = os.path.join(ctx.workdir, f"cluster-{i}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "map")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
        return Server(ctx.binary, os.path.join(d, "pool"), create=create,
                      extra=("--resp-port", str(ports[i]), "--memcached-port", "0",
                             "--cluster-config", path, "--cluster-node-id", ids[i]))

    try:
        for i in range(3):
            nodes.append(start(i))
        rc = RedisCluster(host="127.0.0.1", port=ports[0], socket_timeout=10)
        n = 3000
        for i in range(n):
            assert rc.set(f"user{i}", str(i))
        assert rc.mget_nonatomic([f"user{i}" for i in range(0, n, 7)]) == [
            str(i).encode() for i in range(0, n, 7)]
        pipe = rc.pipeline()
        for i in range(100):
            pipe.incr(f"ctr{i % 10}")
        assert pipe.execute()[-1] == 10
        assert rc.get("{t}a") is None and rc.mset({"{t}a": "1", "{t}b": "2"})
        assert rc.mget("{t}a", "{t}b") == [b"1", b"2"]
        counts = [redis.Redis(host="127.0.0.1", port=p, protocol=2).dbsize() for p in ports]
        assert sum(counts) == n + 10 + 2, counts
        for c in counts:
            assert abs(c - sum(counts) / 3) <= 0.1 * sum(counts) / 3, counts
        # A node dies: the keys of the others stay served.
        nodes[2].kill9()
        lo = 16384 * 2 // 3
        alive = [i for i in range(n) if key_slot(f"user{i}".encode()) < lo]
        direct = [redis.Redis(host="127.0.0.1", port=p, protocol=2) for p in ports[:2]]
        for i in alive[:300]:
            k = f"user{i}"
            node = 0 if key_slot(k.encode()) < 16384 // 3 else 1
            assert direct[node].get(k) == str(i).encode()
        # Restarted on its pool: every key of its slots is there.
        nodes[2] = start(2, create=False)
        rc2 = RedisCluster(host="127.0.0.1", port=ports[1], socket_timeout=10)
        for i in range(n):
            assert rc2.get(f"user{i}") == str(i).encode(), i
    finally:
        for s in nodes:
            if s.proc.poll() is None:
                s.stop()


def test_cluster_resharding_under_load_loses_nothing(ctx):
    """scripts/cluster/pmcluster.py moves slots between two nodes while
    clients write through RedisCluster: the tool killed mid-move, then
    resumed; the source node killed mid-move, restarted on its pool (its
    moves kept), then resumed. No client error but the node's downtime,
    and every acknowledged write is there afterwards."""
    import threading
    from redis.cluster import RedisCluster
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "cluster", "pmcluster.py")
    ports = [free_port() for _ in range(2)]
    ids = ["1" * 40, "2" * 40]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    text = f"epoch 1\nnode {ids[0]} {addrs[0]} 0-8191\nnode {ids[1]} {addrs[1]} 8192-16383\n"
    nodes = []

    def start(i, create=True):
        d = os.path.join(ctx.workdir, f"reshard-{i}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "map")
        if create:
            with open(path, "w") as f:
                f.write(text)
        return Server(ctx.binary, os.path.join(d, "pool"), create=create,
                      extra=("--resp-port", str(ports[i]), "--memcached-port", "0",
                             "--cluster-config", path, "--cluster-node-id", ids[i]))

    acked, errors, stop = [], [], threading.Event()

    def writer(tid):
        c = RedisCluster(host="127.0.0.1", port=ports[1], socket_timeout=10)
        i = 0
        while not stop.is_set():
            k = f"w{tid}:{i}"
            try:
                c.set(k, i)
                acked.append((k, i))
            except Exception as e:  # counted: only a dead node may cause them
                errors.append(repr(e))
                time.sleep(0.05)
            i += 1

    def reshard(*extra):
        return subprocess.Popen([sys.executable, tool, "reshard", addrs[1], "--from", addrs[0],
                                 "--to", addrs[1], *extra], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    try:
        nodes = [start(0), start(1)]
        rc = RedisCluster(host="127.0.0.1", port=ports[0], socket_timeout=10)
        for i in range(1000):
            rc.set(f"pre{i}", i)
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
        for t in threads:
            t.start()
        # The tool dies in the middle of a move.
        p = reshard("--slots", "4096", "--batch", "256")
        time.sleep(0.6)
        p.kill()
        p.wait()
        r = subprocess.run([sys.executable, tool, "resume", addrs[0]], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert not errors, errors[:3]
        # The source dies in the middle of a move (SIGKILL), restarts on its
        # pool and map, and the move is resumed.
        p = reshard("--slots", "2048", "--batch", "128")
        time.sleep(0.5)
        nodes[0].kill9()
        p.wait(timeout=120)
        nodes[0] = start(0, create=False)
        r = subprocess.run([sys.executable, tool, "resume", addrs[1]], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join()
        m = subprocess.run([sys.executable, tool, "map", addrs[0]], capture_output=True,
                           text=True).stdout
        assert "migrating" not in m and "importing" not in m, m
        rc = RedisCluster(host="127.0.0.1", port=ports[0], socket_timeout=10)
        assert all(rc.get(f"pre{i}") == str(i).encode() for i in range(1000))
        wrong = [k for k, v in acked if rc.get(k) != str(v).encode()]
        assert not wrong, (len(wrong), wrong[:5])
        assert len(acked) > 100, len(acked)
    finally:
        stop.set()
        for s in nodes:
            if s.proc.poll() is None:
                s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    ap.add_argument("--pmpool", default="", help="pmpool binary: also verify a closed store's pool with it")
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    print(f"pymemcache {pymemcache.__version__}, redis-py {redis.__version__}")
    ctx = Context(os.path.abspath(args.server), args.workdir)
    ctx.pmpool = os.path.abspath(args.pmpool) if args.pmpool else ""
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and args.k in n]
    passed = failed = 0
    start = time.time()
    for name, fn in tests:
        t0 = time.time()
        try:
            fn(ctx)
            passed += 1
            print(f"PASS {name} ({time.time() - t0:.1f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f}s)", flush=True)
            traceback.print_exc()
    print(f"{time.time() - start:.1f}s")
    print(f"{passed} passed, {failed} failed")
    if failed == 0:
        shutil.rmtree(args.workdir, ignore_errors=True)
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
