"""Independent reads side by side, each on a connection of its own.

A run's completion reads its aggregates in a few queries that do not depend on each other
(the criteria's statistics, their medians, the comparison and the causes). On SQLite each
query is one core's work while the machine's other core is idle: the last batch's worker is
alone by then. `side_by_side` runs them at once, on threads: the database releases Python's
lock while it works, so two queries take about the time of the longer one.

Only where another connection sees what this one sees: outside any transaction (a test's,
or a caller's: its rows are not committed yet) and not on an in-memory SQLite database (a
connection of its own is an empty database)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection, connections


def side_by_side(*calls: Callable[[], Any], apart: bool = True) -> list[Any]:
    """Each call's result, in order. The first runs here, on this thread's connection; the
    others on threads of their own, each with its own connection, closed as it ends. Where
    that is not safe (see the module's docstring), or not `apart` (the caller's work is too
    small to pay for a thread and a connection), they run here, one after another. An
    exception is raised where the call would have raised it, once the others have ended."""
    if len(calls) <= 1 or not apart or not separate_connections_agree():
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=len(calls) - 1, thread_name_prefix="evalsite-alongside") as pool:
        later = [pool.submit(_on_own_connection, call) for call in calls[1:]]
        try:
            first = calls[0]()
        finally:
            for future in later:
                future.exception()  # wait for each: no thread outlives the call
        return [first, *(future.result() for future in later)]


def separate_connections_agree() -> bool:
    """Whether a new connection reads what this thread's reads: no transaction is open here,
    and the database is not one that lives in this connection's memory."""
    if connection.in_atomic_block:
        return False
    in_memory = getattr(connection, "is_in_memory_db", None)
    return not (connection.vendor == "sqlite" and callable(in_memory) and in_memory())


def _on_own_connection(call: Callable[[], Any]) -> Any:
    try:
        return call()
    finally:
        connections.close_all()  # this thread's connections: it ends here
