"""python manage.py import_evalset PATH [PATH ...] [--project SLUG] [--format NAME]"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG, evalset_import
from evaluations.interop import EvalSetImportError, files_from_paths, reader_names
from evaluations.models import Project


class Command(BaseCommand):
    help = (
        "Import an eval set: a file, a zip, a folder, or several files (e.g. a UiPath eval set "
        "with its evaluator definitions). Prints the eval set, version, format and case count."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--project", default=DEFAULT_PROJECT_SLUG,
                            help="project slug (created if it does not exist; default: %(default)s)")
        parser.add_argument("--format", choices=reader_names(), help="skip auto-detection")

    def handle(self, *args: Any, **options: Any) -> None:
        project, created = Project.objects.get_or_create(
            slug=options["project"], defaults={"name": options["project"].replace("-", " ").title()}
        )
        if created:
            self.stdout.write(f"created project {project.slug!r}")
        try:
            files = files_from_paths(options["paths"])
            outcomes = evalset_import(project=project, files=files, format=options["format"])
        except EvalSetImportError as exc:
            self.stderr.write(f"error ({exc.code}): nothing was imported")
            for line in exc.summary().splitlines():
                self.stderr.write(f"  {line}")
            sys.exit(1)
        for outcome in outcomes:
            self.stdout.write(outcome.describe())
            for warning in outcome.warnings:
                self.stdout.write(f"  warning: {warning}")
