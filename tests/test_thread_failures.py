"""Issue 41, item 6: the threads list counts a conversation's failed traces whenever their
spans arrive. An OpenTelemetry SDK's batch processor exports spans as they end, so a trace's
children often come in an export before its root (which names the thread), and a failed tool
span in an export after it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import Project, Trace, TraceThread
from tests.otlp_helpers import post, request_of, span


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="agent").secret


def send(token: str, *spans: Any) -> None:
    assert post(Client(), request_of(list(spans)), token).status_code == 200


def root(trace: bytes, thread: str = "conv-1", error: str = "") -> Any:
    return span(trace, trace[:8], b"", "agent", 0, 100, {"session.id": thread, "output.value": "hi"}, error=error)


def tool(trace: bytes, number: int, error: str = "") -> Any:
    return span(trace, trace[:4] + number.to_bytes(4, "big"), trace[:8], "tool lookup", 10, 20,
                {"openinference.span.kind": "TOOL", "tool.name": "lookup"}, error=error)


def failures_shown(client: Client) -> dict[str, tuple[int, int]]:
    """The threads list as a person reads it: thread -> (traces, with errors)."""
    html = client.get("/threads/").content.decode()
    rows = re.findall(r'\?id=[^"]*">([^<]+)</a></td>.*?<td class="num">(\d+)</td>\s*<td class="num[^"]*">(\d+)</td>',
                      html, re.S)
    return {name: (int(traces), int(errors)) for name, traces, errors in rows}


def test_a_failed_tool_span_in_a_later_export_is_counted_in_its_thread(
        acme: Project, alice_client: Client, token: str) -> None:
    first, second = b"\x11" * 16, b"\x12" * 16
    send(token, root(first), tool(first, 1), root(second), tool(second, 1))
    assert failures_shown(alice_client) == {"conv-1": (2, 0)}
    send(token, tool(first, 2, error="timeout"))
    assert failures_shown(alice_client) == {"conv-1": (2, 1)}
    send(token, tool(second, 2, error="500 from the API"))
    assert failures_shown(alice_client) == {"conv-1": (2, 2)}


def test_a_failed_child_that_came_before_its_root_counts_when_the_root_names_the_thread(
        acme: Project, alice_client: Client, token: str) -> None:
    trace = b"\x21" * 16
    send(token, tool(trace, 1, error="timeout"))
    assert not TraceThread.objects.exists()
    send(token, root(trace))
    assert failures_shown(alice_client) == {"conv-1": (1, 1)}
    assert Trace.objects.get().error_count == 1


def test_a_trace_is_one_failure_however_many_failed_spans_and_retries_bring_it(
        acme: Project, alice_client: Client, token: str) -> None:
    trace = b"\x31" * 16
    send(token, root(trace, error="gave up"))
    send(token, tool(trace, 1, error="timeout"))
    send(token, tool(trace, 1, error="timeout"))  # the exporter's retry of the same request
    send(token, tool(trace, 2, error="timeout"), tool(trace, 3))
    assert failures_shown(alice_client) == {"conv-1": (1, 1)}
    assert Trace.objects.get().error_count == 3


def test_spans_without_the_thread_id_still_count_in_the_thread_their_trace_joined(
        acme: Project, alice_client: Client, token: str) -> None:
    """The later export carries no session.id at all: the stored trace says which thread."""
    trace, other = b"\x41" * 16, b"\x42" * 16
    send(token, root(trace, thread="conv-a"))
    send(token, root(other, thread="conv-b"), tool(trace, 1, error="timeout"))
    assert failures_shown(alice_client) == {"conv-a": (1, 1), "conv-b": (1, 0)}
