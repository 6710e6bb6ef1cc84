"""python manage.py eval EVALSET (--outputs FILE | --target URL_OR_CALLABLE) [options]

Evaluates an agent on an eval set and prints a summary table, in one of two modes:

- local (default): in this process, on this command's own database. EVALSET is an eval-set
  file (imported first; the same content is the same version) or the id of an eval set
  already in the project.
- remote (`--server URL --token T`, the token also from EVALSITE_TOKEN): on a team server,
  over its REST API. This is `evaluations.client`'s `eval` command (standard library only:
  `python -m evaluations.client eval ...` runs the same code without Django); EVALSET is a
  file (uploaded) or an eval set's id there; the server's queue runs the evaluation while
  this command shows the progress on stderr.

The options, the summary, JUnit XML (`--junit`), the comparison with a baseline
(`--baseline RUN_ID|pinned|default`, gated with `--fail-on-regression`) and the exit codes are
`evaluations.client`'s, for both modes; this command adds the local mode.

Exit codes: 0 all good; 1 a case failed its thresholds (or errored, or had no output), the
run did not complete, or (with --fail-on-regression) the candidate regressed; 2 usage,
input or server error (unreachable server, bad token, an answer in the API's error shape).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.db.models import Prefetch
from django.http import Http404
from django.urls import reverse
from pydantic import ValidationError

from evaluations.api.compare import CompareError, comparison_payload, resolve_baseline
from evaluations.api.serializers import CaseResultSerializer, RunSerializer
from evaluations.audit import record_run
from evaluations.client import (
    FAILED_STATUSES,
    FAILURES_SHOWN,
    REGRESSIONS_SHOWN,
    CaseFailure,
    Outcome,
    UsageError,
    add_eval_arguments,
    choose_evalset,
    eval_ids_option,
    input_overrides_option,
    progress_line,
    run_eval,
    with_test_config,
)
from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG, evalset_import
from evaluations.interop import EvalSetImportError, SourceFile, files_from_paths
from evaluations.interop.adk import evalset as adk
from evaluations.models import AuditEvent, CaseResult, Project, Run, Score
from evaluations.models import EvalSet as EvalSetModel
from evaluations.runs import exports
from evaluations.runs import services as runs
from evaluations.schemas.evalset import EvalConfig

LOCAL_LINK_NOTE = "paths on the site that serves this database (e.g. `python manage.py up`)"


class Command(BaseCommand):
    help = ("Evaluate an agent on an eval set (uploaded outputs or a live target) here or on a team server "
            "(--server), print a summary, and gate CI on thresholds and regressions.")

    def add_arguments(self, parser: CommandParser) -> None:
        add_eval_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # Remote mode, the summary, JUnit and the exit code: evaluations.client's `eval`.
        sys.exit(run_eval(options, out=self.stdout, err=self.stderr, local=self._local))

    # --- Local mode -----------------------------------------------------------------------

    def _local(self, options: dict[str, Any]) -> Outcome:
        try:
            return self._run_here(options)
        except (EvalSetImportError, runs.RunError) as exc:
            raise UsageError(str(exc)) from None

    def _run_here(self, options: dict[str, Any]) -> Outcome:
        slug = options["project"] or DEFAULT_PROJECT_SLUG
        project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
        version = self._version(project, options["evalset"], options.get("evalset_id"))
        baseline_ref = options["baseline"]
        if baseline_ref and baseline_ref not in ("pinned", "default"):
            # Checked before any work: a wrong baseline is a usage error, not a wasted run.
            found = Run.objects.filter(project=project, pk=int(baseline_ref)).select_related(
                "evalset_version__evalset").first()
            if found is None:
                raise UsageError(f"--baseline {baseline_ref}: no run {baseline_ref} in project {project.slug!r}")
            if found.evalset_version.evalset_id != version.evalset_id:
                raise UsageError(f"--baseline {baseline_ref}: run {baseline_ref} is of eval set "
                                 f"{found.evalset_version.evalset.eval_set_id!r}, not "
                                 f"{version.evalset.eval_set_id!r}")
        config = _config(options) if options["config_doc"] is not None else None
        labels = {"model": options["model"], "branch": options["branch"], "git_commit": options["commit"],
                  "tags": options["tag"]}
        common = {"project": project, "version": version, "config": config, "eval_ids": eval_ids_option(options),
                  "input_overrides": input_overrides_option(options), "labels": labels,
                  "name": options["name"], "enqueue": False, "iterations": options["iterations"],
                  "warmups": options["warmups"]}
        outputs = None
        if options["outputs"]:
            from evaluations.interop.outputs import read_output_rows

            outputs = read_output_rows(files_from_paths([options["outputs"]]))
        with transaction.atomic():  # the run and its audit event, together or neither
            if outputs is not None:
                run = runs.run_create(target_kind=Run.TargetKind.UPLOADED, outputs=outputs, **common)
            else:
                kind, target = options["target_spec"]
                run = runs.run_create(target_kind=kind, target=target, **common)
            record_run(run=run, actor=None, verb=AuditEvent.Verb.RUN_STARTED, via="manage.py eval")
        self.stdout.write(f"run {run.pk}: {run.cases_total} results to evaluate "
                          f"({version.evalset.eval_set_id} v{version.number})")

        def progress(current: Run) -> None:
            self.stderr.write(progress_line(current.cases_settled, current.cases_total, current.cases_failed,
                                            current.cases_errored))

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

    def _version(self, project: Project, ref: str, chosen: str | None = None) -> Any:
        if Path(ref).exists():
            outcomes = evalset_import(project=project, files=files_from_paths(with_test_config(ref)))
            return choose_evalset(ref, [(o.version.evalset.eval_set_id, o.version) for o in outcomes], chosen)
        evalset = (EvalSetModel.objects.filter(project=project, eval_set_id=ref)
                   .select_related("latest_version").first())
        if evalset is None or evalset.latest_version is None:
            raise UsageError(f"no file and no eval set {ref!r} in project {project.slug!r}")
        return evalset.latest_version


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


def _config(options: Mapping[str, Any]) -> EvalConfig:
    """An AgentFlow EvalConfig, else anything ADK's test_config.json accepts (read as a
    test_config.json beside an eval set is)."""
    try:
        return EvalConfig.model_validate(options["config_doc"])
    except ValidationError as exc:
        native = exc
    path = Path(options["config"])
    try:
        config, problems, _warnings = adk.read_test_config(SourceFile(path.name, path.read_bytes()))
    except (OSError, EvalSetImportError):
        config, problems = None, []
    if config is not None and not problems:
        return config
    adk_problems = "; ".join(str(p) for p in problems[:5])
    raise UsageError(f"--config {options['config']} is not an evaluation config: {native}"
                     + (f"\nnor an ADK test_config.json: {adk_problems}" if adk_problems else "")) from None
