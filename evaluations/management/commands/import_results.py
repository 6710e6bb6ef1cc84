"""python manage.py import_results PATH [--evalset ID] [--project SLUG] [--rescore]"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from evaluations.converters import parse_id
from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG
from evaluations.interop import EvalSetImportError, SourceFile, check_size
from evaluations.models import EvalSet, Project
from evaluations.runs.imports import results_import, run_rescore
from evaluations.runs.services import RunError


class Command(BaseCommand):
    help = (
        "Import another tool's results file (ADK eval history, DeepEval test run, AgentFlow EvalReport, "
        "UiPath `uipath eval --output-file`) as a completed run, keeping its scores. Prints the run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", metavar="PATH")
        parser.add_argument("--project", default=DEFAULT_PROJECT_SLUG,
                            help="project slug (created if it does not exist; default: %(default)s)")
        parser.add_argument("--evalset", metavar="ID",
                            help="the eval set the results are of (its id, or its number in evalsite); default: "
                                 "created from the file when it carries the cases, else the eval set it names")
        parser.add_argument("--rescore", action="store_true",
                            help="also queue a run scoring the same outputs with evalsite's criteria")

    def handle(self, *args: Any, **options: Any) -> None:
        project, created = Project.objects.get_or_create(
            slug=options["project"], defaults={"name": options["project"].replace("-", " ").title()}
        )
        if created:
            self.stdout.write(f"created project {project.slug!r}")
        evalset = None
        if options["evalset"]:
            wanted = options["evalset"]
            matches = EvalSet.objects.filter(project=project, eval_set_id=wanted)
            wanted_pk = parse_id(wanted)
            if not matches.exists() and wanted_pk is not None:
                matches = EvalSet.objects.filter(project=project, pk=wanted_pk)
            evalset = matches.first()
            if evalset is None:
                self.stderr.write(f"error: no eval set {wanted!r} in project {project.slug!r}")
                sys.exit(1)
        path = Path(options["path"])
        if not path.is_file():
            self.stderr.write(f"error: {path} is not a file")
            sys.exit(1)
        rescored = None
        try:
            with transaction.atomic():  # a refused rescore leaves no import behind either
                check_size(path.name, path.stat().st_size)
                run = results_import(project=project, file=SourceFile(path.name, path.read_bytes()), evalset=evalset)
                if options["rescore"]:
                    rescored = run_rescore(run=run)
        except EvalSetImportError as exc:
            self.stderr.write(f"error ({exc.code}): nothing was imported")
            for line in exc.summary().splitlines():
                self.stderr.write(f"  {line}")
            sys.exit(1)
        except RunError as exc:
            self.stderr.write(f"error: nothing was imported: cannot rescore: {exc}")
            sys.exit(1)
        tool = run.target.get("imported", "")
        version = run.evalset_version
        self.stdout.write(
            f"run {run.pk} ({run.name}): {tool} results for eval set {version.evalset.eval_set_id!r} version "
            f"{version.number}, {run.status}; {run.cases_done} cases scored ({run.cases_failed} failed, "
            f"{run.cases_errored} errors), {run.cases_missing} missing"
        )
        if rescored is not None:
            self.stdout.write(f"run {rescored.pk} queued: the same outputs scored by evalsite")
