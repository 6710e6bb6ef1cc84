"""The eval-set pages: list, detail with its cases table, case detail and downloads.

Eval sets are created through the real import service from small native files in
tests/data/pages/ (or generated ones), so the pages see exactly what an upload writes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from evaluations.evalsets.services import ImportOutcome, evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalCase, EvalSet, EvalSetSource, Membership, Project
from tests.conftest import DATA

PAGES = DATA / "pages"


def import_file(project: Project, name: str, user: Any = None) -> ImportOutcome:
    path = PAGES / name
    return evalset_import(project=project, files=[SourceFile(path.name, path.read_bytes())], user=user)[0]


def generated_evalset(count: int, *, eval_set_id: str = "generated", tag_every: int = 3) -> SourceFile:
    """A native eval set of `count` one-turn cases; every `tag_every`-th case is tagged "slow"."""
    cases = [
        {
            "eval_id": f"case_{i:04d}",
            "name": f"Generated case {i}",
            "tags": ["slow"] if i % tag_every == 0 else ["fast"],
            "conversation": [
                {
                    "invocation_id": "turn_1",
                    "user_content": {"role": "user", "content": f"Question number {i} about item-{i:04d}"},
                    "expected_tool_trajectory": [{"name": "lookup", "args": {"id": i}}],
                }
            ],
        }
        for i in range(count)
    ]
    doc = {"eval_set_id": eval_set_id, "name": f"Generated {count}", "eval_cases": cases}
    return SourceFile(f"{eval_set_id}.evalset.json", json.dumps(doc).encode())


def import_generated(project: Project, count: int, *, user: Any = None, **kwargs: Any) -> ImportOutcome:
    return evalset_import(project=project, files=[generated_evalset(count, **kwargs)], user=user)[0]


def case_with_text(project: Project, text: str, *, eval_id: str = "probe") -> EvalCase:
    doc = {
        "eval_set_id": f"probe_{eval_id}",
        "eval_cases": [
            {
                "eval_id": eval_id,
                "name": text[:100],
                "conversation": [
                    {
                        "invocation_id": "turn_1",
                        "user_content": {"role": "user", "content": text},
                        "expected_tool_trajectory": [{"name": "search", "args": {"query": text}}],
                        "expected_final_response": {"role": "assistant", "content": text},
                    }
                ],
            }
        ],
    }
    outcome = evalset_import(project=project, files=[SourceFile("probe.evalset.json", json.dumps(doc).encode())])[0]
    return outcome.version.cases.get()


@pytest.fixture
def weather(acme: Project, alice: Any) -> ImportOutcome:
    return import_file(acme, "weather.evalset.json", user=alice)


def html(response: Any) -> str:
    return response.content.decode()


# --- Access -----------------------------------------------------------------------------------


def page_urls(outcome: ImportOutcome) -> dict[str, str]:
    version = outcome.version
    case = version.cases.order_by("position").first()
    assert case is not None
    return {
        "evalset_detail": reverse("evalset_detail", args=[outcome.evalset.pk]),
        "case_detail": reverse("case_detail", args=[case.pk]),
        "version_original": reverse("version_original", args=[version.pk]),
        "version_native": reverse("version_native", args=[version.pk]),
    }


@pytest.mark.parametrize(
    "name",
    ["home", "evalset_list", "evalset_upload", "evalset_detail", "case_detail", "version_original", "version_native"],
)
def test_every_page_sends_anonymous_visitors_to_the_login_page(weather: ImportOutcome, name: str) -> None:
    urls = page_urls(weather)
    url = urls.get(name) or reverse(name)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_project_switch_also_needs_a_login(acme: Project) -> None:
    response = Client().post(reverse("project_switch"), {"project": acme.pk})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["evalset_detail", "case_detail", "version_original", "version_native"])
def test_another_projects_pages_are_not_found(weather: ImportOutcome, bob_client: Client, name: str) -> None:
    response = bob_client.get(page_urls(weather)[name])
    assert response.status_code == 404
    assert "Weather Agent Tests" not in html(response)


def test_a_viewer_can_read_the_projects_pages(weather: ImportOutcome, acme: Project) -> None:
    carol = get_user_model().objects.create_user("carol", password="carol-pass-123")
    Membership.objects.create(project=acme, user=carol, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(carol)
    for url in page_urls(weather).values():
        assert client.get(url).status_code == 200, url


def test_a_superuser_sees_every_project(weather: ImportOutcome) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client = Client()
    client.force_login(root)
    assert client.get(page_urls(weather)["evalset_detail"]).status_code == 200


# --- List ---------------------------------------------------------------------------------------


def test_list_shows_only_the_current_projects_evalsets(
    weather: ImportOutcome, globex: Project, alice_client: Client
) -> None:
    import_generated(globex, 4, eval_set_id="globex_secret_set")
    response = alice_client.get(reverse("evalset_list"))
    assert response.status_code == 200
    page = html(response)
    assert "Weather Agent Tests" in page
    assert "weather_agent_v1" in page
    assert "globex_secret_set" not in page


def test_list_shows_latest_version_case_count_and_format(weather: ImportOutcome, alice_client: Client) -> None:
    import_generated(weather.evalset.project, 7, eval_set_id="weather_agent_v1")  # becomes v2 of the same set
    page = html(alice_client.get(reverse("evalset_list")))
    row = page.split("weather_agent_v1", 1)[1].split("</tr>", 1)[0]
    assert ">v2<" in row
    assert ">7<" in row
    assert "native" in row
    assert "agentflow" in row


def test_list_of_a_project_without_evalsets_points_at_upload(acme: Project, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("evalset_list")))
    assert "No eval sets in Acme yet" in page
    assert f'href="{reverse("evalset_upload")}"' in page


def test_switching_project_changes_the_list_and_is_remembered(
    acme: Project, globex: Project, alice: Any, alice_client: Client
) -> None:
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.MEMBER)
    import_generated(acme, 2, eval_set_id="acme_set")
    import_generated(globex, 2, eval_set_id="globex_set")
    first = html(alice_client.get(reverse("evalset_list")))
    assert "acme_set" in first and "globex_set" not in first  # Acme sorts first by name

    response = alice_client.post(reverse("project_switch"), {"project": globex.pk})
    assert response.status_code == 302
    assert response["Location"] == reverse("evalset_list")
    after = html(alice_client.get(reverse("evalset_list")))
    assert "globex_set" in after and "acme_set" not in after
    assert f'<option value="{globex.pk}" selected>' in after


def test_switching_to_a_project_one_cannot_see_is_not_found(
    acme: Project, globex: Project, alice_client: Client
) -> None:
    response = alice_client.post(reverse("project_switch"), {"project": globex.pk})
    assert response.status_code == 404
    assert alice_client.post(reverse("project_switch"), {"project": "nope"}).status_code == 404


def test_the_header_has_the_switcher_nav_and_a_logout_form(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("evalset_list")))
    assert f'action="{reverse("project_switch")}"' in page
    assert f'href="{reverse("evalset_upload")}"' in page
    assert "alice" in page
    logout_form = page.split(f'action="{reverse("logout")}"', 1)[1].split("</form>", 1)[0]
    assert "csrfmiddlewaretoken" in logout_form
    assert 'method="post"' in page.split(f'action="{reverse("logout")}"', 1)[0].rsplit("<form", 1)[1]


def test_pages_load_htmx_from_the_site_itself(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("evalset_list")))
    assert 'src="/static/vendor/htmx.min.js"' in page
    assert "https://" not in page


# --- Detail -------------------------------------------------------------------------------------


def test_detail_lists_versions_with_their_facts_and_downloads(weather: ImportOutcome, alice_client: Client) -> None:
    version = weather.version
    page = html(alice_client.get(reverse("evalset_detail", args=[weather.evalset.pk])))
    assert "Weather Agent Tests" in page
    assert version.content_hash[:12] in page
    assert "weather.evalset.json" in page
    assert reverse("version_original", args=[version.pk]) in page
    assert reverse("version_native", args=[version.pk]) in page
    versions_table = page.split('class="table versions"', 1)[1].split("</table>", 1)[0]
    assert "alice" in versions_table  # uploaded by
    assert '<td class="num">3</td>' in versions_table  # cases
    assert '<td class="num">5</td>' in versions_table  # turns: 1 + 3 + 1


def test_detail_shows_the_latest_version_unless_one_is_asked_for(acme: Project, alice_client: Client) -> None:
    first = import_generated(acme, 3, eval_set_id="grow")
    import_generated(acme, 5, eval_set_id="grow")
    url = reverse("evalset_detail", args=[first.evalset.pk])
    latest = html(alice_client.get(url))
    assert "Cases in v2" in latest
    assert "case_0004" in latest
    older = html(alice_client.get(url, {"version": 1}))
    assert "Cases in v1" in older
    assert "case_0002" in older and "case_0004" not in older
    assert alice_client.get(url, {"version": 9}).status_code == 404
    assert alice_client.get(url, {"version": "x"}).status_code == 404


def test_detail_cases_table_shows_each_cases_columns(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("evalset_detail", args=[weather.evalset.pk])))
    table = page.split('class="table cases"', 1)[1]
    row = table.split("multi_turn_paris", 1)[1].split("</tr>", 1)[0]
    assert "Multi-turn Paris forecast" in row
    assert ">multi-turn<" in row
    assert '<td class="num">3</td>' in row  # turns
    assert '<td class="num">2</td>' in row  # tool calls
    assert "What&#x27;s the weather in Paris?" in row


def test_a_long_first_message_is_cut_with_a_visible_ellipsis(acme: Project, alice_client: Client) -> None:
    case = case_with_text(acme, "word " * 100)
    page = html(alice_client.get(reverse("evalset_detail", args=[case.version.evalset_id])))
    row = page.split('class="first-message"', 1)[1].split("</td>", 1)[0]
    shown = row.split(">", 1)[1]
    assert shown.endswith("…")
    assert len(shown) <= 121


def test_search_filters_cases_by_id_name_and_first_message(weather: ImportOutcome, alice_client: Client) -> None:
    url = reverse("evalset_detail", args=[weather.evalset.pk])
    by_message = html(alice_client.get(url, {"q": "umbrella"}))
    assert "multi_turn_paris" not in by_message  # "umbrella" is in turn 3, not the first message
    by_message = html(alice_client.get(url, {"q": "tokyo"}))
    assert "basic_weather" in by_message
    assert "multi_turn_paris" not in by_message
    by_name = html(alice_client.get(url, {"q": "Structured booking"}))
    assert "structured_booking" in by_name and "basic_weather" not in by_name
    nothing = html(alice_client.get(url, {"q": "zzz-no-such-thing"}))
    assert "No cases match" in nothing


def test_tag_filter_offers_the_versions_tags_and_filters(weather: ImportOutcome, alice_client: Client) -> None:
    url = reverse("evalset_detail", args=[weather.evalset.pk])
    page = html(alice_client.get(url, {"tag": "multi-turn"}))
    select = page.split('id="tag-filter"', 1)[1].split("</select>", 1)[0]
    for tag in ["basic", "booking", "multi-turn", "weather"]:
        assert f'value="{tag}"' in select
    assert '<option value="multi-turn" selected>' in select
    table = page.split('id="cases-table"', 1)[1]
    assert "multi_turn_paris" in table
    assert "basic_weather" not in table and "structured_booking" not in table


def test_search_and_tag_combine(acme: Project, alice_client: Client) -> None:
    outcome = import_generated(acme, 30)
    url = reverse("evalset_detail", args=[outcome.evalset.pk])
    page = html(alice_client.get(url, {"tag": "slow", "q": "item-001"}))
    table = page.split('id="cases-table"', 1)[1]
    # item-0010 .. item-0019: the slow ones are 12, 15, 18.
    assert [f"case_00{i}" in table for i in range(10, 20)] == [i % 3 == 0 for i in range(10, 20)]


def test_pagination_shows_fifty_cases_a_page_and_keeps_filters(acme: Project, alice_client: Client) -> None:
    outcome = import_generated(acme, 120)
    url = reverse("evalset_detail", args=[outcome.evalset.pk])
    first = html(alice_client.get(url))
    assert "case_0049" in first and "case_0050" not in first
    assert "Page 1 of 3" in first
    second = html(alice_client.get(url, {"page": 2}))
    assert "case_0049" not in second and "case_0050" in second and "case_0099" in second
    assert "case_0100" not in second

    filtered = html(alice_client.get(url, {"tag": "fast", "q": "Question", "version": 1}))
    assert "Page 1 of 2" in filtered  # 80 fast cases
    next_link = filtered.split('rel="next"', 1)[0].rsplit('href="', 1)[1]
    assert "tag=fast" in next_link and "q=Question" in next_link and "page=2" in next_link
    assert "version=1" in next_link


def test_an_htmx_request_gets_only_the_cases_table(weather: ImportOutcome, alice_client: Client) -> None:
    url = reverse("evalset_detail", args=[weather.evalset.pk])
    response = alice_client.get(url, {"q": "paris"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    fragment = html(response)
    assert fragment.lstrip().startswith('<div id="cases-table">')
    assert "<html" not in fragment and "Versions" not in fragment
    assert "multi_turn_paris" in fragment and "basic_weather" not in fragment
    assert "HX-Request" in response["Vary"]


def test_an_htmx_history_restore_gets_the_whole_page(weather: ImportOutcome, alice_client: Client) -> None:
    url = reverse("evalset_detail", args=[weather.evalset.pk])
    headers = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    assert "<html" in html(alice_client.get(url, headers=headers))


def test_the_search_form_updates_the_table_through_htmx(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("evalset_detail", args=[weather.evalset.pk])))
    form = page.split('class="filters"', 1)[1].split(">", 1)[0]
    assert 'hx-get="' in form and 'hx-target="#cases-table"' in form and 'hx-push-url="true"' in form
    assert 'method="get"' in form  # and it still works without JavaScript


def test_detail_query_count_does_not_grow_with_cases(
    acme: Project, alice: Any, alice_client: Client, django_assert_num_queries: Any
) -> None:
    small = import_generated(acme, 5, eval_set_id="small", user=alice)
    import_generated(acme, 199, eval_set_id="large", user=alice)  # two versions: their uploader is shown too
    large = import_generated(acme, 200, eval_set_id="large", user=alice)
    small_url = reverse("evalset_detail", args=[small.evalset.pk])
    large_url = reverse("evalset_detail", args=[large.evalset.pk])
    alice_client.get(small_url)  # the first visit stores the current project in the session
    # session, user, projects, eval set, versions, case count, one page of cases, its history,
    # the user's role (may edit?), the eval sets the bulk form can move cases to
    with django_assert_num_queries(10):
        page = alice_client.get(small_url)
    assert "case_0004" in html(page)
    alice_client.get(large_url)
    with django_assert_num_queries(10):
        page = alice_client.get(large_url, {"tag": "fast", "q": "Question", "page": 2})
    assert "Page 2 of 3" in html(page)


# --- Case detail --------------------------------------------------------------------------------


def case_of(outcome: ImportOutcome, eval_id: str) -> EvalCase:
    return outcome.version.cases.get(eval_id=eval_id)


def test_case_page_shows_the_conversation_turn_by_turn(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("case_detail", args=[case_of(weather, "multi_turn_paris").pk])))
    turns = page.split('class="turn"')[1:]
    assert len(turns) == 3
    assert "What&#x27;s the weather in Paris?" in turns[0]
    assert "get_weather" in turns[0]
    assert "What about tomorrow?" in turns[1] and "get_forecast" in turns[1]
    assert "&quot;days&quot;: 1" in turns[1]
    assert "Should I bring an umbrella?" in turns[2]
    assert "expected final response" in turns[2]
    assert "bring an umbrella." in turns[2]


def test_case_page_shows_tool_calls_responses_and_case_fields(
    weather: ImportOutcome, alice_client: Client
) -> None:
    page = html(alice_client.get(reverse("case_detail", args=[case_of(weather, "basic_weather").pk])))
    # Arguments as indented JSON, escaped like any text.
    assert '{\n  &quot;city&quot;: &quot;Tokyo&quot;,\n  &quot;units&quot;: &quot;metric&quot;\n}' in page
    assert "call_tokyo_1" in page
    result = page.split('class="tool-result"', 1)[1].split("</details>", 1)[0]
    assert "&quot;temp_c&quot;: 22" in result
    assert "Let me look that up." in page  # intermediate response
    assert "22°C and sunny" in page  # final response
    assert "helpfulness" in page and "5=Very helpful" in page  # rubric
    criteria = page.split('class="criteria"', 1)[1].split("</dl>", 1)[0]
    assert "exact_match" in criteria and "&quot;expected_output&quot;: &quot;22°C&quot;" in criteria
    llm_judge = criteria.split("llm_judge", 1)[1]
    assert "evaluator default" in llm_judge
    assert "session_123" in page and "&quot;user_name&quot;: &quot;John&quot;" in page
    assert "&quot;owner&quot;: &quot;qa&quot;" in page
    assert ">weather<" in page and ">basic<" in page


def test_structured_user_content_is_shown_as_pretty_json(weather: ImportOutcome, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("case_detail", args=[case_of(weather, "structured_booking").pk])))
    user = page.split('class="msg msg-user"', 1)[1].split('class="msg msg-tools"', 1)[0]
    assert "part-json" in user
    assert '&quot;destination&quot;: &quot;Lisbon&quot;,\n  &quot;guests&quot;: [\n    &quot;Ana&quot;,' in user


def test_case_page_links_to_the_previous_and_next_case(weather: ImportOutcome, alice_client: Client) -> None:
    first, middle, last = weather.version.cases.order_by("position")
    page = html(alice_client.get(reverse("case_detail", args=[middle.pk])))
    assert f'href="{reverse("case_detail", args=[first.pk])}" rel="prev"' in page
    assert f'href="{reverse("case_detail", args=[last.pk])}" rel="next"' in page
    assert "case 2 of 3" in page
    edge = html(alice_client.get(reverse("case_detail", args=[first.pk])))
    assert 'rel="prev"' not in edge


def test_case_text_that_looks_like_html_stays_text(acme: Project, alice_client: Client) -> None:
    text = "<script>alert(1)</script> then <img src=x onerror=alert(1)>"
    case = case_with_text(acme, text)
    for url in [reverse("case_detail", args=[case.pk]), reverse("evalset_detail", args=[case.version.evalset_id])]:
        page = html(alice_client.get(url))
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, url
        assert "&lt;img src=x onerror=alert(1)&gt;" in page, url
        assert "<script>alert(1)" not in page, url
        assert "<img src=x" not in page, url


def test_a_long_value_is_collapsed_but_kept_whole(acme: Project, alice_client: Client) -> None:
    text = "\n".join(f"line {i} of a long prompt" for i in range(400)) + "\nTHE-LAST-LINE"
    case = case_with_text(acme, text)
    page = html(alice_client.get(reverse("case_detail", args=[case.pk])))
    user = page.split('class="msg msg-user"', 1)[1].split('class="msg msg-tools"', 1)[0]
    assert '<details class="value-long">' in user
    assert "show all" in user and "401 lines" in user
    assert "THE-LAST-LINE" in user  # inside the <details>: collapsed, not cut


def test_a_scenario_case_without_turns_says_so(acme: Project, alice_client: Client) -> None:
    doc = {
        "eval_set_id": "scenario",
        "eval_cases": [
            {
                "eval_id": "sim",
                "conversation_scenario": {"starting_prompt": "Hi", "conversation_plan": "Ask for a refund"},
            }
        ],
    }
    outcome = evalset_import(project=acme, files=[SourceFile("s.evalset.json", json.dumps(doc).encode())])[0]
    page = html(alice_client.get(reverse("case_detail", args=[outcome.version.cases.get().pk])))
    assert "no scripted turns" in page
    assert "Ask for a refund" in page


# --- Downloads ----------------------------------------------------------------------------------


def test_original_download_gives_the_uploaded_bytes(weather: ImportOutcome, alice_client: Client) -> None:
    response = alice_client.get(reverse("version_original", args=[weather.version.pk]))
    assert response.status_code == 200
    assert response.content == (PAGES / "weather.evalset.json").read_bytes()
    assert response["Content-Type"] == EvalSetSource.objects.get(version=weather.version).content_type
    assert response["Content-Disposition"] == 'attachment; filename="weather.evalset.json"'


def test_native_download_parses_and_reimports_as_the_same_version(
    weather: ImportOutcome, acme: Project, alice_client: Client
) -> None:
    response = alice_client.get(reverse("version_native", args=[weather.version.pk]))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="weather_agent_v1.evalset.json"'
    body = b"".join(response.streaming_content)
    doc = json.loads(body)
    assert doc["eval_set_id"] == "weather_agent_v1"
    assert [c["eval_id"] for c in doc["eval_cases"]] == ["basic_weather", "multi_turn_paris", "structured_booking"]

    again = evalset_import(project=acme, files=[SourceFile("weather_agent_v1.evalset.json", body)])[0]
    assert again.created is False
    assert again.version.pk == weather.version.pk
    assert EvalSet.objects.get().versions.count() == 1


def test_native_download_filename_is_safe_for_odd_ids(acme: Project, alice_client: Client) -> None:
    outcome = import_generated(acme, 1, eval_set_id='../we"ird id')
    response = alice_client.get(reverse("version_native", args=[outcome.version.pk]))
    assert response["Content-Disposition"] == 'attachment; filename="we_ird_id.evalset.json"'


def test_list_query_count_does_not_grow_with_evalsets(
    acme: Project, alice_client: Client, django_assert_num_queries: Any
) -> None:
    import_generated(acme, 2, eval_set_id="one")
    # session, user, projects, eval sets with their latest versions
    with django_assert_num_queries(4):
        alice_client.get(reverse("evalset_list"))
    for i in range(6):
        import_generated(acme, 2, eval_set_id=f"more_{i}")
    with django_assert_num_queries(4):
        page = html(alice_client.get(reverse("evalset_list")))
    assert "more_5" in page


def test_case_page_query_count_does_not_grow_with_turns(
    weather: ImportOutcome, alice_client: Client, django_assert_num_queries: Any
) -> None:
    for case in (case_of(weather, "basic_weather"), case_of(weather, "multi_turn_paris")):
        alice_client.get(reverse("case_detail", args=[case.pk]))
        # session, user, case with version and eval set, projects, previous and next case, the
        # user's role (may edit?)
        with django_assert_num_queries(7):
            alice_client.get(reverse("case_detail", args=[case.pk]))
