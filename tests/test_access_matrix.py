"""Who may reach what, over every URL pattern of the site and every API endpoint.

The people (beyond conftest's):
- carol: a viewer of acme; reads everything there, writes nothing.
- alice (conftest): a member of acme; writes, but no admin actions.
- dave: an admin of acme; does everything there.
- bob (conftest): a member of globex; acme's objects do not exist for him (404, never 403).

`ROUTES` lists every named pattern. A pattern added without an entry here fails
`test_every_url_pattern_is_in_the_matrix`, so a new page cannot skip these checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import (
    EvaluationConfig,
    Experiment,
    ExperimentVariant,
    HumanGrade,
    Membership,
    Monitor,
    NotifyChannel,
    NotifyRule,
    Project,
    Run,
    Trace,
    TraceThread,
    Triage,
)
from evaluations.prompts.services import prompt_create
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import REALWORLD
from tests.engine_helpers import import_demo, perfect_outputs
from tests.module_data import module_transaction, per_test

PUBLIC = "public"
READ = "read"  # any member of the project
WRITE = "write"  # member or admin: a viewer gets 403
ADMIN = "admin"  # admin only: a member gets 403
TOKEN = "token"  # the OTLP receiver: an API token of a member or admin (a session is no token)


@dataclass(frozen=True)
class Route:
    name: str
    kind: str
    method: str = "get"
    api: bool = False
    scoped: bool = True  # names one of acme's objects: bob gets 404
    query: str = ""
    data: tuple[tuple[str, str], ...] = ()  # POST fields, formatted like `query`


ROUTES = [
    Route("healthz", PUBLIC, scoped=False),
    Route("login", PUBLIC, scoped=False),
    Route("password_reset", PUBLIC, scoped=False),
    Route("password_reset_done", PUBLIC, scoped=False),
    Route("password_reset_confirm", PUBLIC, scoped=False),
    Route("password_reset_complete", PUBLIC, scoped=False),
    Route("logout", PUBLIC, "post", scoped=False),  # logging out nobody just lands on the login page
    Route("password_change", READ, scoped=False),
    Route("password_change_done", READ, scoped=False),
    Route("account", READ, scoped=False),
    Route("account_token_revoke", READ, "post"),
    Route("home", READ, scoped=False),
    Route("evalset_list", READ, scoped=False),
    Route("evalset_upload", WRITE, scoped=False),
    Route("evalset_detail", READ),
    Route("evalset_trend", READ),
    Route("evalset_rename", WRITE, "post", data=(("name", "Renamed"),)),
    Route("version_original", READ),
    Route("version_native", READ),
    Route("case_detail", READ),
    Route("project_switch", READ, "post"),
    Route("project_members", READ),
    Route("project_activity", READ),
    Route("project_report", READ),
    Route("project_report_md", READ),
    Route("project_report_csv", READ),
    Route("demo_agent", READ, "post", scoped=False),
    Route("compare", READ, query="?baseline={base}&candidate={run}"),
    Route("compare_csv", READ, query="?baseline={base}&candidate={run}"),
    Route("run_case", READ),
    Route("run_list", READ, scoped=False),
    Route("run_new", WRITE, scoped=False),
    # Someone else's runs are "pick two runs" again: a redirect to the list, naming nothing.
    Route("run_compare_pick", READ, scoped=False, query="?run={base}&run={run}"),
    Route("review_queue", READ, scoped=False),
    Route("review_count", READ, scoped=False),
    Route("review_queue_csv", READ, scoped=False),
    Route("triage_update", WRITE, "post",
          data=(("candidate", "{run}"), ("baseline", "{base}"), ("result", "{result}"), ("status", "flaky"))),
    Route("triage_comment", WRITE, "post", data=(("body", "looks flaky to me"),)),
    Route("triage_bulk", WRITE, "post", data=(("status", "flaky"), ("case", "{run}:{base}:{eval_id}"))),
    Route("run_case_by_eval_id", READ, query="?eval_id={eval_id}"),
    Route("grade_save", WRITE, "post",
          data=(("result", "{result}"), ("criterion", "trajectory_match"), ("verdict", "pass"))),
    Route("grading_queue", READ, scoped=False),
    Route("judge_calibration", READ, scoped=False),
    Route("nway_compare", READ, query="?runs={base},{run}"),
    Route("nway_case", READ, query="?runs={base},{run}&case={eval_id}"),
    Route("nway_csv", READ, query="?runs={base},{run}"),
    Route("nway_trajectories", READ, query="?runs={base},{run}&case={eval_id}"),
    # Prompts and experiments (issue 43)
    Route("prompt_list", READ, scoped=False),
    Route("prompt_detail", READ),
    Route("prompt_diff", READ, query="?from=1&to=1"),
    Route("experiment_list", READ, scoped=False),
    Route("experiment_new", WRITE, scoped=False),
    Route("experiment_detail", READ),
    Route("experiment_status", READ),
    Route("api_prompts", READ, api=True, scoped=False),
    Route("api_prompt", READ, api=True),
    Route("api_prompt_versions", WRITE, "post", api=True, data=(("system", "Be briefer."), ("user", "{{{{input}}}}"))),
    Route("api_prompt_version", READ, api=True),
    Route("api_prompt_diff", READ, api=True, query="?from=1&to=1"),
    Route("api_experiments", READ, api=True, scoped=False),
    Route("api_experiment", READ, api=True),
    Route("api_compare_trajectories", READ, api=True, query="?runs={base},{run}&case={eval_id}"),
    Route("evalset_leaderboard", READ),
    Route("run_detail", READ),
    Route("run_progress", READ),
    Route("run_cancel", WRITE, "post"),
    Route("run_retry", WRITE, "post"),
    Route("run_pin_baseline", ADMIN, "post"),
    Route("trace_list", READ, scoped=False),
    Route("trace_detail", READ),
    Route("api_traces", READ, api=True, scoped=False),
    Route("api_trace", READ, api=True),
    Route("version_export", READ),
    Route("api_evalset_version_export", READ, api=True, query="?format=adk"),
    Route("otlp_traces", TOKEN, "post", scoped=False),
    Route("results_import", WRITE, scoped=False),
    Route("run_rescore", WRITE, "post"),
    Route("api_evalsets", READ, api=True, scoped=False),
    Route("api_evalset", READ, api=True),
    Route("api_evalset_versions", READ, api=True),
    Route("api_evalset_cases", READ, api=True),
    Route("api_runs", READ, api=True, scoped=False),
    Route("api_run", READ, api=True),
    Route("api_run_cancel", WRITE, "post", api=True),
    Route("api_run_retry", WRITE, "post", api=True),
    Route("api_run_results", READ, api=True),
    Route("api_run_report", READ, api=True),
    Route("api_run_csv", READ, api=True),
    Route("api_run_upsonic", READ, api=True),
    Route("api_run_metrics", READ, api=True),
    Route("api_run_metric_records", READ, api=True),
    Route("api_configs", READ, api=True, scoped=False),
    Route("api_config_deepeval", READ, api=True),
    Route("api_evalset_version", READ, api=True),
    Route("api_evalset_version_native", READ, api=True),
    Route("api_evalset_version_original", READ, api=True),
    Route("api_evalset_trend", READ, api=True),
    Route("api_case", READ, api=True),
    Route("api_run_summary", READ, api=True),
    Route("api_run_causes", READ, api=True),
    Route("api_run_result", READ, api=True),
    Route("api_run_metric_results", READ, api=True),
    Route("api_run_wide", READ, api=True),
    Route("api_run_pin", ADMIN, "post", api=True),
    Route("api_runs_import", WRITE, "post", api=True, scoped=False),
    Route("api_run_rescore", WRITE, "post", api=True),
    Route("api_triage", READ, api=True, scoped=False),
    Route("api_triage_detail", READ, api=True),
    Route("api_triage_comments", READ, api=True),
    Route("api_triage_history", READ, api=True),
    Route("api_review", READ, api=True, scoped=False),
    Route("api_review_bulk", WRITE, "post", api=True, scoped=False, data=(("status", "flaky"),)),
    Route("api_grades", READ, api=True, scoped=False),
    Route("api_grade", READ, api=True),
    Route("api_grading_queue", READ, api=True, scoped=False),
    Route("api_calibration", READ, api=True, scoped=False),
    Route("api_projects", READ, api=True, scoped=False),
    Route("api_project", READ, api=True),
    Route("api_project_members", READ, api=True),
    Route("api_project_member", READ, api=True),
    Route("api_project_activity", READ, api=True),
    Route("api_project_report", READ, api=True),
    Route("api_tokens", READ, api=True, scoped=False),
    Route("api_token_revoke", READ, "post", api=True),  # your own tokens only: anyone else's is a 404
    Route("api_schema", PUBLIC, scoped=False),
    Route("api_docs", PUBLIC, scoped=False),
    Route("api_compare", READ, api=True, query="?baseline={base}&candidate={run}"),
    Route("api_compare_runs", READ, api=True, query="?runs={base},{run}"),
    # Curation (issue 18)
    Route("evalset_versions", READ),
    Route("evalset_diff", READ, query="?from=1&to=1"),
    Route("case_new", WRITE),
    Route("case_edit", WRITE),
    Route("case_duplicate", WRITE, "post", data=(("base_version", "1"),)),
    Route("case_delete", WRITE, "post", data=(("base_version", "1"),)),
    Route("evalset_bulk", WRITE, "post", data=(("base_version", "1"), ("action", "tag"), ("tag", "x"),
                                               ("eval_ids", "{eval_id}"))),
    Route("result_promote", WRITE),
    Route("run_promote_selected", WRITE, "post", data=(("eval_ids", "{eval_id}"),)),
    Route("run_promote_form", READ, query="?baseline={base}"),  # members get the form, viewers an empty slot
    Route("api_evalset_edit", WRITE, "post", api=True),
    Route("api_evalset_diff", READ, api=True, query="?from=1&to=1"),
    Route("api_run_promote", WRITE, "post", api=True, data=(("eval_ids", "{eval_id}"),)),
    Route("trace_promote", WRITE, query="?evalset={evalset}"),
    # Help (issue 28): the docs, for signed-in users of any project
    Route("help_index", READ, scoped=False),
    Route("help_page", READ, scoped=False),
    Route("help_image", READ, scoped=False),
    Route("api_trace_promote", WRITE, "post", api=True, data=(("evalset", "{evalset}"),)),
    # Issue 28
    Route("api_evalset_leaderboard", READ, api=True),
    Route("version_outputs_skeleton", READ),
    Route("api_evalset_version_outputs_skeleton", READ, api=True),
    Route("project_new", ADMIN, scoped=False),  # superusers (or everyone, by a setting): not carol
    Route("project_archive", ADMIN),
    Route("evalset_delete", ADMIN),
    Route("run_delete", ADMIN),
    Route("api_project_archive", ADMIN, "post", api=True),
    # Notifications (issue 32): everyone in the project reads the settings and the log; admins change them
    Route("notify_settings", READ),
    Route("notify_rule_new", ADMIN),
    Route("notify_rule_edit", ADMIN),
    Route("notify_channel_new", ADMIN),
    Route("notify_channel_edit", ADMIN),
    Route("notify_channel_log", READ),
    Route("notify_channel_test", ADMIN, "post"),
    Route("notify_channel_resume", ADMIN, "post"),
    Route("notification_list", READ, scoped=False),
    Route("notification_count", READ, scoped=False),
    Route("notification_read", READ, "post", scoped=False),  # your own notifications only
    Route("notification_personal", READ, "post", data=(("action", "on"),)),  # your own rules, in your projects
    Route("api_notify_channels", READ, api=True),
    Route("api_notify_channel", READ, api=True),
    Route("api_notify_channel_log", READ, api=True),
    Route("api_notify_channel_test", ADMIN, "post", api=True),
    Route("api_notify_channel_resume", ADMIN, "post", api=True),
    Route("api_notify_rules", READ, api=True),
    Route("api_notify_rule", READ, api=True),
    Route("api_notifications", READ, api=True, scoped=False),
    # Issue 34: SSO (public: the start and the return of a sign-in), the second factor, the sign-in log
    Route("openid_connect_login", PUBLIC, scoped=False),  # GET: a button that posts to itself
    Route("openid_connect_callback", PUBLIC, scoped=False),  # no state: a 401 page, tested in test_sso.py
    Route("twofactor_verify", PUBLIC, scoped=False),  # with no password passed: back to the login page
    Route("twofactor_setup", READ, scoped=False),
    Route("twofactor", READ, scoped=False),
    Route("twofactor_disable", READ, "post", scoped=False),  # with no second factor: back to its page
    Route("signin_log", ADMIN, scoped=False),  # superusers only: not dave
    Route("api_signins", ADMIN, api=True, scoped=False),
    # Online evaluation (issue 31)
    Route("monitor_list", READ, scoped=False),
    Route("monitor_new", WRITE, scoped=False),
    Route("monitor_detail", READ),
    Route("monitor_edit", WRITE),
    Route("monitor_backfill", WRITE, "post", data=(("hours", "24"),)),
    Route("thread_list", READ, scoped=False),
    Route("thread_detail", READ, query="?id=t-1"),
    Route("project_retention", READ),  # admins change it (tests/test_monitor_pages.py)
    Route("api_monitors", READ, api=True, scoped=False),
    Route("api_monitor", READ, api=True),
    Route("api_monitor_stats", READ, api=True),
    Route("api_monitor_failing", READ, api=True),
    Route("api_monitor_backfill", WRITE, "post", api=True, data=(("since", "2026-01-01T00:00:00Z"),)),
    Route("api_threads", READ, api=True, scoped=False),
    Route("api_project_retention", READ, api=True),  # admins set it (tests/test_monitor_pages.py)
]
BY_NAME = {r.name: r for r in ROUTES}
# The members page's writes and the upload/run APIs take the project in the body, not the URL.
MEMBERS_ADD = {"action": "add", "user": "erin", "role": "viewer"}


def _named_patterns(patterns: list[Any], namespace: str = "") -> set[str]:
    names: set[str] = set()
    for p in patterns:
        if isinstance(p, URLResolver):
            if p.namespace == "admin":
                continue  # Django's admin: staff only, tested below as a whole
            names |= _named_patterns(p.url_patterns, namespace)
        elif isinstance(p, URLPattern) and p.name:
            names.add(p.name)
    return names


def make_user(username: str, project: Project | None = None, role: str = "") -> Any:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", f"{username}-pass-123")
    if project is not None:
        Membership.objects.create(project=project, user=user, role=role)
    return user


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finished_run(project: Project, version: Any) -> Run:
    run = runs.run_create(project=project, version=version, target_kind="uploaded", enqueue=False,
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    return runs.run_execute_here(run.pk)


def sso_settings() -> dict[str, Any]:
    """An OpenID provider configured (never contacted by these requests), so the SSO routes exist."""
    from evalsite.settings import oidc_providers

    return {"EVALSITE_OIDC_ISSUER": "http://127.0.0.1:9/o",
            "SOCIALACCOUNT_PROVIDERS": oidc_providers("http://127.0.0.1:9/o", "id", "secret", ["openid"], "SSO")}


@pytest.fixture(autouse=True)
def sso_configured(settings: Any) -> None:
    for name, value in sso_settings().items():
        setattr(settings, name, value)


@pytest.fixture(scope="module")
def shared_world(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """The world, made once for the module in a transaction rolled back after its last test
    (tests/module_data.py); each test's writes are rolled back after it as before. It took
    0.1-0.15 s per test, for some 600 tests."""
    with module_transaction(django_db_blocker):
        # the fast hasher for the five users (as conftest sets it for the whole test process)
        with django_db_blocker.unblock(), override_settings(
                PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"], **sso_settings()):
            acme = Project.objects.create(slug="acme", name="Acme")
            alice = make_user("alice", acme, Membership.Role.MEMBER)
            bob = make_user("bob", Project.objects.create(slug="globex", name="Globex"), Membership.Role.MEMBER)
            shared = make_world(acme, alice, bob)
        yield shared


@pytest.fixture
def world(shared_world: dict[str, Any], db: None) -> dict[str, Any]:
    """This test's copy of the world's objects (the rows are the module's)."""
    return per_test(shared_world)


@pytest.fixture
def fresh_world(fast_hashing: None, acme: Project, alice: Any, bob: Any) -> dict[str, Any]:
    """The world made for one test, on conftest's acme, alice and bob: for a transactional
    test (tests/test_sso.py), which cannot run inside the module's transaction."""
    return make_world(acme, alice, bob)


@pytest.fixture
def fast_hashing(settings: Any) -> None:
    # The world creates five users; the default hasher would spend seconds on them.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def make_world(acme: Project, alice: Any, bob: Any) -> dict[str, Any]:
    """acme's objects (a baseline run and a candidate run), and one user per role."""
    version = import_demo(acme)
    base = finished_run(acme, version)
    run = finished_run(acme, version)
    assert run.status == Run.Status.COMPLETED
    carol = make_user("carol", acme, Membership.Role.VIEWER)
    dave = make_user("dave", acme, Membership.Role.ADMIN)
    make_user("erin")
    from evaluations.accounts.tokens import token_create

    token = token_create(user=alice, name="ci").token
    result = run.results.select_related("case").first()
    assert result is not None
    triage = Triage.objects.create(project=acme, evalset=version.evalset, eval_id=result.case.eval_id,
                                   baseline=base, candidate=run)
    grade = HumanGrade.objects.create(project=acme, run=run, result=result, criterion="trajectory_match",
                                      grader=dave, passed=True)
    trace = Trace.objects.create(project=acme, trace_id="ab" * 16, received=True, name="agent", span_count=0)
    channel = NotifyChannel.objects.create(project=acme, name="inbox", kind="inapp")
    rule = NotifyRule.objects.create(project=acme, name="regressions", kind="run_finished", condition="regressions")
    monitor = Monitor.objects.create(project=acme, name="answers", criteria={"json": {"evaluator": "json_valid"}})
    TraceThread.objects.create(project=acme, thread_id="t-1", first_at=timezone.now(), last_at=timezone.now())
    prompt = prompt_create(project=acme, name="support", system="Be brief.", actor=alice).prompt
    config = EvaluationConfig.objects.create(project=acme, name="judged", created_by=alice, config={
        "criteria": {"deepeval_answer_relevancy": {"threshold": 0.7}}})
    experiment = Experiment.objects.create(project=acme, evalset=version.evalset, evalset_version=version,
                                           name="models", created_by=alice)
    ExperimentVariant.objects.create(experiment=experiment, position=0, label="base", model="m", run=base)
    ExperimentVariant.objects.create(experiment=experiment, position=1, label="candidate", model="m", run=run)
    # an eval set uploaded as ADK files, so it downloads in ADK's own format too
    adk_files = ["google-adk/hello_world_agent/roll_die.test.json", "google-adk/hello_world_agent/test_config.json"]
    adk = evalset_import(project=acme, files=[SourceFile(p, (REALWORLD / p).read_bytes()) for p in adk_files])[0].version
    return {"base": base, "triage": triage, "grade": grade, "trace": trace, "adk": adk, "channel": channel,
            "rule": rule, "monitor": monitor, "prompt": prompt, "experiment": experiment, "config": config,
        "acme": acme, "version": version, "evalset": version.evalset, "case": version.cases.first(),
        "run": run, "result": result, "token": token,
        "alice": alice, "bob": bob, "carol": carol, "dave": dave,
    }


def url_of(route: Route, w: dict[str, Any]) -> str:
    kwargs: dict[str, Any] = {}
    pattern_kwargs = {
        "evalset_detail": {"pk": w["evalset"].pk}, "evalset_trend": {"pk": w["evalset"].pk},
        "evalset_leaderboard": {"pk": w["evalset"].pk}, "api_evalset_leaderboard": {"pk": w["evalset"].pk},
        "version_original": {"pk": w["version"].pk},
        "version_outputs_skeleton": {"pk": w["version"].pk},
        "api_evalset_version_outputs_skeleton": {"pk": w["evalset"].pk, "number": w["version"].number}, "version_native": {"pk": w["version"].pk},
        "evalset_rename": {"pk": w["evalset"].pk},
        "case_detail": {"pk": w["case"].pk},
        "evalset_versions": {"pk": w["evalset"].pk}, "evalset_diff": {"pk": w["evalset"].pk},
        "case_new": {"pk": w["evalset"].pk}, "evalset_bulk": {"pk": w["evalset"].pk},
        "case_edit": {"pk": w["case"].pk}, "case_duplicate": {"pk": w["case"].pk},
        "case_delete": {"pk": w["case"].pk}, "result_promote": {"run_pk": w["run"].pk, "result_pk": w["result"].pk},
        "run_promote_selected": {"run_pk": w["run"].pk}, "run_promote_form": {"run_pk": w["run"].pk},
        "api_evalset_edit": {"pk": w["evalset"].pk}, "api_evalset_diff": {"pk": w["evalset"].pk},
        "project_members": {"slug": "acme"}, "project_activity": {"slug": "acme"},
        "project_archive": {"slug": "acme"}, "api_project_archive": {"slug": "acme"},
        "evalset_delete": {"pk": w["evalset"].pk},
        "project_report": {"slug": "acme"}, "project_report_md": {"slug": "acme"},
        "project_report_csv": {"slug": "acme"}, "api_triage_history": {"pk": w["triage"].pk},
        "account_token_revoke": {"pk": w["token"].pk},
        "prompt_detail": {"pk": w["prompt"].pk}, "prompt_diff": {"pk": w["prompt"].pk},
        "api_prompt": {"pk": w["prompt"].pk}, "api_prompt_versions": {"pk": w["prompt"].pk},
        "api_prompt_version": {"pk": w["prompt"].pk, "number": 1}, "api_prompt_diff": {"pk": w["prompt"].pk},
        "experiment_detail": {"pk": w["experiment"].pk}, "experiment_status": {"pk": w["experiment"].pk},
        "api_experiment": {"pk": w["experiment"].pk}, "api_config_deepeval": {"pk": w["config"].pk},
        "triage_comment": {"pk": w["triage"].pk},
        "run_case": {"run_pk": w["run"].pk, "result_pk": w["result"].pk},
        "run_case_by_eval_id": {"run_pk": w["run"].pk},
        "password_reset_confirm": {"uidb64": "MQ", "token": "set-password"},
        "api_evalset": {"pk": w["evalset"].pk}, "api_evalset_versions": {"pk": w["evalset"].pk},
        "api_evalset_cases": {"pk": w["evalset"].pk, "number": w["version"].number},
        "api_evalset_version": {"pk": w["evalset"].pk, "number": w["version"].number},
        "api_evalset_version_native": {"pk": w["evalset"].pk, "number": w["version"].number},
        "api_evalset_version_original": {"pk": w["evalset"].pk, "number": w["version"].number},
        "api_evalset_trend": {"pk": w["evalset"].pk}, "api_case": {"pk": w["case"].pk},
        "api_run_result": {"pk": w["run"].pk, "result_pk": w["result"].pk},
        "api_grade": {"pk": w["grade"].pk},
        "api_triage_detail": {"pk": w["triage"].pk}, "api_triage_comments": {"pk": w["triage"].pk},
        "api_project": {"slug": "acme"}, "api_project_members": {"slug": "acme"},
        "api_project_activity": {"slug": "acme"}, "api_token_revoke": {"pk": w["token"].pk},
        "api_project_report": {"slug": "acme"}, "notification_personal": {"slug": "acme"},
        "api_project_member": {"slug": "acme", "pk": Membership.objects.get(user=w["alice"]).pk},
        "trace_detail": {"pk": w["trace"].pk}, "api_trace": {"pk": w["trace"].pk},
        "version_export": {"pk": w["adk"].pk, "fmt": "adk"},
        "api_evalset_version_export": {"pk": w["adk"].evalset_id, "number": w["adk"].number},
        "trace_promote": {"pk": w["trace"].pk}, "api_trace_promote": {"pk": w["trace"].pk},
        "help_page": {"slug": "traces"}, "help_image": {"name": "home.png"},
        **{name: {"slug": "acme"} for name in ("notify_settings", "notify_rule_new", "notify_channel_new",
                                               "api_notify_channels", "api_notify_rules")},
        **{name: {"slug": "acme", "pk": w["channel"].pk} for name in (
            "notify_channel_edit", "notify_channel_log", "notify_channel_test", "notify_channel_resume",
            "api_notify_channel", "api_notify_channel_log", "api_notify_channel_test", "api_notify_channel_resume")},
        "notify_rule_edit": {"slug": "acme", "pk": w["rule"].pk}, "api_notify_rule": {"slug": "acme", "pk": w["rule"].pk},
        "openid_connect_login": {"provider_id": "sso"}, "openid_connect_callback": {"provider_id": "sso"},
        "monitor_detail": {"pk": w["monitor"].pk}, "monitor_edit": {"pk": w["monitor"].pk},
        "monitor_backfill": {"pk": w["monitor"].pk}, "project_retention": {"slug": "acme"},
        "api_project_retention": {"slug": "acme"},
        "api_monitor": {"pk": w["monitor"].pk}, "api_monitor_stats": {"pk": w["monitor"].pk},
        "api_monitor_failing": {"pk": w["monitor"].pk}, "api_monitor_backfill": {"pk": w["monitor"].pk},
    }
    if route.name in pattern_kwargs:
        kwargs = pattern_kwargs[route.name]
    elif (route.name.startswith(("run_", "api_run_")) or route.name == "api_run") \
            and route.name not in {"run_list", "run_new", "run_compare_pick"}:
        kwargs = {"pk": w["run"].pk}
    return reverse(route.name, kwargs=kwargs) + route.query.format(**ids(w))


def ids(w: dict[str, Any]) -> dict[str, Any]:
    return {"run": w["run"].pk, "base": w["base"].pk, "result": w["result"].pk, "eval_id": w["result"].case.eval_id,
            "evalset": w["evalset"].pk}


def call(client: Client, route: Route, w: dict[str, Any]) -> Any:
    url = url_of(route, w)
    if route.method == "post":
        return client.post(url, {k: v.format(**ids(w)) for k, v in route.data})
    return client.get(url)


def test_every_url_pattern_is_in_the_matrix() -> None:
    names = _named_patterns(get_resolver().url_patterns)
    assert names - set(BY_NAME) == set(), "add the new patterns to ROUTES"
    assert set(BY_NAME) - names == set(), "ROUTES names patterns that no longer exist"


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_anonymous_visitors_get_the_login_page_or_a_401_except_on_public_pages(route: Route,
                                                                                world: dict[str, Any]) -> None:
    response = call(Client(), route, world)
    if route.name == "openid_connect_callback":  # no sign-in was started here: refused (tests/test_sso.py)
        assert response.status_code == 401
    elif route.kind == PUBLIC:
        assert response.status_code in {200, 302}
        if response.status_code == 302:  # a reset link redirects to its own form; logout and 2FA to log in
            assert route.name in {"password_reset_confirm", "logout", "twofactor_verify"}
    elif route.api or route.name in {"demo_agent", "otlp_traces"}:
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Token")
        if route.api:
            assert response.json()["code"] == "not_authenticated"
    else:
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")


def test_the_otlp_receiver_takes_a_members_token_only(world: dict[str, Any]) -> None:
    from evaluations.accounts.tokens import token_create

    route = BY_NAME["otlp_traces"]
    for user, status in (("carol", 403), ("bob", 200), ("alice", 200), ("dave", 200)):  # (no CSRF: a token)
        secret = token_create(user=world[user], name="otel").secret
        response = Client().generic("POST", url_of(route, world), b"", content_type="application/x-protobuf",
                                    HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert response.status_code == status, user  # bob: an empty export to his own project
    assert call(client_for(world["alice"]), route, world).status_code == 401  # a session is not a token


def test_the_admin_site_sends_anonymous_visitors_to_its_login(world: dict[str, Any]) -> None:
    response = Client().get("/admin/")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize("route", [r for r in ROUTES if r.kind != PUBLIC and r.scoped], ids=lambda r: r.name)
def test_a_user_of_another_project_gets_404_for_acmes_objects(route: Route, world: dict[str, Any]) -> None:
    response = call(client_for(world["bob"]), route, world)
    assert response.status_code == 404


@pytest.mark.parametrize("route", [r for r in ROUTES if r.kind != PUBLIC and r.scoped and r.api],
                         ids=lambda r: r.name)
def test_another_projects_token_gets_404_from_the_api_too(route: Route, world: dict[str, Any]) -> None:
    from evaluations.accounts.tokens import token_create

    secret = token_create(user=world["bob"], name="bob's ci").secret
    client = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    response = call(client, route, world)
    assert response.status_code == 404


@pytest.mark.parametrize("route", [r for r in ROUTES if r.kind in {WRITE, ADMIN}], ids=lambda r: r.name)
def test_a_viewer_cannot_write(route: Route, world: dict[str, Any]) -> None:
    client = client_for(world["carol"])
    client.post(reverse("project_switch"), {"project": world["acme"].pk})
    response = call(client, route, world)
    assert response.status_code == 403


@pytest.mark.parametrize("route", [r for r in ROUTES if r.kind == READ and r.name not in {
    "project_switch", "account_token_revoke", "demo_agent", "api_token_revoke", "notification_read",
    "notification_personal",
    "twofactor_disable"}],
    ids=lambda r: r.name)
def test_a_viewer_reads_every_page_of_the_project(route: Route, world: dict[str, Any]) -> None:
    response = call(client_for(world["carol"]), route, world)
    if route.name == "run_compare_pick":
        assert response.status_code == 302 and response["Location"].startswith(reverse("compare"))
    elif route.name == "run_case_by_eval_id":  # to the case's drill-down
        assert response.status_code == 302 and response["Location"].startswith(f"/runs/{world['run'].pk}/cases/")
    else:
        assert response.status_code == 200


def test_a_viewer_cannot_upload_start_or_change_runs_through_the_api(world: dict[str, Any]) -> None:
    client = client_for(world["carol"])
    upload = client.post(reverse("api_evalsets"), {"project": "acme", "file": open(  # noqa: SIM115
        "evaluations/demo/travel_agent.evalset.json", "rb")})
    assert upload.status_code == 403
    start = client.post(reverse("api_runs"), {"evalset": world["evalset"].pk, "target_kind": "uploaded",
                                              "outputs": perfect_outputs()}, content_type="application/json")
    assert start.status_code == 403
    config = client.post(reverse("api_configs"), {"project": "acme", "name": "x", "config": {"criteria": {}}},
                         content_type="application/json")
    assert config.status_code == 403
    assert Run.objects.count() == 2


def test_a_member_cannot_do_admin_actions(world: dict[str, Any]) -> None:
    client = client_for(world["alice"])
    assert call(client, BY_NAME["run_pin_baseline"], world).status_code == 403
    members = reverse("project_members", args=["acme"])
    assert client.post(members, MEMBERS_ADD).status_code == 403
    carol = Membership.objects.get(user=world["carol"])
    assert client.post(members, {"action": "change", "membership": carol.pk, "role": "admin"}).status_code == 403
    assert client.post(members, {"action": "remove", "membership": carol.pk}).status_code == 403
    assert Membership.objects.get(pk=carol.pk).role == Membership.Role.VIEWER
    world["evalset"].refresh_from_db()
    assert world["evalset"].baseline_run_id is None


@pytest.mark.parametrize("path", ["runs/{run}/", "evalsets/{evalset}/"])
def test_only_a_projects_admins_delete_through_the_api(path: str, world: dict[str, Any]) -> None:
    from evaluations.accounts.tokens import token_create

    url = "/api/v1/" + path.format(**ids(world))
    assert Client().delete(url).status_code == 401
    for user, status in (("bob", 404), ("carol", 403), ("alice", 403)):
        client = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=world[user], name='x').secret}")
        assert client.delete(url).status_code == status, user
    session = Client(enforce_csrf_checks=True)
    session.force_login(world["dave"])
    assert session.delete(url).status_code == 403  # a session needs its CSRF token
    dave = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=world['dave'], name='x').secret}")
    assert dave.delete(url).status_code == 200 and dave.get(url).status_code == 404


def test_an_admin_does_the_admin_actions(world: dict[str, Any]) -> None:
    client = client_for(world["dave"])
    assert call(client, BY_NAME["run_pin_baseline"], world).status_code == 302
    assert client.post(reverse("project_members", args=["acme"]), MEMBERS_ADD).status_code == 302
    world["evalset"].refresh_from_db()
    assert world["evalset"].baseline_run_id == world["run"].pk
    assert Membership.objects.filter(project=world["acme"], user__username="erin", role="viewer").exists()


@pytest.mark.parametrize("route", [r for r in ROUTES if r.method == "post" and not r.api
                                   and r.name not in {"demo_agent", "otlp_traces"}], ids=lambda r: r.name)
def test_every_form_needs_the_csrf_token(route: Route, world: dict[str, Any]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["dave"])
    response = call(client, route, world)
    assert response.status_code == 403
    assert b"CSRF" in response.content
