"""Queue workers take turns at SQLite's one write lock through a file lock beside the
database (`evaluations.locks.write_turn`): a waiter goes on as soon as the holder's
transaction has committed, instead of sleeping on in SQLite's busy handler."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time

import pytest
from django.db import connection, transaction

from evaluations.locks import _turn_path, write_transaction, write_turn
from evaluations.models import Project

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif("os.environ.get('DATABASE_URL', '').startswith('postgres')",
                                 reason="the write turn is SQLite's; elsewhere it does nothing")


def _taken_elsewhere(path: str) -> bool:
    """Whether another holder has the file lock (tried from a descriptor of our own)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@sqlite_only
def test_the_turn_is_held_from_before_the_transaction_until_it_has_committed() -> None:
    path = _turn_path()
    assert path == f"{connection.settings_dict['NAME']}.write-turn"
    assert not _taken_elsewhere(path)
    with write_transaction():
        assert _taken_elsewhere(path)
        Project.objects.create(slug="turn", name="Turn")
    assert not _taken_elsewhere(path)
    assert Project.objects.filter(slug="turn").exists()  # committed


@sqlite_only
def test_a_failed_transaction_gives_the_turn_back() -> None:
    path = _turn_path()
    assert path is not None
    with pytest.raises(ValueError), write_transaction():
        Project.objects.create(slug="rolled-back", name="Rolled back")
        raise ValueError("boom")
    assert not _taken_elsewhere(path)
    assert not Project.objects.filter(slug="rolled-back").exists()


@sqlite_only
def test_a_writer_waits_for_the_holder_and_goes_on_once_it_lets_go() -> None:
    path = _turn_path()
    assert path is not None
    events: list[str] = []
    holding = threading.Event()

    def holder() -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        holding.set()
        time.sleep(0.3)
        events.append("released")
        os.close(fd)

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)
    with write_turn():
        events.append("entered")
    thread.join()
    assert events == ["released", "entered"]


def test_inside_a_transaction_there_is_no_turn_to_wait_for() -> None:
    """The write lock is the transaction's already: waiting for the file there could deadlock
    with a process that holds the file and waits for the database."""
    with transaction.atomic():
        assert _turn_path() is None
        with write_turn():
            Project.objects.create(slug="nested", name="Nested")
    assert Project.objects.filter(slug="nested").exists()


@pytest.mark.skipif("not os.environ.get('DATABASE_URL', '').startswith('postgres')", reason="PostgreSQL only")
def test_postgresql_has_no_write_turn() -> None:
    assert _turn_path() is None
    with write_transaction():
        Project.objects.create(slug="pg", name="PG")
    assert Project.objects.filter(slug="pg").exists()


def _pragma(sql: str) -> tuple[int, ...]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return tuple(cursor.fetchone())


@sqlite_only
def test_a_big_writes_log_is_checkpointed_after_its_turn_not_inside_it() -> None:
    before = _pragma("PRAGMA wal_autocheckpoint")
    _pragma("PRAGMA wal_checkpoint(TRUNCATE)")  # an empty log to start from
    with write_transaction(checkpoint_after=True):
        assert _pragma("PRAGMA wal_autocheckpoint") == (0,)  # the commit leaves the log as it is
        Project.objects.bulk_create([Project(slug=f"p{i}", name="x" * 1000) for i in range(100)])
    assert _pragma("PRAGMA wal_autocheckpoint") == before
    # The database file itself holds the rows (read past the log): checkpointed after the turn.
    # (A hundred kilobytes of log is under the automatic checkpoint's 1,000 pages: it would not have.)
    name = connection.settings_dict["NAME"]
    main_file = sqlite3.connect(f"file:{name}?immutable=1", uri=True)
    try:
        [(count,)] = main_file.execute(
            "SELECT COUNT(*) FROM evaluations_project WHERE slug LIKE 'p%'").fetchall()
    finally:
        main_file.close()
    assert count == 100
