"""python manage.py eval EVALSET (--outputs FILE | --target URL_OR_CALLABLE) [options]

Evaluates an agent on an eval set and prints a summary table, in one of two modes:

- local (default): in this process, on this command's own database. EVALSET is an eval-set
  file (imported first; the same content is the same version) or the id of an eval set
  already in the project.
- remote (`--server URL --token T`, the token also from EVALSITE_TOKEN): on a team server,
  over its REST API through `evaluations.client` (standard library only). EVALSET is a file
  (uploaded) or an eval set's id there; the server's queue runs the evaluation while this
  command shows the progress on stderr.

Both modes can write JUnit XML (`--junit`), the AgentFlow EvalReport (`--output-file`), and
compare the run with a baseline (`--baseline RUN_ID|pinned`) through the same comparison the
compare page shows; `--fail-on-regression` gates on it.

Exit codes: 0 all good; 1 a case failed its thresholds (or errored, or had no output), the
run did not complete, or (with --fail-on-regression) the candidate regressed; 2 usage,
input or server error (unreachable server, bad token, an answer in the API's error shape).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import Prefetch
from django.http import Http404
from django.urls import reverse
from pydantic import ValidationError

from evaluations import exports, runs
from evaluations.api.compare import CompareError, comparison_payload, resolve_baseline
from evaluations.api.serializers import CaseResultSerializer, RunSerializer
from evaluations.audit import record_run
from evaluations.client import (
    FAILED_STATUSES,
    CaseFailure,
    Client,
    ClientError,
    Comparison,
    EvalSet,
    junit_xml,
)
from evaluations.client import Run as RemoteRun
from evaluations.formats import EvalSetImportError, files_from_paths
from evaluations.models import AuditEvent, CaseResult, Project, Run, Score
from evaluations.models import EvalSet as EvalSetModel
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.services import DEFAULT_PROJECT_SLUG, evalset_import

DEMO_TARGET = "evaluations.demo.agent:respond"
TOKEN_ENV = "EVALSITE_TOKEN"
FAILURES_SHOWN = 10
REGRESSIONS_SHOWN = 20
LOCAL_LINK_NOTE = "paths on the site that serves this database (e.g. `python manage.py up`)"


class UsageError(Exception):
    pass


@dataclass
class Outcome:
    """A finished run, whichever mode ran it, in the API's shapes."""

    run: dict[str, Any]  # RunSerializer's shape
    suite: str  # the eval set's id: JUnit class names are `suite/eval_id`
    run_url: str
    results: Callable[[], Iterable[Mapping[str, Any]]]  # every result, scores included
    failures: list[CaseFailure]  # the first few that did not pass
    comparison: dict[str, Any] | None = None  # the comparison API's body
    notes: list[str] = field(default_factory=list)
    link_note: str = ""


class Command(BaseCommand):
    help = ("Evaluate an agent on an eval set (uploaded outputs or a live target) here or on a team server "
            "(--server), print a summary, and gate CI on thresholds and regressions.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("evalset", metavar="EVALSET", help="eval-set file, zip or folder, or an eval set id")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--outputs", metavar="FILE", help="agent outputs (JSON or JSONL, or ADK result files)")
        source.add_argument("--target", metavar="URL_OR_CALLABLE",
                            help="an HTTP endpoint, a Python `module:function`, or `demo`")
        parser.add_argument("--config", metavar="FILE", help="evaluation config (AgentFlow EvalConfig or ADK "
                            "test_config.json); default: the eval set's own, else evalsite's")
        parser.add_argument("--project", default=None,
                            help=f"project slug (local default: {DEFAULT_PROJECT_SLUG}; remote default: "
                                 "your only project)")
        parser.add_argument("--workers", type=int, default=1,
                            help="parallel workers (default: 1); remote: the HTTP target's concurrency")
        parser.add_argument("--iterations", type=int, default=1)
        parser.add_argument("--warmups", type=int, default=0)
        parser.add_argument("--eval-ids", help="comma-separated eval ids to run (default: all)")
        parser.add_argument("--input-overrides", metavar="JSON",
                            help='per eval id, merged into the inputs: {"eval-1": {"city": "Oslo"}}')
        parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                            help="HTTP header for the target (repeatable)")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per agent call")
        parser.add_argument("--output-file", metavar="FILE", help="write the AgentFlow EvalReport JSON here")
        parser.add_argument("--junit", metavar="FILE",
                            help="write JUnit XML: a test case per eval case and criterion")
        parser.add_argument("--baseline", metavar="RUN_ID|pinned",
                            help="compare the run with this run of the same eval set, or with its pinned run")
        parser.add_argument("--fail-on-regression", action="store_true",
                            help="exit 1 when the run regressed against the baseline (default baseline: pinned)")
        parser.add_argument("--significance", type=float, metavar="ALPHA",
                            help="with --fail-on-regression: fail only on a criterion whose pass->fail flips are "
                                 "significant at ALPHA (exact McNemar test)")
        parser.add_argument("--regressions-only", action="store_true",
                            help="with --fail-on-regression: cases below their thresholds alone do not fail "
                                 "(cases failing in the baseline too are known failures)")
        parser.add_argument("--model", default="")
        parser.add_argument("--branch", default="")
        parser.add_argument("--commit", default="")
        parser.add_argument("--tag", action="append", default=[])
        parser.add_argument("--name", default="")
        remote = parser.add_argument_group("remote mode")
        remote.add_argument("--server", metavar="URL", help="run on this evalsite server over its API")
        remote.add_argument("--token", help=f"API token (default: ${TOKEN_ENV})")
        remote.add_argument("--poll", type=float, default=1.0, help="seconds between progress checks (default: 1)")
        remote.add_argument("--wait-timeout", type=float, default=3600.0,
                            help="give up waiting after this many seconds (default: 3600; exit 2)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._check(options)
            outcome = self._remote(options) if options["server"] else self._local(options)
            self._print_summary(outcome, options)
            if options["junit"]:
                self._write_junit(outcome, options["junit"])
        except (UsageError, EvalSetImportError, runs.RunError) as exc:
            self.stderr.write(f"error: {exc}")
            sys.exit(2)
        except ClientError as exc:
            hint = ""
            if exc.status == 401:
                hint = f"\n  (check --token or ${TOKEN_ENV}: create a token on your account page)"
            self.stderr.write(f"error: {exc}{hint}")
            sys.exit(2)
        sys.exit(self._exit_code(outcome, options))

    # --- Options --------------------------------------------------------------------------

    def _check(self, options: dict[str, Any]) -> None:
        if options["token"] and not options["server"]:
            raise UsageError("--token is for remote mode: give --server URL too")
        alpha = options["significance"]
        if alpha is not None and not 0 < alpha <= 0.5:
            raise UsageError(f"--significance {alpha:g}: give a level between 0 and 0.5, like 0.05")
        if options["regressions_only"] and not options["fail_on_regression"]:
            raise UsageError("--regressions-only goes with --fail-on-regression")
        baseline = options["baseline"]
        if baseline is not None and baseline != "pinned" and not baseline.isdigit():
            raise UsageError(f"--baseline {baseline!r}: give a run id or `pinned`")
        if options["fail_on_regression"] and baseline is None:
            options["baseline"] = "pinned"
        if options["workers"] < 1:
            raise UsageError("--workers must be at least 1")
        # Checked before anything is uploaded or created.
        options["target_spec"] = _target(options) if options["target"] else None

    def _labels(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"model": options["model"], "branch": options["branch"], "git_commit": options["commit"],
                "tags": options["tag"]}

    def _eval_ids(self, options: dict[str, Any]) -> list[str] | None:
        if not options["eval_ids"]:
            return None
        return [e.strip() for e in options["eval_ids"].split(",") if e.strip()] or None

    def _overrides(self, options: dict[str, Any]) -> dict[str, Any]:
        if not options["input_overrides"]:
            return {}
        overrides = _json_option(options["input_overrides"], "--input-overrides")
        if not isinstance(overrides, dict):
            raise UsageError('--input-overrides: give an object of eval id -> inputs, '
                             'like {"eval-1": {"city": "Oslo"}}')
        return overrides

    def _progress(self, settled: int, total: int, failed: int, errored: int) -> None:
        self.stderr.write(f"  {settled}/{total} done, {failed} failed, {errored} errored")

    # --- Local mode -----------------------------------------------------------------------

    def _local(self, options: dict[str, Any]) -> Outcome:
        slug = options["project"] or DEFAULT_PROJECT_SLUG
        project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
        version = self._version(project, options["evalset"])
        baseline_ref = options["baseline"]
        if baseline_ref and baseline_ref != "pinned":
            # Checked before any work: a wrong baseline is a usage error, not a wasted run.
            found = Run.objects.filter(project=project, pk=int(baseline_ref)).select_related(
                "evalset_version__evalset").first()
            if found is None:
                raise UsageError(f"--baseline {baseline_ref}: no run {baseline_ref} in project {project.slug!r}")
            if found.evalset_version.evalset_id != version.evalset_id:
                raise UsageError(f"--baseline {baseline_ref}: run {baseline_ref} is of eval set "
                                 f"{found.evalset_version.evalset.eval_set_id!r}, not "
                                 f"{version.evalset.eval_set_id!r}")
        config = _read_config(options["config"]) if options["config"] else None
        common = {"project": project, "version": version, "config": config, "eval_ids": self._eval_ids(options),
                  "input_overrides": self._overrides(options), "labels": self._labels(options),
                  "name": options["name"], "enqueue": False, "iterations": options["iterations"],
                  "warmups": options["warmups"]}
        if options["outputs"]:
            from evaluations.targets.uploaded import read_outputs

            outputs = read_outputs(files_from_paths([options["outputs"]]))
            run = runs.run_create(target_kind=Run.TargetKind.UPLOADED, outputs=outputs, **common)
        else:
            kind, target = options["target_spec"]
            run = runs.run_create(target_kind=kind, target=target, **common)
        record_run(run=run, actor=None, verb=AuditEvent.Verb.RUN_STARTED, via="manage.py eval")
        self.stdout.write(f"run {run.pk}: {run.cases_total} results to evaluate "
                          f"({version.evalset.eval_set_id} v{version.number})")

        def progress(current: Run) -> None:
            self._progress(current.cases_settled, current.cases_total, current.cases_failed, current.cases_errored)

        run = runs.run_execute_here(run.pk, workers=options["workers"], progress=progress)
        run = Run.objects.select_related("project", "evalset_version__evalset__baseline_run", "created_by").get(
            pk=run.pk)
        run_url = reverse("run_detail", args=[run.pk])
        outcome = Outcome(run=dict(RunSerializer(run).data), suite=version.evalset.eval_set_id, run_url=run_url,
                          results=lambda: _local_results(run), failures=_local_failures(run, run_url),
                          link_note=LOCAL_LINK_NOTE)
        if baseline_ref:
            visible = Run.objects.filter(project=project).select_related("project",
                                                                         "evalset_version__evalset__baseline_run")
            try:
                baseline = resolve_baseline(run, baseline_ref, visible)
            except CompareError as exc:
                if exc.code != "no_baseline":
                    raise UsageError(f"--baseline {baseline_ref}: {exc}") from None
                outcome.notes.append(f"{exc}: nothing to compare with yet (pin a run on its page)")
            except Http404:
                raise UsageError(f"--baseline {baseline_ref}: no such run in project {project.slug!r}") from None
            else:
                outcome.comparison = comparison_payload(baseline=baseline, candidate=run,
                                                        alpha=options["significance"], limit=REGRESSIONS_SHOWN)
        if options["output_file"]:
            with open(options["output_file"], "w", encoding="utf-8") as fh:
                for chunk in exports.run_report_chunks(run):
                    fh.write(chunk)
            self.stdout.write(f"report written to {options['output_file']}")
        return outcome

    def _version(self, project: Project, ref: str) -> Any:
        if Path(ref).exists():
            outcomes = evalset_import(project=project, files=files_from_paths([ref]))
            if len(outcomes) != 1:
                raise UsageError(f"{ref} holds {len(outcomes)} eval sets; pass one")
            return outcomes[0].version
        evalset = (EvalSetModel.objects.filter(project=project, eval_set_id=ref)
                   .select_related("latest_version").first())
        if evalset is None or evalset.latest_version is None:
            raise UsageError(f"no file and no eval set {ref!r} in project {project.slug!r}")
        return evalset.latest_version

    # --- Remote mode ----------------------------------------------------------------------

    def _remote(self, options: dict[str, Any]) -> Outcome:
        token = options["token"] or os.environ.get(TOKEN_ENV)
        if not token:
            raise UsageError(f"remote mode needs an API token: --token T or ${TOKEN_ENV}")
        try:
            client = Client(options["server"], token)
        except ValueError as exc:
            raise UsageError(f"--server: {exc}") from None
        evalset = self._remote_evalset(client, options)
        baseline_ref = options["baseline"]
        if baseline_ref and baseline_ref != "pinned":
            found = client.run(int(baseline_ref))  # a 404 here: nothing started
            if found.evalset != evalset.id:
                raise UsageError(f"--baseline {baseline_ref}: run {baseline_ref} is of another eval set "
                                 f"(id {found.evalset}), not {evalset.eval_set_id!r} (id {evalset.id})")
        config = _read_config(options["config"]).model_dump(mode="json") if options["config"] else None
        common: dict[str, Any] = {
            "config": config, "project": options["project"], "eval_ids": self._eval_ids(options),
            "input_overrides": self._overrides(options) or None, "name": options["name"],
            "model": options["model"], "branch": options["branch"], "git_commit": options["commit"],
            "tags": options["tag"]}
        if options["outputs"]:
            path = Path(options["outputs"])
            if not path.is_file():
                raise UsageError(f"--outputs {path}: no such file")
            run = client.push_outputs(evalset, path, **common)
        else:
            kind, target = options["target_spec"]
            run = client.start_run(evalset, target_kind=kind, target=target, iterations=options["iterations"],
                                   warmups=options["warmups"], **common)
        self.stdout.write(f"run {run.id}: {run.cases_total} results to evaluate "
                          f"({evalset.eval_set_id} v{run.evalset_version}) on {client.server}")
        self.stdout.flush()

        def progress(current: RemoteRun) -> None:
            self._progress(current.settled, current.cases_total, current.cases_failed, current.cases_errored)

        result = client.wait(run, timeout=options["wait_timeout"], poll=options["poll"],
                             progress_callback=progress, max_failures=FAILURES_SHOWN)
        finished = result.run
        outcome = Outcome(run=finished.raw, suite=evalset.eval_set_id, run_url=finished.url,
                          results=lambda: client.iter_results(finished, page_size=500), failures=result.failures)
        if baseline_ref:
            try:
                compared = client.compare(baseline_ref, finished, alpha=options["significance"],
                                          limit=REGRESSIONS_SHOWN)
            except ClientError as exc:
                if exc.code != "no_baseline":
                    raise
                outcome.notes.append(f"{exc.message}: nothing to compare with yet (pin a run on its page)")
            else:
                outcome.comparison = compared.raw
        if options["output_file"]:
            client.download_report(finished, options["output_file"])
            self.stdout.write(f"report written to {options['output_file']}")
        return outcome

    def _remote_evalset(self, client: Client, options: dict[str, Any]) -> EvalSet:
        ref = options["evalset"]
        if Path(ref).exists():
            uploaded = client.upload_evalsets(ref, project=options["project"])
            if len(uploaded) != 1:
                raise UsageError(f"{ref} holds {len(uploaded)} eval sets; pass one")
            evalset = uploaded[0]
            self.stdout.write(f"eval set {evalset.eval_set_id} v{evalset.version} "
                              f"({'uploaded' if evalset.created else 'unchanged'}, {evalset.case_count} cases)")
            return evalset
        try:
            return client.evalset(ref, project=options["project"])
        except ClientError as exc:
            if exc.status == 404:
                raise UsageError(f"no file and no eval set {ref!r} on {client.server}") from None
            raise

    # --- Reporting ------------------------------------------------------------------------

    def _print_summary(self, outcome: Outcome, options: dict[str, Any]) -> None:
        run = outcome.run
        summary = run.get("summary") or {}
        write = self.stdout.write
        write("")
        write(f"{'criterion':<32} {'mean':>7} {'pass rate':>10} {'count':>6} {'errors':>7}")
        for name, stats in (summary.get("criteria") or {}).items():
            mean = "-" if stats.get("mean") is None else f"{stats['mean']:.3f}"
            shown = "-" if stats.get("pass_rate") is None else f"{stats['pass_rate']:.1%}"
            write(f"{name:<32} {mean:>7} {shown:>10} {stats['count']:>6} {stats['errors']:>7}")
        latency = summary.get("latency") or {}
        if latency.get("count"):
            write(f"latency p50 {latency['p50']:.3f} s, p95 {latency['p95']:.3f} s, max {latency['max']:.3f} s")
        rate = summary.get("pass_rate")
        passed = run["cases_done"] - run["cases_failed"] - run["cases_errored"]
        write(f"{run['status']}: {run['cases_total']} results, {passed} passed, {run['cases_failed']} failed, "
              f"{run['cases_errored']} errored, {run['cases_missing']} missing, "
              f"{run['cases_not_runnable']} not runnable" + (f" (pass rate {rate:.1%})" if rate is not None else ""))
        if outcome.failures:
            total = run["cases_failed"] + run["cases_errored"] + run["cases_missing"]
            write("")
            write(f"cases that did not pass ({len(outcome.failures)} of {total} shown):")
            for failure in outcome.failures:
                for line in failure.lines():
                    write("  " + line)
        compared = outcome.comparison
        if compared is not None:
            write("")
            write(f"vs baseline run {compared['baseline']['id']}: {compared['headline']}")
            write(f"{'cases':<16} {'baseline -> candidate':>22}")
            for key, count in compared["counts"].items():
                if count:
                    write(f"  {key:<14} {count:>22}")
            for line in Comparison(compared).regression_lines():
                write(line)
            gate = compared["gate"]
            write(f"regression gate: {'FAILED' if gate['regressed'] else 'passed'} ({gate['reason']})"
                  + ("" if options["fail_on_regression"] else ", not gating: no --fail-on-regression"))
        for note in outcome.notes:
            write(f"note: {note}")
        write("")
        write(f"run page:     {outcome.run_url}")
        if compared is not None:
            write(f"compare page: {compared['compare_url']}")
        if outcome.link_note:
            write(f"  ({outcome.link_note})")

    def _write_junit(self, outcome: Outcome, path: str) -> None:
        run = outcome.run
        criteria = [name for name, c in ((run.get("config") or {}).get("criteria") or {}).items()
                    if c.get("enabled", True)]
        compare_url = outcome.comparison["compare_url"] if outcome.comparison else ""
        data = junit_xml(outcome.results(), suite=outcome.suite, run_id=run["id"], run_url=outcome.run_url,
                         compare_url=compare_url, iterations=run.get("iterations") or 1, criteria=criteria)
        Path(path).write_bytes(data)
        self.stdout.write(f"JUnit XML written to {path}")

    def _exit_code(self, outcome: Outcome, options: dict[str, Any]) -> int:
        run = outcome.run
        if run["status"] != Run.Status.COMPLETED:
            return 1
        below_threshold = run["cases_failed"] or run["cases_errored"] or run["cases_missing"]
        if below_threshold and not options["regressions_only"]:
            return 1
        compared = outcome.comparison
        if options["fail_on_regression"] and compared is not None and compared["gate"]["regressed"]:
            return 1
        return 0


# --- Local reads, in the API's shapes -----------------------------------------------------------


RESULTS_CHUNK = 500


def _results_queryset(run: Run) -> Any:
    scores = Score.objects.order_by("criterion", "turn_index", "pk")
    return (CaseResult.objects.filter(run=run).select_related("case")
            .prefetch_related(Prefetch("scores", queryset=scores)).order_by("case__position", "iteration", "pk"))


def _local_results(run: Run) -> Iterator[Mapping[str, Any]]:
    """Every result as the API lists it, a chunk at a time."""
    qs = _results_queryset(run)
    total = qs.count()
    for start in range(0, total, RESULTS_CHUNK):
        yield from CaseResultSerializer(qs[start:start + RESULTS_CHUNK], many=True).data


def _local_failures(run: Run, run_url: str) -> list[CaseFailure]:
    failures: list[CaseFailure] = []
    for status in FAILED_STATUSES:
        left = FAILURES_SHOWN - len(failures)
        if left <= 0:
            break
        rows = CaseResultSerializer(_results_queryset(run).filter(status=status)[:left], many=True).data
        failures.extend(CaseFailure.from_result(row, run_url) for row in rows)
    return failures


def _json_option(value: str, name: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name} is not valid JSON: {exc}") from None


def _read_config(path: str) -> EvalConfig:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    criteria = doc.get("criteria") if isinstance(doc, dict) else None
    if isinstance(criteria, dict) and all(isinstance(v, int | float) for v in criteria.values()):
        # ADK's test_config.json: criterion name -> threshold.
        doc = {**doc, "criteria": {k: CriterionConfig(threshold=float(v)).model_dump() for k, v in criteria.items()}}
    try:
        return EvalConfig.model_validate(doc)
    except ValidationError as exc:
        raise UsageError(f"--config {path} is not an evaluation config: {exc}") from None


def _target(options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    target: str = options["target"] or ""
    if target == "demo":
        target = DEMO_TARGET
    if target.startswith(("http://", "https://")):
        headers = {}
        for header in options["header"]:
            name, sep, value = header.partition(":")
            if not sep:
                raise UsageError(f"--header {header!r}: use NAME:VALUE")
            headers[name.strip()] = value.strip()
        return Run.TargetKind.HTTP, {"url": target, "headers": headers, "timeout_seconds": options["timeout"],
                                     "concurrency": max(1, options["workers"])}
    if ":" in target:
        return Run.TargetKind.PYTHON, {"callable": target, "timeout_seconds": options["timeout"]}
    raise UsageError(f"--target {target!r}: give an http(s) URL, a Python module:function, or `demo`")
