"""pmindex.Db: every call, the dict-oracle scenario over every persistent
kind, reopen, iteration, bulk_load from numpy, and the errors."""

import random
import threading

import numpy as np
import pytest

import pmindex
from conftest import PERSISTENT_KINDS, VOLATILE_KINDS


def test_version_and_kinds():
    assert pmindex.__version__.count(".") >= 1
    kinds = pmindex.list_kinds()
    names = [k.name for k in kinds]
    assert names == sorted(names)
    assert "lbtree" in names and "dram-btree" in names
    assert {k.name: k.persistent for k in kinds}["dram-btree"] is False
    assert len(PERSISTENT_KINDS) >= 5


def test_every_call(pool):
    with pmindex.Db.create(pool, "lbtree", {"node": 256}, size=8 << 20) as db:
        assert db.kind == "lbtree" and "node=256" in db.options
        assert db.persistent and db.path == pool and not db.closed
        assert db.durability in ("power-failure", "process-crash")
        db.insert(1, 10)
        db.insert(0, 0)
        db.insert(2**64 - 1, 2**64 - 1)  # every uint64 is a key
        with pytest.raises(pmindex.AlreadyExists):
            db.insert(1, 11)
        assert db.get(1) == 10
        assert db.get(5) is None and db.get(5, -1) == -1
        db.update(1, 12)
        assert db[1] == 12
        with pytest.raises(pmindex.NotFound):
            db.update(5, 1)
        db.upsert(5, 50)
        db[6] = 60
        assert 5 in db and 7 not in db
        assert len(db) == db.count() == 5
        db.remove(5)
        with pytest.raises(pmindex.NotFound):
            db.remove(5)
        del db[6]
        with pytest.raises(KeyError):
            del db[6]
        with pytest.raises(KeyError):
            db[6]
        assert db.range() == [(0, 0), (1, 12), (2**64 - 1, 2**64 - 1)]
        assert db.range(1, 2**64 - 1) == [(1, 12)]
        assert db.range(0, None, 2) == [(0, 0), (1, 12)]
        assert list(db.items(1)) == [(1, 12), (2**64 - 1, 2**64 - 1)]
        db.verify()
        db.sync()
        stats = db.stats()
        assert stats["entries"] == 3 and stats["height"] >= 1
        with pytest.raises(TypeError):
            db.insert(-1, 0)
    assert db.closed
    db.close()  # idempotent


def test_closed_db_raises(pool):
    db = pmindex.Db.create(pool, "fptree")
    db.insert(3, 4)
    db.close()
    for call in (lambda: db.get(3), lambda: db.insert(5, 6), lambda: db.remove(3),
                 lambda: len(db), lambda: 3 in db, lambda: db.range(), lambda: db.items(),
                 lambda: db.verify(), lambda: db.stats()):
        with pytest.raises(pmindex.InvalidArgument, match="closed"):
            call()
    assert db.kind == "fptree"  # the accessors keep their values


def test_close_with_an_open_iterator_is_an_error(pool):
    db = pmindex.Db.create(pool, "lbtree")
    for k in range(10):
        db.insert(k, k)
    it = db.items()
    assert next(it) == (0, 0)
    with pytest.raises(pmindex.InvalidArgument, match="still open"):
        db.close()
    it.close()
    db.close()
    with pytest.raises(StopIteration):
        next(it)
    # An iterator that ran to its end lets the Db close.
    db = pmindex.Db.open(pool)
    it = db.items()
    assert sum(1 for _ in it) == 10
    db.close()


def test_iterator_keeps_the_db_alive(pool):
    db = pmindex.Db.create(pool, "lbtree")
    for k in range(1000):
        db.insert(k, k * 2)
    it = db.items(10, 20)
    del db  # the iterator still holds the index
    assert list(it) == [(k, k * 2) for k in range(10, 20)]


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
def test_dict_oracle_and_reopen(pool, kind):
    rng = random.Random(kind)
    oracle = {}
    db = pmindex.Db.create(pool, kind)
    for _ in range(3000):
        k = rng.randrange(600)
        op = rng.randrange(4)
        if op == 0:
            if k in oracle:
                with pytest.raises(pmindex.AlreadyExists):
                    db.insert(k, 1)
            else:
                db.insert(k, k + 1)
                oracle[k] = k + 1
        elif op == 1:
            db.upsert(k, k * 7)
            oracle[k] = k * 7
        elif op == 2:
            if k in oracle:
                db.remove(k)
                del oracle[k]
            else:
                with pytest.raises(pmindex.NotFound):
                    db.remove(k)
        else:
            assert db.get(k) == oracle.get(k)
    expected = sorted(oracle.items())
    assert db.range() == expected
    assert list(db.items()) == expected
    db.verify()
    db.close()
    with pmindex.Db.open(pool) as again:
        assert again.kind == kind
        assert list(again.items()) == expected
        assert len(again) == len(oracle)
        again.verify()


@pytest.mark.parametrize("kind", VOLATILE_KINDS)
def test_volatile_kinds_in_memory(kind):
    db = pmindex.Db.in_memory(kind)
    assert not db.persistent and db.path == "" and db.durability == "volatile"
    for k in range(100, 0, -1):
        db.insert(k, k)
    assert [k for k, _ in db.items()] == list(range(1, 101))


def test_bulk_load_from_numpy():
    keys = np.arange(0, 30000, 3, dtype=np.uint64)
    values = keys * np.uint64(5)
    db = pmindex.Db.in_memory("lbtree")
    db.bulk_load(keys, values, fill=0.7)
    assert len(db) == len(keys)
    assert db.get(2997) == 2997 * 5 and db.get(2998) is None
    db.verify()
    # (n, 2) rows: loaded in place, no copy.
    pairs = np.stack([keys, values], axis=1)
    assert pairs.flags["C_CONTIGUOUS"]
    db2 = pmindex.Db.in_memory("fptree")
    db2.bulk_load(pairs)
    assert db2.range(30, 40) == [(30, 150), (33, 165), (36, 180), (39, 195)]
    # Read-only buffers load too.
    pairs.setflags(write=False)
    db3 = pmindex.Db.in_memory("dram-btree")
    db3.bulk_load(pairs)
    assert len(db3) == len(keys)


def test_bulk_load_errors():
    db = pmindex.Db.in_memory("lbtree")
    with pytest.raises(pmindex.InvalidArgument):
        db.bulk_load(np.array([3, 2, 1], dtype=np.uint64), np.zeros(3, dtype=np.uint64))
    with pytest.raises(pmindex.InvalidArgument, match="differ in length"):
        db.bulk_load(np.arange(3, dtype=np.uint64), np.arange(2, dtype=np.uint64))
    db.insert(1, 1)
    with pytest.raises(pmindex.InvalidArgument):  # not empty
        db.bulk_load(np.arange(5, 9, dtype=np.uint64), np.arange(4, dtype=np.uint64))
    assert db.range() == [(1, 1)]


def test_get_many():
    db = pmindex.Db.in_memory("lbtree")
    keys = np.arange(1, 2001, dtype=np.uint64)
    db.bulk_load(keys, keys + np.uint64(1))
    values, found = db.get_many(np.array([0, 1, 2000, 2001], dtype=np.uint64))
    assert values.dtype == np.uint64 and found.dtype == np.bool_
    assert found.tolist() == [False, True, True, False]
    assert values[1:3].tolist() == [2, 2001]


def test_threads_share_a_db():
    db = pmindex.Db.in_memory("lbtree")

    def writer(base):
        for k in range(base, base + 2000):
            db.insert(k, k)

    threads = [threading.Thread(target=writer, args=(i * 10000,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(db) == 8000
    db.verify()


def test_create_errors(pool, tmp_path):
    with pytest.raises(pmindex.InvalidArgument):
        pmindex.Db.create(pool, "no-such-kind")
    with pytest.raises(pmindex.InvalidArgument):
        pmindex.Db.create(pool, "lbtree", "node=7")
    with pytest.raises(pmindex.InvalidArgument):
        pmindex.Db.create(pool, "dram-btree")  # volatile: in_memory only
    with pytest.raises(pmindex.InvalidArgument):
        pmindex.Db.in_memory("no-such-kind")
    with pytest.raises(TypeError):
        pmindex.Db.create(pool, "lbtree", 42)
    pmindex.Db.create(pool, "lbtree").close()
    with pytest.raises(pmindex.AlreadyExists):
        pmindex.Db.create(pool, "lbtree")
    with pytest.raises(pmindex.NotFound):
        pmindex.Db.open(str(tmp_path / "missing.pool"))
    # A file where a directory should be: the system call fails.
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(pmindex.IOError) as e:
        pmindex.Db.create(str(tmp_path / "file" / "x.pool"), "lbtree")
    assert isinstance(e.value, OSError) and isinstance(e.value, pmindex.Error)


def test_open_errors(pool, tmp_path):
    pmindex.Db.create(pool, "lbtree").close()
    with pytest.raises(pmindex.WrongKind):
        pmindex.Db.open(pool, "fptree")
    with pmindex.Db.open(pool, "lbtree"):
        with pytest.raises(pmindex.Busy):
            pmindex.Db.open(pool)
    # A newer format version (header bytes 8..12, checked before the
    # checksum): refused, the file unchanged.
    with open(pool, "r+b") as f:
        f.seek(8)
        f.write((99).to_bytes(4, "little"))
    before = open(pool, "rb").read()
    with pytest.raises(pmindex.NotSupported):
        pmindex.Db.open(pool)
    assert open(pool, "rb").read() == before
    # Not a pool at all.
    junk = tmp_path / "junk.pool"
    junk.write_bytes(b"\x5a" * (1 << 20))
    with pytest.raises(pmindex.Corruption):
        pmindex.Db.open(str(junk))


def test_out_of_space(pool):
    db = pmindex.Db.create(pool, "lbtree", size=4 << 20, max_size=4 << 20)
    inserted = 0
    with pytest.raises(pmindex.OutOfSpace):
        for k in range(10_000_000):
            db.insert(k, k)
            inserted += 1
    # Nothing lost, the index still usable.
    assert len(db) == inserted
    assert db.get(inserted - 1) == inserted - 1
    db.remove(0)
    db.verify()
    db.close()


def test_close_while_other_threads_call(pool):
    # close() waits for the calls running in other threads (the GIL is
    # released during them); every later call raises, none crashes.
    db = pmindex.Db.create(pool, "lbtree")
    for k in range(1000):
        db.insert(k, k)
    started = threading.Barrier(4)
    outcomes = []

    def caller(t):
        started.wait()
        try:
            i = 0
            while True:
                assert db.get(i % 1000) == i % 1000
                db.upsert(10_000 + t * 1_000_000 + i, i)
                i += 1
        except pmindex.InvalidArgument as e:
            outcomes.append(str(e))

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    started.wait()
    db.close()
    for t in threads:
        t.join()
    assert outcomes == ["the Db is closed"] * 3
    with pmindex.Db.open(pool) as again:
        again.verify()
        assert again.get(999) == 999
