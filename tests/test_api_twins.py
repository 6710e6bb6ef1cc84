"""Every page's data has its API twin: each named page of the site maps to the API route(s)
that give (or do) the same, or says why it has none. A page added without an entry fails
`test_every_page_is_in_the_table`; a twin that names no API route fails too. The API's own
routes (and Django's admin) are not pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from evaluations.models import Project
from tests.compare_helpers import generated_outputs, generated_version, make_run

NONE = "no data of its own"  # sign-in pages, switches, the receiver: nothing an API client reads

TWINS: dict[str, tuple[str, ...] | str] = {
    # Sign-in and account plumbing.
    "login": NONE, "logout": NONE, "password_change": NONE, "password_change_done": NONE,
    "password_reset": NONE, "password_reset_done": NONE, "password_reset_confirm": NONE,
    "password_reset_complete": NONE, "healthz": NONE,
    "project_switch": "a session preference: API requests name their project",
    "demo_agent": "the built-in demo agent's own endpoint, called by runs",
    "otlp_traces": "the OTLP receiver: itself an API endpoint, not a page",
    "account": ("api_tokens",), "account_token_revoke": ("api_token_revoke",),
    # Issue 34: SSO, the second factor, the sign-in log
    "openid_connect_login": NONE, "openid_connect_callback": NONE, "twofactor_verify": NONE,
    "twofactor_setup": "a second factor is set up by a person at the page, not by a script",
    "twofactor": "a second factor is managed by a person at the page, not by a script",
    "twofactor_disable": "a second factor is managed by a person at the page, not by a script",
    "signin_log": ("api_signins",),
    # Eval sets.
    "home": ("api_evalsets", "api_runs", "api_compare"),
    "evalset_list": ("api_evalsets",), "evalset_upload": ("api_evalsets",),
    "evalset_detail": ("api_evalset", "api_evalset_versions", "api_evalset_cases"),
    "evalset_trend": ("api_evalset_trend",), "evalset_leaderboard": ("api_evalset_leaderboard",),
    "version_original": ("api_evalset_version_original",), "version_native": ("api_evalset_version_native",),
    "version_export": ("api_evalset_version_export",),
    "version_outputs_skeleton": ("api_evalset_version_outputs_skeleton",),
    "case_detail": ("api_case",),
    "evalset_versions": ("api_evalset_versions",), "evalset_diff": ("api_evalset_diff",),
    "case_new": ("api_evalset_edit",), "case_edit": ("api_case", "api_evalset_edit"),
    "case_duplicate": ("api_evalset_edit",), "case_delete": ("api_evalset_edit",),
    "evalset_bulk": ("api_evalset_edit",), "evalset_delete": ("api_evalset",),  # DELETE
    "evalset_rename": ("api_evalset",),  # PATCH
    "result_promote": ("api_run_promote",), "run_promote_selected": ("api_run_promote",),
    "run_promote_form": ("api_run_promote",),
    # Projects.
    "project_members": ("api_project_members", "api_project_member"),
    "project_activity": ("api_project_activity",), "project_new": ("api_projects",),  # POST
    "project_archive": ("api_project_archive",),
    "project_report": ("api_project_report",),
    "project_report_md": ("api_project_report",), "project_report_csv": ("api_project_report",),
    # Help: the docs/ Markdown files, served as pages.
    "help_index": "documentation, not data", "help_page": "documentation, not data",
    "help_image": "documentation, not data",
    # Runs.
    "run_list": ("api_runs",), "run_new": ("api_runs", "api_configs"), "run_detail": ("api_run", "api_run_summary"),
    "run_progress": ("api_run",), "run_cancel": ("api_run_cancel",), "run_retry": ("api_run_retry",),
    "run_pin_baseline": ("api_run_pin",), "run_delete": ("api_run",),  # DELETE
    "results_import": ("api_runs_import",), "run_rescore": ("api_run_rescore",),
    "run_case": ("api_run_result",), "run_case_by_eval_id": ("api_run_results",),
    # Review.
    "compare": ("api_compare",), "compare_csv": ("api_compare",), "run_compare_pick": ("api_compare",),
    "nway_compare": ("api_compare_runs",), "nway_case": ("api_compare_runs",), "nway_csv": ("api_compare_runs",),
    "nway_trajectories": ("api_compare_trajectories",),
    # Issue 43: prompts and experiments.
    "prompt_list": ("api_prompts",), "prompt_detail": ("api_prompt", "api_prompt_versions"),
    "prompt_diff": ("api_prompt_diff",),
    "experiment_list": ("api_experiments",), "experiment_new": ("api_experiments",),  # POST
    "experiment_detail": ("api_experiment",), "experiment_status": ("api_experiment",),
    "review_queue": ("api_review",), "triage_update": ("api_triage",), "triage_comment": ("api_triage_comments",),
    "triage_bulk": ("api_review_bulk",), "review_count": ("api_review",), "review_queue_csv": ("api_review",),
    "grade_save": ("api_grades",), "grading_queue": ("api_grading_queue",), "judge_calibration": ("api_calibration",),
    # Notifications (issue 32).
    "notify_settings": ("api_notify_channels", "api_notify_rules"), "notify_rule_new": ("api_notify_rules",),
    "notify_rule_edit": ("api_notify_rule",), "notify_channel_new": ("api_notify_channels",),
    "notify_channel_edit": ("api_notify_channel",), "notify_channel_log": ("api_notify_channel_log",),
    "notify_channel_test": ("api_notify_channel_test",), "notify_channel_resume": ("api_notify_channel_resume",),
    "notification_list": ("api_notifications",), "notification_count": ("api_notifications",),
    "notification_read": "marking read is a person's act in the page's list, not a script's",
    "notification_personal": ("api_notify_rules",),  # a person's own rules: admins see and change them there
    # Online evaluation (issue 31).
    "monitor_list": ("api_monitors",), "monitor_new": ("api_monitors",),  # POST
    "monitor_detail": ("api_monitor", "api_monitor_stats", "api_monitor_failing"),
    "monitor_edit": ("api_monitor",),  # PATCH
    "monitor_backfill": ("api_monitor_backfill",), "thread_list": ("api_threads",),
    "thread_detail": ("api_threads", "api_traces"),  # the traces API filters by thread
    "project_retention": ("api_project_retention",),
    # Traces.
    "trace_list": ("api_traces",), "trace_detail": ("api_trace",), "trace_promote": ("api_trace_promote",),
}


def _names(patterns: list[Any]) -> set[str]:
    """Every named pattern outside Django's admin."""
    found: set[str] = set()
    for p in patterns:
        if isinstance(p, URLResolver) and p.namespace != "admin":
            found |= _names(p.url_patterns)
        elif isinstance(p, URLPattern) and p.name:
            found.add(p.name)
    return found


ALL = _names(get_resolver().url_patterns)
API = {name for name in ALL if name.startswith("api_")}  # the API's routes are named api_*
PAGES = ALL - API


def test_every_page_is_in_the_table() -> None:
    assert PAGES - set(TWINS) == set(), "give each new page its API twin (or why it has none) in TWINS"
    assert set(TWINS) - PAGES == set(), "TWINS names pages that no longer exist"


@pytest.mark.parametrize("page", sorted(TWINS))
def test_each_twin_is_an_api_route(page: str) -> None:
    twin = TWINS[page]
    if isinstance(twin, str):
        assert twin, page  # a reason, in words
        return
    assert twin and set(twin) <= API, f"{page}: {set(twin) - API} are not API routes"


@pytest.mark.django_db
def test_the_leaderboard_page_and_its_twin_show_the_same_runs(alice_client: Client, acme: Project) -> None:
    version = generated_version(acme, 4)
    runs = [make_run(acme, version, generated_outputs(4, wrong=set(range(1, 1 + i))), labels={"model": f"m{i}"})
            for i in range(3)]
    page = alice_client.get(f"/evalsets/{version.evalset_id}/leaderboard/").content.decode()
    twin = alice_client.get(f"/api/v1/evalsets/{version.evalset_id}/leaderboard/").json()
    assert [e["run"] for e in twin["entries"]] == [r.pk for r in runs]  # best first
    for run in runs:
        assert f'href="/runs/{run.pk}/"' in page
