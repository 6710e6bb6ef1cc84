"""The raw OTLP/JSON curl example of docs/traces.md works as written: its method, URL,
headers and body are read from the page and sent over real HTTP to a live server on
127.0.0.1, and the trace it describes is stored, once, with its tool call. The Traces page
shows the same example, filled in with the server's address."""

from __future__ import annotations

import html
import re
import shlex
from typing import Any

import pytest
import requests

from evaluations.accounts.tokens import token_create
from evaluations.models import Project, Span, Trace
from tests.conftest import REPO

MARKER = "<!-- otlp-curl-example -->"


def _example() -> list[str]:
    text = (REPO / "docs" / "traces.md").read_text(encoding="utf-8")
    block = re.search(re.escape(MARKER) + r"\n```bash\n(.*?)\n```", text, re.S)
    assert block, "docs/traces.md lost its curl example"
    return shlex.split(block.group(1).replace("\\\n", " "))  # as the shell joins continued lines


def _request(argv: list[str], server: str, token: str) -> dict[str, Any]:
    """curl's arguments as a request, the shell's variables filled in (only the options the
    example uses are understood: anything else fails the test, so the page cannot drift)."""
    assert argv[0] == "curl"
    out: dict[str, Any] = {"headers": {}}
    args = iter(argv[1:])
    for arg in args:
        if arg == "-X":
            out["method"] = next(args)
        elif arg == "-H":
            name, _, value = next(args).partition(": ")
            out["headers"][name] = value.replace("$TOKEN", token)
        elif arg == "-d":
            out["body"] = next(args)
        else:
            assert arg.startswith(("$EVALSITE/", "http://")), f"an option the test does not know: {arg}"
            out["url"] = arg.replace("$EVALSITE", server)
    return out


def test_the_example_is_a_curl_post_of_otlp_json_with_a_bearer_token() -> None:
    request = _request(_example(), "http://server", "es_x")
    assert request["method"] == "POST" and request["url"] == "http://server/v1/traces"
    assert request["headers"] == {"Authorization": "Bearer es_x", "Content-Type": "application/json"}
    assert '"resourceSpans"' in request["body"]


@pytest.mark.django_db(transaction=True)
def test_the_curl_example_is_stored_as_a_trace_with_its_tool_call(acme: Project, alice: Any,
                                                                   live_server: Any) -> None:
    token = token_create(user=alice, name="curl").secret
    request = _request(_example(), live_server.url, token)
    for _ in range(2):  # a retry stores nothing twice
        response = requests.request(request["method"], request["url"], headers=request["headers"],
                                    data=request["body"].encode(), timeout=30)
        assert response.status_code == 200, response.text
        assert response.json() == {}
    trace = Trace.objects.get(project=acme)
    assert trace.trace_id == "5b8efff798038103d269b633813fc60c"
    assert trace.name == "agent" and trace.service_name == "travel-agent" and trace.complete
    assert trace.span_count == 2 and Span.objects.filter(trace=trace).count() == 2
    tool = Span.objects.get(trace=trace, name="tool get_weather")
    assert tool.kind == "TOOL" and tool.attributes["tool.name"] == "get_weather"
    assert tool.attributes["input.value"] == '{"city": "Paris"}'


@pytest.mark.django_db
def test_the_traces_page_shows_the_same_example_with_this_servers_address(acme: Project, alice: Any) -> None:
    from django.test import Client

    client = Client()
    client.force_login(alice)
    page = client.get("/traces/").content.decode()
    example = re.search(r'<details class="curl-example" data-testid="curl-example" open>.*?<code>(.*?)</code>', page,
                        re.S)
    assert example, "no curl example, or folded on an empty trace list"
    shown = html.unescape(example.group(1))
    assert shown.startswith('curl -X POST "http://testserver/v1/traces"')
    assert _request(shlex.split(shown.replace("\\\n", " ")), "", "es_x")["body"] == \
        _request(_example(), "", "es_x")["body"]  # the docs' body, to the character
    assert 'href="/help/traces/#send-a-trace-with-curl"' in page
