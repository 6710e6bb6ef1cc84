"""python manage.py eval EVALSET (--outputs FILE | --target URL_OR_CALLABLE) [options]

Runs an eval set in this process (local mode) and prints a summary table. EVALSET is an
eval-set file (imported first; the same content is the same version) or the id of an eval
set already in the project. Exit codes: 0 all thresholds met, 1 some case failed or errored,
2 usage or input error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from pydantic import ValidationError

from evaluations import exports, runs
from evaluations.audit import record_run
from evaluations.formats import EvalSetImportError, files_from_paths
from evaluations.models import AuditEvent, EvalSet, Project, Run
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.services import DEFAULT_PROJECT_SLUG, evalset_import

DEMO_TARGET = "evaluations.demo.agent:respond"


class UsageError(Exception):
    pass


class Command(BaseCommand):
    help = "Evaluate an agent on an eval set: uploaded outputs or a live target, scored by the configured criteria."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("evalset", metavar="EVALSET", help="eval-set file, zip or folder, or an eval set id")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--outputs", metavar="FILE", help="agent outputs (JSON or JSONL, or ADK result files)")
        source.add_argument("--target", metavar="URL_OR_CALLABLE",
                            help="an HTTP endpoint, a Python `module:function`, or `demo`")
        parser.add_argument("--config", metavar="FILE", help="evaluation config (AgentFlow EvalConfig or ADK "
                            "test_config.json); default: the eval set's own, else evalsite's")
        parser.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        parser.add_argument("--workers", type=int, default=1, help="parallel workers (default: 1)")
        parser.add_argument("--iterations", type=int, default=1)
        parser.add_argument("--warmups", type=int, default=0)
        parser.add_argument("--eval-ids", help="comma-separated eval ids to run (default: all)")
        parser.add_argument("--input-overrides", metavar="JSON",
                            help='per eval id, merged into the inputs: {"eval-1": {"city": "Oslo"}}')
        parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                            help="HTTP header for the target (repeatable)")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per agent call")
        parser.add_argument("--output-file", metavar="FILE", help="write the AgentFlow EvalReport JSON here")
        parser.add_argument("--model", default="")
        parser.add_argument("--branch", default="")
        parser.add_argument("--commit", default="")
        parser.add_argument("--tag", action="append", default=[])
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run = self._run(options)
        except (UsageError, EvalSetImportError, runs.RunError) as exc:
            self.stderr.write(f"error: {exc}")
            sys.exit(2)
        self._print_summary(run)
        if options["output_file"]:
            with open(options["output_file"], "w", encoding="utf-8") as fh:
                for chunk in exports.run_report_chunks(run):
                    fh.write(chunk)
            self.stdout.write(f"report written to {options['output_file']}")
        good = run.status == Run.Status.COMPLETED and run.cases_failed == 0 and run.cases_errored == 0 \
            and run.cases_missing == 0
        sys.exit(0 if good else 1)

    def _run(self, options: dict[str, Any]) -> Run:
        project, _ = Project.objects.get_or_create(slug=options["project"],
                                                   defaults={"name": options["project"].title()})
        version = self._version(project, options["evalset"])
        config = _read_config(options["config"]) if options["config"] else None
        overrides = _json_option(options["input_overrides"], "--input-overrides") if options["input_overrides"] else {}
        eval_ids = [e.strip() for e in options["eval_ids"].split(",") if e.strip()] if options["eval_ids"] else None
        labels = {"model": options["model"], "branch": options["branch"], "git_commit": options["commit"],
                  "tags": options["tag"]}
        common = {"project": project, "version": version, "config": config, "eval_ids": eval_ids,
                  "input_overrides": overrides, "labels": labels, "name": options["name"], "enqueue": False,
                  "iterations": options["iterations"], "warmups": options["warmups"]}
        if options["outputs"]:
            from evaluations.targets.uploaded import read_outputs

            outputs = read_outputs(files_from_paths([options["outputs"]]))
            run = runs.run_create(target_kind=Run.TargetKind.UPLOADED, outputs=outputs, **common)
        else:
            kind, target = _target(options)
            run = runs.run_create(target_kind=kind, target=target, **common)
        record_run(run=run, actor=None, verb=AuditEvent.Verb.RUN_STARTED, via="manage.py eval")
        self.stdout.write(f"run {run.pk}: {run.cases_total} results to evaluate "
                          f"({version.evalset.eval_set_id} v{version.number})")

        def progress(current: Run) -> None:
            self.stdout.write(f"  {current.cases_settled}/{current.cases_total} done, "
                              f"{current.cases_failed} failed, {current.cases_errored} errored")

        return runs.run_execute_here(run.pk, workers=options["workers"], progress=progress)

    def _version(self, project: Project, ref: str) -> Any:
        if Path(ref).exists():
            outcomes = evalset_import(project=project, files=files_from_paths([ref]))
            if len(outcomes) != 1:
                raise UsageError(f"{ref} holds {len(outcomes)} eval sets; pass one")
            return outcomes[0].version
        evalset = EvalSet.objects.filter(project=project, eval_set_id=ref).select_related("latest_version").first()
        if evalset is None or evalset.latest_version is None:
            raise UsageError(f"no file and no eval set {ref!r} in project {project.slug!r}")
        return evalset.latest_version

    def _print_summary(self, run: Run) -> None:
        summary = run.summary or {}
        self.stdout.write("")
        self.stdout.write(f"{'criterion':<32} {'mean':>7} {'pass rate':>10} {'count':>6} {'errors':>7}")
        for name, stats in (summary.get("criteria") or {}).items():
            mean = "-" if stats.get("mean") is None else f"{stats['mean']:.3f}"
            shown = "-" if stats.get("pass_rate") is None else f"{stats['pass_rate']:.1%}"
            self.stdout.write(f"{name:<32} {mean:>7} {shown:>10} {stats['count']:>6} {stats['errors']:>7}")
        latency = summary.get("latency") or {}
        if latency.get("count"):
            self.stdout.write(f"latency p50 {latency['p50']:.3f} s, p95 {latency['p95']:.3f} s, "
                              f"max {latency['max']:.3f} s")
        rate = summary.get("pass_rate")
        self.stdout.write(
            f"{run.status}: {run.cases_total} results, {run.cases_done - run.cases_failed - run.cases_errored} "
            f"passed, {run.cases_failed} failed, {run.cases_errored} errored, {run.cases_missing} missing, "
            f"{run.cases_not_runnable} not runnable" + (f" (pass rate {rate:.1%})" if rate is not None else "")
        )


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
