import os

import pytest

import pmindex

PERSISTENT_KINDS = [k.name for k in pmindex.list_kinds() if k.persistent]
VOLATILE_KINDS = [k.name for k in pmindex.list_kinds() if not k.persistent and k.name != "null"]


@pytest.fixture
def pool(tmp_path):
    """A path for a new pool file (the test creates it)."""
    return os.fspath(tmp_path / "test.pool")
