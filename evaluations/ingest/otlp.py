"""Received traces stored: a decoded batch (`interop/otel/otlp.py`) written per trace.

`traces_store()` writes a batch in one transaction, idempotently (an exporter retries a
batch it got no answer for): a trace is one row per project and trace id, a span one row
per trace and span id, and inserting either again changes nothing. A trace's aggregates
(span and error counts, start, end, its root's name, `complete` once its root span has
arrived) are written with it, and recomputed from its stored spans when spans of it came
in an earlier request. Traces that name a run (`evalsite.run_id` / `evalsite.eval_id`,
see `runs.py`) are handed to `runs.traces_attach` in the same transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from evaluations.interop.otel.otlp import SPAN_COLUMNS, Batch, nul_free_json
from evaluations.models import Project, Span, Trace, TraceThread

# --- Storing ---------------------------------------------------------------------------------------


@dataclass
class Stored:
    """What a request stored: trace pks by trace id, and what the exporter is told of the
    spans that were not taken (OTLP's partial success)."""

    trace_pks: dict[str, int]
    accepted_spans: int
    rejected_spans: int = 0
    messages: list[str] = field(default_factory=list)


def _insert_sql(
    model: Any, columns: list[str], count: int, *, json_columns: frozenset[str] = frozenset(), returning: str = ""
) -> str:
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c in json_columns else "%s" for c in columns) + ")"
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    sql = f"INSERT INTO {model._meta.db_table} ({names}) VALUES {', '.join([one] * count)} ON CONFLICT DO NOTHING"  # noqa: S608
    return sql + (f" RETURNING {returning}" if returning else "")


_TRACE_COLUMNS = [
    "project_id",
    "trace_id",
    "thread_id",
    "name",
    "start_ns",
    "end_ns",
    "received",
    "received_at",
    "service_name",
    "eval_id",
    "span_count",
    "error_count",
    "complete",
    "resource",
    "end_user",
    "environment",
]


def traces_store(*, project: Project, batch: Batch) -> Stored:
    """Store a batch's traces and spans (see the module doc); one transaction with what the
    runs do with the traces that name them."""
    from evaluations.ingest.runs import check_run_refs, traces_attach

    refs = check_run_refs(project=project, batch=batch)  # refuses another project's run: nothing stored
    stored = Stored(trace_pks={}, accepted_spans=0)
    for trace_hex, reason in refs.rejected.items():
        rows = batch.traces.pop(trace_hex)
        stored.rejected_spans += len(rows.spans)
        stored.messages.append(reason)
    if not batch.traces:
        return stored
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with transaction.atomic():
        new = _insert_traces(project, batch, now)
        stored.trace_pks.update(new)
        # (thread, joins it, newly failed): a new trace's aggregates are this request's own
        touched = [(batch.traces[t].thread_id, 1, int(batch.traces[t].errors > 0)) for t in new]
        again = [t for t in batch.traces if t not in new]
        earlier: Earlier = {}
        if again:
            found, earlier = _existing(project, again, batch)
            stored.trace_pks.update(found)
        _insert_spans(batch, stored.trace_pks)
        if again:
            failing = _recount([stored.trace_pks[t] for t in again])
            # a trace counts in its thread's failures once it has a failed span, whichever request
            # brings it: its root (and thread) and a failed tool span often come in different exports
            for t, (thread, joins, failed_before) in earlier.items():
                fails = stored.trace_pks[t] in failing
                touched.append((thread, int(joins), int(fails and (joins or not failed_before))))
        users = {t.thread_id: t.end_user for t in reversed(batch.traces.values()) if t.end_user}
        _threads_touch(project, touched, now, users)
        stored.accepted_spans = sum(len(t.spans) for t in batch.traces.values())
        stored.messages += traces_attach(
            project=project, batch=batch, trace_pks=stored.trace_pks, refs=refs, earlier=again
        )
    return stored


def _insert_traces(project: Project, batch: Batch, now: Any) -> dict[str, int]:
    rows = []
    for t in batch.traces.values():
        rows.append(
            (
                project.pk,
                t.trace_id,
                t.thread_id,
                (t.root_name or "")[:255],
                t.start_ns,
                t.end_ns,
                True,
                now,
                t.service_name,
                t.eval_id,
                len(t.spans),
                t.errors,
                t.root_name is not None,
                nul_free_json(json.dumps(t.resource, default=str)),
                t.end_user,
                t.environment,
            )
        )
    out: dict[str, int] = {}
    per = max(1, 900 // len(_TRACE_COLUMNS))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(
                _insert_sql(
                    Trace, _TRACE_COLUMNS, len(chunk), json_columns=frozenset({"resource"}), returning="id, trace_id"
                ),
                [v for row in chunk for v in row],
            )
            out.update((trace_id, pk) for pk, trace_id in cursor.fetchall())
    return out


Earlier = dict[str, tuple[str, bool, bool]]  # trace id -> (its thread, joins it now, had failed)


def _existing(project: Project, trace_ids: list[str], batch: Batch) -> tuple[dict[str, int], Earlier]:
    """Traces some of whose spans came before (or came at once in another request): their
    pks, and what this request adds to them where they had nothing; and for each, its thread
    after this request, whether it joins that thread now, and whether it had a failed span
    already. The rows are locked until the commit, so a concurrent request for the same trace
    reads them after this one's spans are in (each failure is counted once)."""
    rows = (Trace.objects.select_for_update().filter(project=project, received=True, trace_id__in=trace_ids)
            .order_by("pk").values_list("trace_id", "pk", "thread_id", "error_count"))
    found: dict[str, int] = {}
    earlier: Earlier = {}
    for trace_id, pk, thread, errors in rows:
        found[trace_id] = pk
        named = batch.traces[trace_id].thread_id
        earlier[trace_id] = (thread or named, not thread and bool(named), errors > 0)
    table = Trace._meta.db_table
    with connection.cursor() as cursor:
        for trace_id, pk in found.items():
            t = batch.traces[trace_id]
            cursor.execute(
                f"UPDATE {table} SET thread_id = CASE WHEN thread_id = '' THEN %s ELSE thread_id END, "  # noqa: S608
                "service_name = CASE WHEN service_name = '' THEN %s ELSE service_name END, "
                "eval_id = CASE WHEN eval_id = '' THEN %s ELSE eval_id END, "
                "end_user = CASE WHEN end_user = '' THEN %s ELSE end_user END, "
                "environment = CASE WHEN environment = '' THEN %s ELSE environment END WHERE id = %s",
                [t.thread_id, t.service_name, t.eval_id, t.end_user, t.environment, pk],
            )
    return found, earlier


def _insert_spans(batch: Batch, trace_pks: dict[str, int]) -> None:
    columns = ["trace_id", *SPAN_COLUMNS]
    rows = [(trace_pks[t.trace_id], *row) for t in batch.traces.values() for row in t.spans.values()]
    per = max(1, 900 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(
                _insert_sql(Span, columns, len(chunk), json_columns=frozenset({"attributes"})),
                [v for row in chunk for v in row],
            )


def _recount(pks: list[int]) -> set[int]:
    """A trace's aggregates from its stored spans (spans of it arrived in several requests);
    returns those of them with a failed span."""
    trace, span = Trace._meta.db_table, Span._meta.db_table
    of = f"FROM {span} s WHERE s.trace_id = {trace}.id"
    root = f"{of} AND s.parent_span_id = ''"
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {trace} SET span_count = (SELECT COUNT(*) {of}), "  # noqa: S608 - names from the models
            f"error_count = (SELECT COUNT(*) {of} AND s.status = 'ERROR'), "
            f"start_ns = (SELECT MIN(s.start_ns) {of}), end_ns = (SELECT MAX(s.end_ns) {of}), "
            f"complete = EXISTS (SELECT 1 {root}), "
            f"name = COALESCE((SELECT s.name {root} ORDER BY s.start_ns LIMIT 1), name) "
            f"WHERE id IN ({marks}) RETURNING id, error_count",
            pks,
        )
        return {pk for pk, errors in cursor.fetchall() if errors}


def _threads_touch(project: Project, touched: list[tuple[str, int, int]], now: Any, users: dict[str, str]) -> None:
    """The threads of the traces this request stored spans of: created, or their last
    activity moved; `touched` holds each trace's thread, 1 when the trace is new to it and 1
    when the trace is newly failed there; `users`, an end user each thread named."""
    threads: dict[str, list[Any]] = {}
    for thread_id, joins, failed in touched:
        if thread_id:
            row = threads.setdefault(thread_id, [0, 0, users.get(thread_id, "")])
            row[0] += joins
            row[1] += failed
    if not threads:
        return
    table = TraceThread._meta.db_table
    columns = ["project_id", "thread_id", "first_at", "last_at", "traces", "errors", "end_user"]
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    rows = [(project.pk, thread, now, now, *values) for thread, values in threads.items()]
    per = max(1, 900 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(chunk))} "  # noqa: S608
                "ON CONFLICT (project_id, thread_id) DO UPDATE SET last_at = excluded.last_at, "
                f"traces = {table}.traces + excluded.traces, errors = {table}.errors + excluded.errors, "
                f"end_user = CASE WHEN {table}.end_user = '' THEN excluded.end_user ELSE {table}.end_user END",
                [v for row in chunk for v in row],
            )
