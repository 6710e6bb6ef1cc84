"""python manage.py monitors {list,create,edit,show,backfill,score-threads,retention} ...: monitors from a script.

    monitors list [--project SLUG]
        the project's monitors as JSON lines (id, name, level, version, last 24 h)
    monitors create --file spec.json [--project SLUG]
        a monitor from a JSON spec ({"name", "level", "filters", "sample_rate", "idle_seconds",
        "criteria"}); prints it
    monitors edit ID --file spec.json
        a new spec (fields left out keep their value); a change to what scores makes a new version
    monitors show ID [--hours N]
        the monitor's current version over the last N hours (pass rate, criteria, latency, volume)
    monitors backfill ID --since ISO [--until ISO] [--here]
        score the traces received in [since, until): queued, or at once with --here
    monitors score-threads
        the idle threads of every thread monitor, now (what the schedule does every minute)
    monitors retention [--project SLUG] [--days N | --forever] [--sweep]
        show or set a project's retention; --sweep deletes what is past it now

Problems are printed with their field paths and nothing is written (exit status 1). Writes
are recorded as made by nobody (the CLI)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from pydantic import ValidationError

from evaluations.evalsets.services import DEFAULT_PROJECT_SLUG
from evaluations.models import Monitor, Project, Retention
from evaluations.monitors import retention, scoring, stats
from evaluations.monitors.services import MonitorError, monitor_backfill, monitor_create, monitor_update, spec_of
from evaluations.monitors.spec import MonitorSpec, spec_errors


def _read(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError(f"{path}: a JSON object is needed")
    return data


def _spec(path: str, base: dict[str, Any] | None = None) -> MonitorSpec:
    try:
        return MonitorSpec.model_validate({**(base or {}), **_read(path)})
    except ValidationError as exc:
        raise CommandError(f"{path}: " + "; ".join(spec_errors(exc))) from None


def _when(value: str, name: str) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--{name}: not an ISO 8601 date and time: {value!r}") from None
    return at if at.tzinfo else timezone.make_aware(at, timezone.get_current_timezone())


class Command(BaseCommand):
    help = "Monitors of received traces: list, create, edit, show, backfill; thread scoring; retention."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list")
        listing.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        create = sub.add_parser("create")
        create.add_argument("--file", required=True, help="a JSON spec; - for stdin")
        create.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        edit = sub.add_parser("edit")
        edit.add_argument("id", type=int)
        edit.add_argument("--file", required=True)
        show = sub.add_parser("show")
        show.add_argument("id", type=int)
        show.add_argument("--hours", type=int, default=24)
        backfill = sub.add_parser("backfill")
        backfill.add_argument("id", type=int)
        backfill.add_argument("--since", required=True)
        backfill.add_argument("--until", default="")
        backfill.add_argument("--here", action="store_true", help="score now, in this process")
        sub.add_parser("score-threads")
        keep = sub.add_parser("retention")
        keep.add_argument("--project", default=DEFAULT_PROJECT_SLUG)
        keep.add_argument("--days", type=int, default=None)
        keep.add_argument("--forever", action="store_true")
        keep.add_argument("--sweep", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            getattr(self, "_" + action.replace("-", "_"))(options)
        except MonitorError as exc:
            raise CommandError("; ".join(exc.messages)) from None

    def _out(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, default=str, ensure_ascii=False))

    def _project(self, slug: str) -> Project:
        project = Project.objects.filter(slug=slug, archived_at__isnull=True).first()
        if project is None:
            raise CommandError(f"no project {slug!r}")
        return project

    def _monitor(self, pk: int) -> Monitor:
        monitor = Monitor.objects.filter(pk=pk).select_related("project").first()
        if monitor is None:
            raise CommandError(f"no monitor {pk}")
        return monitor

    def _list(self, options: dict[str, Any]) -> None:
        monitors = list(Monitor.objects.filter(project=self._project(options["project"])))
        day = stats.last_day([m.pk for m in monitors], timezone.now())
        for m in monitors:
            passed, total = day.get(m.pk, (0, 0))
            self._out({"id": m.pk, "name": m.name, "level": m.level, "version": m.version, "enabled": m.enabled,
                       "last_24h": {"passed": passed, "total": total}})

    def _create(self, options: dict[str, Any]) -> None:
        monitor = monitor_create(project=self._project(options["project"]), spec=_spec(options["file"]), user=None)
        self._out({"id": monitor.pk, "version": monitor.version, **spec_of(monitor)})

    def _edit(self, options: dict[str, Any]) -> None:
        monitor = self._monitor(options["id"])
        monitor = monitor_update(monitor=monitor, spec=_spec(options["file"], spec_of(monitor)), user=None)
        self._out({"id": monitor.pk, "version": monitor.version, **spec_of(monitor)})

    def _show(self, options: dict[str, Any]) -> None:
        monitor = self._monitor(options["id"])
        s = stats.summary(monitor, since=timezone.now() - timedelta(hours=options["hours"]))
        self._out({"id": monitor.pk, "name": monitor.name, "version": monitor.version, "total": s.total,
                   "passed": s.passed, "pass_rate": s.pass_rate, "traces": s.traces, "latency_p50": s.p50,
                   "latency_p95": s.p95, "tokens": s.tokens, "cost": s.cost,
                   "criteria": {k: {"passed": v[0], "total": v[1], "mean_score": v[2]}
                                for k, v in s.criteria.items()}})

    def _backfill(self, options: dict[str, Any]) -> None:
        monitor = self._monitor(options["id"])
        since = _when(options["since"], "since")
        until = _when(options["until"], "until") if options["until"] else timezone.now()
        if options["here"]:
            if until <= since:
                raise CommandError("--until: must be after --since")
            self._out({"id": monitor.pk, "scored": scoring.backfill(monitor.pk, since, until)})
        else:
            monitor_backfill(monitor=monitor, since=since, until=until, user=None)
            self._out({"id": monitor.pk, "queued": True})

    def _score_threads(self, options: dict[str, Any]) -> None:
        self._out({"scored": scoring.sweep_threads()})

    def _retention(self, options: dict[str, Any]) -> None:
        project = self._project(options["project"])
        if options["forever"] or options["days"] is not None:
            days = None if options["forever"] else options["days"]
            if days is not None and not 1 <= days <= 3650:
                raise CommandError("--days: from 1 to 3650")
            retention.retention_set(project=project, days=days, user=None)
        kept = Retention.objects.filter(project=project).first()
        out: dict[str, Any] = {"project": project.slug, "days": kept.days if kept else None}
        if options["sweep"] and kept is not None and kept.days:
            sweep = retention.project_sweep(project.pk, kept.days)
            out["deleted"] = {"traces": sweep.traces, "results": sweep.results}
        self._out(out)
