"""Bulk writes without the ORM's per-row cost: rows as tuples, a few hundred per INSERT.

Django's `bulk_create` builds a model instance and resolves every field of every row; for an
import of 10,000 cases that was a third of the import. Values go in as they are: JSON
columns take JSON text (cast to jsonb on PostgreSQL).

On SQLite the rows go through `executemany` of a one-row INSERT: sqlite3 binds and steps the
one prepared statement in C, with no SQL text of hundreds of placeholders to build and for
Django to rewrite (`%s` to `?`) each time. On PostgreSQL they are streamed with COPY: one
statement, no SQL text to split into placeholders (psycopg spent more time parsing a
multi-row INSERT's text than the server spent on it), and the server's fastest way in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection


def insert_rows(
    model: Any,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    json_columns: frozenset[str] | set[str] = frozenset(),
) -> None:
    if not rows:
        return
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c in json_columns else "%s" for c in columns) + ")"
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    head = f"INSERT INTO {model._meta.db_table} ({quoted}) VALUES "  # noqa: S608 - names from the model
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.executemany(head + one, rows)
        return
    if connection.vendor == "postgresql":
        copy_rows(model._meta.db_table, columns, rows)
        return
    per_statement = max(1, 900 // len(columns))  # under SQLite's 999 bound parameters on old builds
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(head + ", ".join([one] * len(chunk)), [v for row in chunk for v in row])


def copy_rows(table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """PostgreSQL: `COPY table (columns) FROM STDIN`, a row at a time, in the connection's
    transaction. Values go in as text (psycopg's text dumpers: NULL for None); the server
    parses each for its column, so JSON text becomes jsonb as an INSERT's `::jsonb` would."""
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(table)} ({quoted}) FROM STDIN") as copy:  # names from the model
        for row in rows:
            copy.write_row(row)
