"""pmindex.KvStore and transactions: every call, the mapping protocol,
reopen, conflicts from two threads, and the errors."""

import random
import threading

import pytest

import pmindex
from conftest import PERSISTENT_KINDS


def test_every_call(pool):
    with pmindex.KvStore.create(pool, "lbtree") as kv:
        assert kv.kind == "lbtree" and not kv.closed
        kv.put(b"user:1", b"ada")
        kv.put("user:2", "bob")  # str: its UTF-8
        assert kv.get(b"user:2") == b"bob"
        assert kv.get(b"user:3") is None and kv.get(b"user:3", b"?") == b"?"
        assert kv.put_if_absent(b"user:3", b"cy") is True
        assert kv.put_if_absent(b"user:3", b"xx") is False
        assert kv.put_if_present(b"user:3", b"cyd") is True
        assert kv.put_if_present(b"user:4", b"dee") is False
        value, version = kv.get_versioned(b"user:3")
        assert value == b"cyd" and version > 0
        assert kv.get_versioned(b"nope") is None
        assert kv.put_if_version(b"user:3", b"cy2", version) is True
        assert kv.put_if_version(b"user:3", b"cy3", version) is False  # changed since
        with pytest.raises(pmindex.NotFound):
            kv.put_if_version(b"nope", b"x", version)
        assert kv[b"user:3"] == b"cy2"
        kv[b"\x00bin\xff"] = b""  # any bytes; empty values
        assert kv[b"\x00bin\xff"] == b""
        assert b"user:1" in kv and b"user:9" not in kv
        assert len(kv) == kv.count() == 4
        kv.remove(b"user:1")
        with pytest.raises(pmindex.NotFound):
            kv.remove(b"user:1")
        del kv[b"user:2"]
        with pytest.raises(KeyError):
            del kv[b"user:2"]
        with pytest.raises(KeyError):
            kv[b"user:2"]
        assert kv.range() == [(b"\x00bin\xff", b""), (b"user:3", b"cy2")]
        assert kv.range(b"u", b"v", 5) == [(b"user:3", b"cy2")]
        assert list(kv) == [b"\x00bin\xff", b"user:3"]
        assert list(kv.keys(b"u")) == [b"user:3"]
        kv.verify()
        kv.sync()
        stats = kv.stats()
        assert stats["keys"] == 2 and stats["commits"] >= 5 and "index" in stats
        with pytest.raises(TypeError):
            kv.put(1, b"x")
        with pytest.raises(pmindex.InvalidArgument):
            kv.put(b"k" * (2048), b"x")  # longer than the key limit
        with pytest.raises(pmindex.InvalidArgument):
            kv.put(b"", b"x")  # keys have at least one byte
    assert kv.closed
    with pytest.raises(pmindex.InvalidArgument, match="closed"):
        kv.get(b"user:3")
    with pytest.raises(pmindex.InvalidArgument, match="closed"):
        kv[b"x"] = b"y"
    with pytest.raises(pmindex.InvalidArgument, match="closed"):
        kv.transaction()


def test_items_in_batches_and_reopen(pool):
    rng = random.Random(7)
    oracle = {}
    kv = pmindex.KvStore.create(pool, "fptree")
    for i in range(1500):  # more than one batch of the iterator
        k = rng.randbytes(rng.randrange(1, 12))
        v = rng.randbytes(rng.randrange(0, 40))
        kv[k] = v
        oracle[k] = v
    expected = sorted(oracle.items())
    assert list(kv.items()) == expected
    lo, hi = expected[100][0], expected[1200][0]
    assert list(kv.items(lo, hi)) == expected[100:1200]
    kv.close()
    with pmindex.KvStore.open(pool) as again:
        assert again.kind == "fptree"
        assert again.range() == expected
        again.verify()


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
def test_dict_oracle_over_every_kind(kind):
    try:
        kv = pmindex.KvStore.in_memory(kind)
    except pmindex.InvalidArgument:
        pytest.skip(f"{kind}: not a store's index kind")
    rng = random.Random(kind)
    oracle = {}
    for _ in range(800):
        k = b"k%03d" % rng.randrange(200)
        if rng.randrange(3):
            v = k * rng.randrange(1, 4)
            kv[k] = v
            oracle[k] = v
        elif k in oracle:
            del kv[k]
            del oracle[k]
    assert kv.range() == sorted(oracle.items())
    kv.verify()


def test_transaction_commits_on_success(pool):
    kv = pmindex.KvStore.create(pool)
    kv[b"a"] = b"100"
    with kv.transaction() as tx:
        assert tx[b"a"] == b"100"
        tx[b"a"] = b"60"
        tx.put(b"b", b"40")
        assert tx.get(b"b") == b"40"  # its own write
        assert kv.get(b"b") is None  # not visible before the commit
        assert tx.range() == [(b"a", b"60"), (b"b", b"40")]
        assert tx.snapshot > 0
    assert tx.finished
    assert kv.range() == [(b"a", b"60"), (b"b", b"40")]
    with pytest.raises(pmindex.InvalidArgument, match="finished"):
        tx.put(b"c", b"1")
    kv.close()
    with pmindex.KvStore.open(pool) as again:
        assert again.range() == [(b"a", b"60"), (b"b", b"40")]


def test_transaction_aborts_on_an_exception():
    kv = pmindex.KvStore.in_memory()
    kv[b"a"] = b"1"
    with pytest.raises(ZeroDivisionError):
        with kv.transaction() as tx:
            tx[b"a"] = b"2"
            del tx[b"a"]
            tx[b"b"] = b"3"
            1 / 0
    assert kv.range() == [(b"a", b"1")]
    tx = kv.transaction()
    tx.put(b"c", b"4")
    tx.abort()
    tx.abort()  # idempotent
    assert b"c" not in kv
    with pytest.raises(pmindex.NotFound):
        kv.transaction().remove(b"zz")


def test_conflict_raises_aborted():
    kv = pmindex.KvStore.in_memory()
    kv[b"n"] = b"0"
    first, second = kv.transaction(), kv.transaction()
    first[b"n"] = b"1"
    second[b"n"] = b"2"
    first.commit()
    with pytest.raises(pmindex.Aborted):
        second.commit()
    assert kv[b"n"] == b"1"
    # validate(): a key read, not written, that another transaction changed.
    reader = kv.transaction()
    assert reader[b"n"] == b"1"
    reader.validate(b"n")
    reader[b"other"] = b"x"
    kv[b"n"] = b"9"
    with pytest.raises(pmindex.Aborted):
        reader.commit()
    assert b"other" not in kv


def test_two_threads_conflict_and_retry():
    kv = pmindex.KvStore.in_memory()
    kv[b"counter"] = b"0"
    both_read = threading.Barrier(2)
    outcomes = []

    def conflicting():
        tx = kv.transaction()
        n = int(tx[b"counter"])
        both_read.wait()
        tx[b"counter"] = b"%d" % (n + 1)
        try:
            tx.commit()
            outcomes.append("committed")
        except pmindex.Aborted:
            outcomes.append("aborted")

    threads = [threading.Thread(target=conflicting) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["aborted", "committed"]
    assert kv[b"counter"] == b"1"

    # The retry loop: every increment lands.
    def increments(n):
        for _ in range(n):
            while True:
                try:
                    with kv.transaction() as tx:
                        tx[b"counter"] = b"%d" % (int(tx[b"counter"]) + 1)
                    break
                except pmindex.Aborted:
                    continue

    threads = [threading.Thread(target=increments, args=(200,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kv[b"counter"] == b"401"


def test_close_with_an_open_transaction_is_an_error(pool):
    kv = pmindex.KvStore.create(pool)
    tx = kv.transaction()
    tx[b"a"] = b"1"
    with pytest.raises(pmindex.InvalidArgument, match="still open"):
        kv.close()
    tx.commit()
    it = kv.items()
    with pytest.raises(pmindex.InvalidArgument, match="still open"):
        kv.close()
    assert list(it) == [(b"a", b"1")]  # ran to its end: released
    kv.close()
    with pytest.raises(pmindex.InvalidArgument, match="closed"):
        kv.items()


def test_transaction_keeps_the_store_alive():
    kv = pmindex.KvStore.in_memory()
    tx = kv.transaction()
    del kv
    tx[b"k"] = b"v"
    tx.commit()


def test_store_errors(pool, tmp_path):
    db_pool = str(tmp_path / "db.pool")
    pmindex.Db.create(db_pool, "lbtree").close()
    with pytest.raises(pmindex.WrongKind):
        pmindex.KvStore.open(db_pool)
    pmindex.KvStore.create(pool).close()
    with pytest.raises(pmindex.WrongKind):
        pmindex.Db.open(pool)
    with pytest.raises(pmindex.AlreadyExists):
        pmindex.KvStore.create(pool)
    with pytest.raises(pmindex.InvalidArgument):
        pmindex.KvStore.in_memory("dram-btree")
    with pmindex.KvStore.open(pool):
        with pytest.raises(pmindex.Busy):
            pmindex.KvStore.open(pool)


def test_store_out_of_space(tmp_path):
    kv = pmindex.KvStore.create(str(tmp_path / "small.pool"), size=4 << 20, max_size=4 << 20)
    big = b"v" * (512 << 10)
    stored = []
    with pytest.raises(pmindex.OutOfSpace):
        for i in range(100):
            kv[b"%d" % i] = big
            stored.append(b"%d" % i)
    assert stored and sorted(kv) == sorted(stored)
    kv.verify()
