"""A crash image: a child process killed with SIGKILL while it writes;
every write whose call returned is there after reopen."""

import signal
import subprocess
import sys
import textwrap

import pytest

import pmindex

CHILD = textwrap.dedent("""
    import sys
    import pmindex
    path, what = sys.argv[1], sys.argv[2]
    if what == "kv":
        store = pmindex.KvStore.create(path, "lbtree")
        i = 0
        while True:
            if i % 5 == 4:
                with store.transaction() as tx:
                    tx[b"t%d" % i] = b"x" * (i % 300)
                    tx[b"u%d" % i] = b"y"
            else:
                store[b"k%d" % i] = b"v%d" % i
            print(i, flush=True)  # acknowledged: the call returned
            i += 1
    else:
        db = pmindex.Db.create(path, what)
        i = 0
        while True:
            db.insert(i * 7919 % 1000003, i)
            print(i, flush=True)
            i += 1
""")


def run_and_kill(path, what, acks):
    child = subprocess.Popen([sys.executable, "-c", CHILD, path, what],
                             stdout=subprocess.PIPE, text=True)
    last = -1
    try:
        for line in child.stdout:
            last = int(line)
            if last >= acks:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert last >= acks, "the child stopped before writing"
    return last


def test_kv_store_survives_sigkill(pool):
    last = run_and_kill(pool, "kv", 3000)
    with pmindex.KvStore.open(pool) as store:
        store.verify()
        for i in range(last + 1):
            if i % 5 == 4:
                assert store[b"t%d" % i] == b"x" * (i % 300)
                assert store[b"u%d" % i] == b"y"
            else:
                assert store[b"k%d" % i] == b"v%d" % i
        # A transaction in flight at the kill: all of it or none.
        for i in range(last + 1, last + 6):
            if i % 5 == 4:
                assert (b"t%d" % i in store) == (b"u%d" % i in store)


@pytest.mark.parametrize("kind", ["lbtree", "fastfair"])
def test_db_survives_sigkill(pool, kind):
    last = run_and_kill(pool, kind, 5000)
    with pmindex.Db.open(pool) as db:
        db.verify()
        for i in range(last + 1):
            assert db.get(i * 7919 % 1000003) == i
