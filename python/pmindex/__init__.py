"""pmindex: persistent-memory B+-trees and a transactional key-value store.

``Db`` is an index of uint64 keys and values, ``KvStore`` a store of bytes
keys and values with snapshot-isolation transactions; both live in a pool
file (or in memory). Errors are ``pmindex.Error`` and its subclasses, one per
status code of the C++ library. See docs/python.md.
"""

from ._pmindex import (
    Aborted,
    AlreadyExists,
    Busy,
    Corruption,
    Db,
    DbIterator,
    Error,
    InvalidArgument,
    IOError,
    KindInfo,
    KvIterator,
    KvStore,
    NotFound,
    NotSupported,
    OutOfSpace,
    Transaction,
    WrongKind,
    __version__,
    list_kinds,
)

__all__ = [
    "Aborted",
    "AlreadyExists",
    "Busy",
    "Corruption",
    "Db",
    "DbIterator",
    "Error",
    "InvalidArgument",
    "IOError",
    "KindInfo",
    "KvIterator",
    "KvStore",
    "NotFound",
    "NotSupported",
    "OutOfSpace",
    "Transaction",
    "WrongKind",
    "__version__",
    "list_kinds",
]
