"""Locks shared by every web and queue process.

`exclusive`: a lock per piece of work: one process computes, the others wait for it and then
read what it stored (see `comparison.comparison_get`). PostgreSQL: a transaction-level
advisory lock, released when the transaction ends, so a process that dies mid-way cannot
leave it held. SQLite: the database's write lock, taken at BEGIN (the settings'
`transaction_mode` IMMEDIATE), serialises the processes. Either way the work runs inside the
transaction, so what it stores is visible to the next holder.

`write_turn`: on SQLite, queue workers take turns at the one write lock promptly (see there).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection, transaction

try:
    import fcntl
except ImportError:  # not on Windows: there the workers wait in SQLite's busy handler
    fcntl = None  # type: ignore[assignment]


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


# How often a process waiting for its write turn looks again (from the first pause, doubling
# up to the last), and for how long at most: past that it goes on to SQLite's own wait (the
# connection's timeout), which fails as before.
TURN_POLL_FIRST = 0.0002
TURN_POLL_LAST = 0.002
TURN_WAIT_SECONDS = 20.0


@contextmanager
def write_turn(*, checkpoint_after: bool = False) -> Iterator[None]:
    """On SQLite, wait for the database's write lock here before a write transaction takes it.

    SQLite has one write lock, and a connection that finds it taken sleeps in SQLite's busy
    handler in growing steps (1 ms up to 100 ms), then looks again: with two queue workers
    writing in turn, each handover left the lock idle for tens of milliseconds while the
    waiter slept on (measured: 29 handovers, 3.1 s of an engine run's 18 s, when the write
    lock was the run's bottleneck). Here the writers first take an advisory lock on a file
    beside the database (`flock`), which a waiter polls every 0.2 ms at first, every 2 ms
    at most (a turn takes tens of milliseconds: fewer wake-ups on a busy machine); it is
    released once the transaction has committed, so the next writer begins within about
    that. Writers that do not take it (a web request) wait in SQLite as before; a holder that
    dies releases it with its process. Use it outside any transaction, around `atomic()`.

    `checkpoint_after`, for a turn that writes megabytes (an engine chunk's scores): its
    commit does not copy the write-ahead log into the database (SQLite's automatic
    checkpoint, which runs inside the commit, so inside the turn: 20 ms a chunk, with the
    next writer waiting); a passive checkpoint does, once the turn is released, while the
    next writer goes on (a passive checkpoint never blocks a writer).

    No-op on other databases, inside a transaction (the write lock is already held: waiting
    here could deadlock with a process that holds the file and waits for the database), for
    an in-memory database, and where there is no `flock`."""
    path = _turn_path()
    if path is None:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # a read-only directory: SQLite's own wait, as without
        yield
        return
    automatic = _automatic_checkpoint(0) if checkpoint_after else None
    try:
        deadline = time.monotonic() + TURN_WAIT_SECONDS
        pause = TURN_POLL_FIRST
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break  # a stuck holder: SQLite's busy handler decides, as without the file
                time.sleep(pause)
                pause = min(TURN_POLL_LAST, pause * 2)
        yield
    finally:
        os.close(fd)  # releases the flock, if it was taken
        if automatic is not None:
            _checkpoint_after(automatic)


def _automatic_checkpoint(pages: int) -> int | None:
    """Set the connection's automatic checkpoint (`pages` of log, 0: none); returns the
    setting it had, or None when it could not be read."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            row = cursor.fetchone()
            cursor.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
    except DatabaseError:
        return None
    return int(row[0]) if row else None


def _checkpoint_after(automatic: int) -> None:
    """A passive checkpoint (outside any transaction), then the automatic one set back."""
    try:
        with connection.cursor() as cursor:
            if not connection.in_atomic_block:
                cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            cursor.execute(f"PRAGMA wal_autocheckpoint = {int(automatic)}")
    except DatabaseError:  # a lost connection: the next one starts with SQLite's default
        pass


def _turn_path() -> str | None:
    if fcntl is None or connection.vendor != "sqlite" or connection.in_atomic_block:
        return None
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
        return None
    return f"{name}.write-turn"


@contextmanager
def write_transaction(*, checkpoint_after: bool = False) -> Iterator[None]:
    """`transaction.atomic()` entered in this process's write turn (`write_turn`)."""
    with write_turn(checkpoint_after=checkpoint_after), transaction.atomic():
        yield
