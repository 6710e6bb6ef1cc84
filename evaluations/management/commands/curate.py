"""python manage.py curate {edit,diff,promote} ...: eval-set curation from a script.

    curate edit EVALSET --file edits.json [--project SLUG] [--note TEXT]
        apply a save of edits (the API's body: {"base_version", "note", "changes"}; a missing
        base_version means the latest) and print the new version
    curate diff EVALSET FROM TO [--project SLUG] [--page N]
        the diff of two versions as JSON (the API's shape)
    curate promote RUN (--eval-id ID ... | --status STATUS --baseline RUN) [--target EVALSET]
                       [--mode new|expected] [--note TEXT]
        a run's results as cases (new ones, or new expected answers of the same cases)

EVALSET is an eval set's id inside its file (`eval_set_id`) or its database id. Writes are
recorded as made by nobody (the CLI) with how = api; problems are printed with their paths
and nothing is written (exit status 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.audit import audit_record
from evaluations.converters import parse_id
from evaluations.evalsets.curation import CurationError, EditOutcome, evalset_edit, parse_edit
from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG
from evaluations.models import AuditEvent, EvalCase, EvalSet, EvalSetVersion, Run, Trace
from evaluations.review import comparison, promotion
from evaluations.review.versions import version_diff


class Command(BaseCommand):
    help = "Curate eval sets: save edits as a new version, diff two versions, promote a run's results into cases."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        edit = sub.add_parser("edit", help="apply a JSON file of edits as a new version")
        edit.add_argument("evalset")
        edit.add_argument("--file", required=True, help="JSON: {base_version?, note?, changes: [...]}; - for stdin")
        edit.add_argument("--note", default=None)
        edit.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        diff = sub.add_parser("diff", help="the diff of two versions, as JSON")
        diff.add_argument("evalset")
        diff.add_argument("old", type=int)
        diff.add_argument("new", type=int)
        diff.add_argument("--page", type=int, default=1)
        diff.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        promote = sub.add_parser("promote", help="a run's results as cases")
        promote.add_argument("run", type=int)
        promote.add_argument("--eval-id", action="append", default=[], dest="eval_ids")
        promote.add_argument("--status", help="every case of this status in the comparison with --baseline")
        promote.add_argument("--baseline", type=int)
        promote.add_argument("--target", help="the eval set to add to (default: the run's)")
        promote.add_argument("--mode", choices=["new", "expected"], default="new")
        promote.add_argument("--note", default=None)
        from_trace = sub.add_parser("promote-trace", help="a received trace (its pk) as a new case")
        from_trace.add_argument("trace", type=int)
        from_trace.add_argument("--target", required=True, help="eval set (id or eval_set_id) of its project")
        from_trace.add_argument("--eval-id", default=None, dest="eval_id")
        from_trace.add_argument("--note", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"_{options['action'].replace('-', '_')}")(options)
        except CurationError as exc:
            self.stderr.write("error: nothing was saved")
            for p in exc.problems:
                self.stderr.write(f"  {p.path}: {p.message}" if p.path else f"  {p.message}")
            sys.exit(1)

    def _evalset(self, name: str, *, project: str | None = None, project_id: int | None = None) -> EvalSet:
        qs = EvalSet.objects.all()
        qs = qs.filter(project_id=project_id) if project_id is not None else qs.filter(project__slug=project)
        pk = parse_id(name)
        found = qs.filter(eval_set_id=name).first() or (qs.filter(pk=pk).first() if pk is not None else None)
        if found is None:
            raise CommandError(f"no eval set {name!r} in that project")
        return found

    def _saved(self, evalset: EvalSet, outcome: EditOutcome) -> None:
        version = outcome.version
        audit_record(
            project=evalset.project,
            actor=None,
            verb=AuditEvent.Verb.EVALSET_EDITED,
            obj=evalset,
            summary=f"{evalset.display_name}: v{version.number} ({version.how_created}) — {outcome.describe()}",
            data={"version": version.number, "how": version.how_created, "via": "cli"},
        )
        self.stdout.write(f"eval set {evalset.eval_set_id!r}: {outcome.describe()}")
        for other in outcome.other_versions:
            self.stdout.write(f"  and version {other.number} of eval set {other.evalset.eval_set_id!r}")

    def _edit(self, options: dict[str, Any]) -> None:
        evalset = self._evalset(options["evalset"], project=options["project"])
        text = sys.stdin.read() if options["file"] == "-" else Path(options["file"]).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{options['file']}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
        if isinstance(data, dict):
            latest = evalset.versions.order_by("-number").first()
            data.setdefault("base_version", latest.number if latest else 0)
            if options["note"] is not None:
                data["note"] = options["note"]
        outcome = evalset_edit(evalset=evalset, edit=parse_edit(data), how=EvalSetVersion.How.API)
        self._saved(evalset, outcome)

    def _diff(self, options: dict[str, Any]) -> None:
        evalset = self._evalset(options["evalset"], project=options["project"])
        versions = {v.number: v for v in evalset.versions.filter(number__in=[options["old"], options["new"]])}
        for n in (options["old"], options["new"]):
            if n not in versions:
                raise CommandError(f"no version {n} of {evalset.eval_set_id!r}")
        diff = version_diff(old=versions[options["old"]], new=versions[options["new"]], page=options["page"])
        self.stdout.write(json.dumps(diff.as_dict(), ensure_ascii=False, indent=2))

    def _promote(self, options: dict[str, Any]) -> None:
        run = Run.objects.select_related("evalset_version__evalset", "project").filter(pk=options["run"]).first()
        if run is None:
            raise CommandError(f"no run {options['run']}")
        target = (
            self._evalset(options["target"], project_id=run.project_id)
            if options["target"]
            else run.evalset_version.evalset
        )
        eval_ids = list(options["eval_ids"])
        if options["status"]:
            baseline = Run.objects.filter(pk=options["baseline"] or 0, project=run.project).first()
            if baseline is None:
                raise CommandError("--status needs --baseline: a run of the same project")
            eval_ids += comparison.eval_ids_with_status(baseline=baseline, candidate=run, status=options["status"])
        eval_ids = list(dict.fromkeys(eval_ids))
        if not eval_ids:
            raise CommandError("no cases to promote: give --eval-id, or --status with --baseline")
        latest = target.versions.order_by("-number").first()
        if latest is None:
            raise CommandError("the eval set has no version")
        if options["mode"] == "new":
            taken = set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True))
            changes = [
                {"op": "put", "case": c} for c in promotion.proposed_cases(run=run, eval_ids=eval_ids, taken=taken)
            ]
        else:
            changes = [
                {"op": "put", "eval_id": c["eval_id"], "case": c}
                for c in promotion.proposed_expectations(run=run, version=latest, eval_ids=eval_ids)
            ]
        if not changes:
            raise CommandError(f"run {run.pk} has no results for those cases")
        note = options["note"] or f"{len(changes)} case(s) from run #{run.pk}"
        outcome = evalset_edit(
            evalset=target,
            edit=parse_edit({"base_version": latest.number, "note": note, "changes": changes}),
            how=EvalSetVersion.How.PROMOTION,
        )
        self._saved(target, outcome)

    def _promote_trace(self, options: dict[str, Any]) -> None:
        trace = Trace.objects.filter(pk=options["trace"], received=True).select_related("project").first()
        if trace is None or trace.project_id is None:
            raise CommandError(f"no received trace {options['trace']}")
        target = self._evalset(options["target"], project_id=trace.project_id)
        latest = target.versions.order_by("-number").first()
        if latest is None:
            raise CommandError("the eval set has no version")
        taken = set(EvalCase.objects.in_version(latest).values_list("eval_id", flat=True))
        if options["eval_id"] and options["eval_id"] in taken:
            raise CommandError(f"version {latest.number} already has a case {options['eval_id']!r}")
        case = promotion.proposed_case_from_trace(trace, taken=taken, eval_id=options["eval_id"])
        note = options["note"] or ""
        if trace.trace_id not in note:
            note = f"{note} (from trace {trace.trace_id})" if note else f"from trace {trace.trace_id}"
        outcome = evalset_edit(
            evalset=target,
            edit=parse_edit({"base_version": latest.number, "note": note, "changes": [{"op": "put", "case": case}]}),
            how=EvalSetVersion.How.PROMOTION,
        )
        self._saved(target, outcome)
