#!/usr/bin/env python3
"""Calls 45 common redis-py client methods against each server given and
prints which work on each: a call works when it raises nothing and returns
what Redis's documentation says it returns (checked here).

Usage: redis_py_check.py [--protocol N] NAME=HOST:PORT...
  e.g. redis_py_check.py redis-server=127.0.0.1:6379 pmserver=127.0.0.1:7000

The client has redis-py's default settings (RESP3 since redis-py 8) unless
--protocol is given. Each server's keys are under "compat:" in database 0
(and database 1 for the "Redis(db=1)" call); the script deletes them
afterwards, and touches no other key. Exit status 0.
"""
import argparse
import time
import warnings

import redis

P = "compat:"  # every key's prefix


def k(name):
    return P + name


def expect(got, want):
    if got != want:
        raise AssertionError(f"returned {got!r}, expected {want!r}")


def expect_true(cond, what):
    if not cond:
        raise AssertionError(what)


# Each check takes a client on a server whose "compat:" keys are gone and
# raises if the call does not work. Listed in the order they are printed.
def c_ping(r):
    expect(r.ping(), True)


def c_echo(r):
    expect(r.echo("hi"), b"hi")


def c_set(r):
    expect(r.set(k("s"), "v"), True)


def c_get(r):
    r.set(k("g"), "v")
    expect(r.get(k("g")), b"v")


def c_set_ex(r):
    expect(r.set(k("ex"), "v", ex=100), True)
    expect_true(0 < r.ttl(k("ex")) <= 100, "no expiry set")


def c_set_nx(r):
    r.set(k("nx"), "a")
    expect(r.set(k("nx"), "b", nx=True), None)
    expect(r.get(k("nx")), b"a")


def c_set_xx(r):
    expect(r.set(k("xx"), "b", xx=True), None)
    expect(r.exists(k("xx")), 0)


def c_set_get(r):
    r.set(k("sg"), "old")
    expect(r.set(k("sg"), "new", get=True), b"old")


def c_set_keepttl(r):
    r.set(k("kt"), "a", ex=100)
    expect(r.set(k("kt"), "b", keepttl=True), True)
    expect_true(r.ttl(k("kt")) > 0, "the expiry was not kept")


def c_setex(r):
    expect(r.setex(k("se"), 100, "v"), True)
    expect(r.get(k("se")), b"v")


def c_setnx(r):
    expect(r.setnx(k("sn"), "a"), True)
    expect(r.setnx(k("sn"), "b"), False)


def c_getset(r):
    r.set(k("gs"), "old")
    expect(r.getset(k("gs"), "new"), b"old")


def c_getdel(r):
    r.set(k("gd"), "v")
    expect(r.getdel(k("gd")), b"v")
    expect(r.exists(k("gd")), 0)


def c_getex(r):
    r.set(k("ge"), "v")
    expect(r.getex(k("ge"), ex=100), b"v")
    expect_true(r.ttl(k("ge")) > 0, "no expiry set")


def c_mset(r):
    expect(r.mset({k("m1"): "1", k("m2"): "2"}), True)


def c_mget(r):
    r.set(k("mg1"), "1")
    expect(r.mget([k("mg1"), k("mg-none")]), [b"1", None])


def c_append(r):
    r.set(k("ap"), "ab")
    expect(r.append(k("ap"), "cd"), 4)


def c_strlen(r):
    r.set(k("sl"), "abc")
    expect(r.strlen(k("sl")), 3)


def c_getrange(r):
    r.set(k("gr"), "hello")
    expect(r.getrange(k("gr"), 1, 3), b"ell")


def c_incr(r):
    expect(r.incr(k("i")), 1)


def c_incrby(r):
    expect(r.incrby(k("ib"), 5), 5)


def c_decr(r):
    expect(r.decr(k("d")), -1)


def c_incrbyfloat(r):
    expect(r.incrbyfloat(k("f"), 1.5), 1.5)


def c_delete(r):
    r.set(k("del"), "v")
    expect(r.delete(k("del"), k("del-none")), 1)


def c_unlink(r):
    r.set(k("ul"), "v")
    expect(r.unlink(k("ul")), 1)


def c_exists(r):
    r.set(k("e"), "v")
    expect(r.exists(k("e"), k("e-none")), 1)


def c_expire(r):
    r.set(k("x"), "v")
    expect(r.expire(k("x"), 100), True)


def c_expire_nx(r):
    r.set(k("xn"), "v")
    expect(r.expire(k("xn"), 100, nx=True), True)
    expect(r.expire(k("xn"), 50, nx=True), False)


def c_ttl(r):
    r.set(k("t"), "v", ex=100)
    expect_true(0 < r.ttl(k("t")) <= 100, "wrong TTL")


def c_pttl(r):
    r.set(k("pt"), "v", px=100000)
    expect_true(0 < r.pttl(k("pt")) <= 100000, "wrong PTTL")


def c_persist(r):
    r.set(k("pe"), "v", ex=100)
    expect(r.persist(k("pe")), True)
    expect(r.ttl(k("pe")), -1)


def c_type(r):
    r.set(k("ty"), "v")
    expect(r.type(k("ty")), b"string")


def c_keys(r):
    r.set(k("ks:a"), "1")
    expect(r.keys(k("ks:*")), [k("ks:a").encode()])


def c_scan_iter(r):
    r.mset({k("sc:1"): "1", k("sc:2"): "2"})
    expect(sorted(r.scan_iter(match=k("sc:*"))), [k("sc:1").encode(), k("sc:2").encode()])


def c_rename(r):
    r.set(k("rn"), "v")
    expect(r.rename(k("rn"), k("rn2")), True)
    expect(r.get(k("rn2")), b"v")


def c_dbsize(r):
    expect_true(isinstance(r.dbsize(), int), "not an integer")


def c_info(r):
    info = r.info()
    expect_true("redis_version" in info, "no redis_version in INFO")


def c_time(r):
    seconds, _ = r.time()
    expect_true(abs(seconds - time.time()) < 60, "TIME is off")


def c_config_get(r):
    expect_true("maxmemory" in r.config_get("maxmemory"), "no maxmemory")


def c_client_list(r):
    expect_true(len(r.client_list()) >= 1, "no client listed")


def c_pipeline_transaction(r):
    with r.pipeline() as p:  # transaction=True: MULTI ... EXEC
        p.set(k("pl"), "v").get(k("pl"))
        expect(p.execute(), [True, b"v"])


def c_pipeline_plain(r):
    with r.pipeline(transaction=False) as p:
        p.set(k("pp"), "v").incr(k("pp-n"))
        expect(p.execute(), [True, 1])


def c_watch(r):
    with r.pipeline() as p:
        p.watch(k("w"))
        p.multi()
        p.set(k("w"), "v")
        expect(p.execute(), [True])


def c_lock(r):
    lock = r.lock(k("lock"), timeout=10)
    expect(lock.acquire(blocking=False), True)
    lock.release()


def c_db1(r):
    kw = r.connection_pool.connection_kwargs
    r1 = redis.Redis(host=kw["host"], port=kw["port"], db=1, protocol=kw.get("protocol"),
                     socket_timeout=5)
    try:
        expect(r1.set(k("db1"), "v"), True)
        expect(r1.get(k("db1")), b"v")
        r1.delete(k("db1"))
    finally:
        r1.close()


CHECKS = [
    ("ping", c_ping), ("echo", c_echo), ("set", c_set), ("get", c_get),
    ("set(ex=)", c_set_ex), ("set(nx=True)", c_set_nx), ("set(xx=True)", c_set_xx),
    ("set(get=True)", c_set_get), ("set(keepttl=True)", c_set_keepttl), ("setex", c_setex),
    ("setnx", c_setnx), ("getset", c_getset), ("getdel", c_getdel), ("getex", c_getex),
    ("mset", c_mset), ("mget", c_mget), ("append", c_append), ("strlen", c_strlen),
    ("getrange", c_getrange), ("incr", c_incr), ("incrby", c_incrby), ("decr", c_decr),
    ("incrbyfloat", c_incrbyfloat), ("delete", c_delete), ("unlink", c_unlink),
    ("exists", c_exists), ("expire", c_expire), ("expire(nx=True)", c_expire_nx),
    ("ttl", c_ttl), ("pttl", c_pttl), ("persist", c_persist), ("type", c_type),
    ("keys", c_keys), ("scan_iter", c_scan_iter), ("rename", c_rename), ("dbsize", c_dbsize),
    ("info", c_info), ("time", c_time), ("config_get", c_config_get),
    ("client_list", c_client_list), ("pipeline() (MULTI/EXEC)", c_pipeline_transaction),
    ("pipeline(transaction=False)", c_pipeline_plain), ("watch + multi", c_watch),
    ("lock", c_lock), ("Redis(db=1)", c_db1),
]
assert len(CHECKS) == 45


def cleanup(r):
    """Deletes the "compat:" keys (best effort: with raw SCAN and DEL)."""
    try:
        cursor = "0"
        while True:
            cursor, keys = r.scan(cursor, match=P + "*", count=1000)
            if keys:
                r.delete(*keys)
            if str(cursor) in ("0", "b'0'"):
                break
    except redis.RedisError:
        pass


def run_checks(host, port, protocol):
    kwargs = {"socket_timeout": 5, "socket_connect_timeout": 5}
    if protocol:
        kwargs["protocol"] = protocol
    results = []
    for name, check in CHECKS:
        r = redis.Redis(host=host, port=port, **kwargs)
        try:
            check(r)
            results.append((name, True, ""))
        except Exception as e:  # any failure is reported, none stops the run
            results.append((name, False, f"{type(e).__name__}: {e}"))
        finally:
            cleanup(r)
            r.close()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", type=int, default=None)
    ap.add_argument("servers", nargs="+", metavar="NAME=HOST:PORT")
    args = ap.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)  # setex, getset, ... are checked on purpose
    names, table = [], []
    for spec in args.servers:
        name, _, addr = spec.partition("=")
        host, _, port = addr.rpartition(":")
        names.append(name)
        table.append(run_checks(host, int(port), args.protocol))
    width = max(len(n) for n, _ in CHECKS) + 2
    print(f"redis-py {redis.__version__}, protocol {args.protocol or 'default'}")
    print("method".ljust(width) + "".join(n.ljust(14) for n in names))
    for i, (method, _) in enumerate(CHECKS):
        cells = ["ok" if t[i][1] else "FAIL" for t in table]
        why = "; ".join(f"{names[j]}: {t[i][2][:100]}" for j, t in enumerate(table) if not t[i][1])
        print(method.ljust(width) + "".join(c.ljust(14) for c in cells) + why)
    print("works: " + ", ".join(
        f"{names[j]} {sum(ok for _, ok, _ in t)}/{len(CHECKS)}" for j, t in enumerate(table)))


if __name__ == "__main__":
    main()
