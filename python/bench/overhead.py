"""The Python side of the binding's overhead figure (docs/RESULTS.md): the
operations of overhead.cc on the same keys, from Python, and a dict as the
volatile reference. Prints "<phase> <CPU ns per op> <wall ns per op>"
lines; the CPU time is this thread's, as overhead.cc measures it.

    python overhead.py [N] [KIND]     (default 1000000 lbtree)
"""

import sys
import time

import numpy as np

import pmindex


def splitmix64(i):
    with np.errstate(over="ignore"):
        x = i + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def phase(name, n, fn):
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    fn()
    c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
    print(f"{name} {(c1 - c0) / n:.1f} {(t1 - t0) / n:.1f}", flush=True)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    kind = sys.argv[2] if len(sys.argv) > 2 else "lbtree"
    key_array = splitmix64(np.arange(n, dtype=np.uint64))
    keys = key_array.tolist()

    db = pmindex.Db.in_memory(kind, size=1 << 30)
    insert, get = db.insert, db.get

    def db_insert():
        for k in keys:
            insert(k, k)

    def db_get():
        for k in keys:
            get(k)

    def db_get_many():
        values, found = db.get_many(key_array)
        assert found.all()

    phase("db_insert", n, db_insert)
    phase("db_get", n, db_get)
    phase("db_get_many", n, db_get_many)

    kv_keys = [b"key:%d" % k for k in keys]
    value = b"v" * 16
    kv = pmindex.KvStore.in_memory(kind, size=1 << 30)
    put, kget = kv.put, kv.get

    def kv_put():
        for k in kv_keys:
            put(k, value)

    def kv_get():
        for k in kv_keys:
            kget(k)

    phase("kv_put", n, kv_put)
    phase("kv_get", n, kv_get)

    d = {}

    def dict_set():
        for k in kv_keys:
            d[k] = value

    def dict_get():
        g = d.get
        for k in kv_keys:
            g(k)

    phase("dict_set", n, dict_set)
    phase("dict_get", n, dict_get)


if __name__ == "__main__":
    main()
