"""A lock per piece of work shared by every web and queue process: one of them computes,
the others wait for it and then read what it stored (see `comparison.comparison_get`).

PostgreSQL: a transaction-level advisory lock, released when the transaction ends, so a
process that dies mid-way cannot leave it held. SQLite: the database's write lock, taken at
BEGIN (the settings' `transaction_mode` IMMEDIATE), serialises the processes. Either way the
work runs inside the transaction, so what it stores is visible to the next holder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


def lock_key(name: str, *ids: int) -> int:
    """A signed 64-bit key for `name` and `ids` (advisory locks take a bigint)."""
    digest = hashlib.blake2b(":".join([name, *map(str, ids)]).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def exclusive(name: str, *ids: int) -> Iterator[None]:
    """Run the block while holding the lock for (`name`, `ids`), inside a transaction."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(name, *ids)])
        yield
