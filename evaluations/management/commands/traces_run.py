"""python manage.py traces_run EVALSET [--project SLUG] [--deadline-minutes N] [--eval-id ID ...]"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evaluations.converters import parse_id
from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG
from evaluations.ingest.runs import traces_run_create
from evaluations.models import EvalSet, Project
from evaluations.runs.services import RunError


class Command(BaseCommand):
    help = (
        "Create a run that waits for your agent's traces on POST /v1/traces (one per case, naming it with "
        "evalsite.run_id and evalsite.eval_id); it is scored when every case has one or the deadline passes. "
        "Prints the run id and the OpenTelemetry settings for the agent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("evalset", metavar="EVALSET", help="the eval set: its id in evalsite, or its eval_set_id")
        parser.add_argument("--project", default=DEFAULT_PROJECT_SLUG, help="project slug (default: %(default)s)")
        parser.add_argument(
            "--evalset-version",
            type=int,
            dest="evalset_version",
            help="the eval set's version number (default: the latest)",
        )
        parser.add_argument(
            "--deadline-minutes",
            type=int,
            default=60,
            help="cases without a trace by then are missing (default: %(default)s)",
        )
        parser.add_argument(
            "--eval-id", action="append", dest="eval_ids", metavar="ID", help="only these cases (repeat the option)"
        )
        parser.add_argument("--iterations", type=int, default=1)
        parser.add_argument("--name", default="")
        parser.add_argument("--model", default="")
        parser.add_argument("--branch", default="")
        parser.add_argument("--commit", default="")
        parser.add_argument("--tag", action="append", dest="tags", default=[])

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            self.stderr.write(f"error: no project {options['project']!r}")
            sys.exit(1)
        wanted = options["evalset"]
        evalset = EvalSet.objects.filter(project=project, eval_set_id=wanted).first()
        wanted_pk = parse_id(wanted)
        if evalset is None and wanted_pk is not None:
            evalset = EvalSet.objects.filter(project=project, pk=wanted_pk).first()
        if evalset is None:
            self.stderr.write(f"error: no eval set {wanted!r} in project {project.slug!r}")
            sys.exit(1)
        version = (
            evalset.versions.filter(number=options["evalset_version"]).first()
            if options["evalset_version"]
            else evalset.latest_version
        )
        if version is None:
            self.stderr.write(f"error: eval set {wanted!r} has no version {options['version']}")
            sys.exit(1)
        try:
            run = traces_run_create(
                project=project,
                version=version,
                deadline_seconds=options["deadline_minutes"] * 60,
                iterations=options["iterations"],
                eval_ids=options["eval_ids"],
                name=options["name"],
                labels={
                    "model": options["model"],
                    "branch": options["branch"],
                    "git_commit": options["commit"],
                    "tags": options["tags"],
                },
            )
        except RunError as exc:
            self.stderr.write(f"error: {exc}")
            sys.exit(1)
        self.stdout.write(f"run {run.pk}: waiting for {run.cases_total} traces until {run.target['deadline']}")
        self.stdout.write("Point the agent's OpenTelemetry exporter at this server:")
        self.stdout.write("  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=<server>/v1/traces")
        self.stdout.write('  OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer <API token>"')
        self.stdout.write(
            f"and put evalsite.run_id={run.pk} and evalsite.eval_id=<the case's eval id> on each "
            "case's root span (or its resource)."
        )
