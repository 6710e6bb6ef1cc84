"""What a message says: the JSON payload stored with it, which the webhook sends as its body
(with the delivery's id) and from which Slack's text, the e-mail and the in-app list are made.

Every string from users or agents (run names, cause signatures, comments) goes in as data;
each channel escapes it for its own format.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse

from evaluations.models import NotifyRule, Project, Run

SCHEMA_VERSION = 1
CAUSES_SHOWN = 3


def absolute(path: str) -> str:
    """A link a receiver can follow: EVALSITE_BASE_URL in front of the site's path."""
    return settings.EVALSITE_BASE_URL.rstrip("/") + path


def compare_url(baseline_id: int, candidate_id: int, cause: int | None = None) -> str:
    query = f"?baseline={baseline_id}&candidate={candidate_id}" + (f"&cause={cause}" if cause else "")
    return absolute(reverse("compare") + query)


def run_label(run: Run) -> str:
    return f"run #{run.pk}" + (f" ({run.name})" if run.name else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def run_item(run: Run, data: dict[str, Any], causes: list[dict[str, Any]],
             baseline: Run | None = None) -> dict[str, Any]:
    """A finished run as an item: its labels, the verdict line, the comparison with its default
    baseline (named as the pages name it, with its branch and eval-set version) and its top
    causes (each with a link to the comparison filtered by it), and the criteria it could not
    score (its notices: never a cause, never a regression)."""
    pass_rate = (run.summary or {}).get("pass_rate")
    regressions, new_causes, baseline_id = data.get("regressions"), data.get("new_causes"), data.get("baseline")
    version = run.evalset_version.number
    said = [f"{run_label(run)} finished"]
    said.append(f"on {run.branch or 'no branch'} (v{version})")
    verdict = " ".join(said) + ": "
    label = data.get("baseline_label") or (f"vs #{baseline_id}" if baseline_id else "")
    if baseline_id and regressions is not None:
        verdict += f"{_plural(regressions, 'regression')} {label}"
        if baseline is not None and baseline.evalset_version.number != version:
            verdict += f" (v{baseline.evalset_version.number})"
        if new_causes is not None:
            verdict += f", {_plural(new_causes, 'new cause')}"
    else:
        verdict += "nothing to compare with"
    if pass_rate is not None:
        verdict += f" · pass rate {pass_rate:.0%}"
    notices = [n for n in data.get("notices") or [] if isinstance(n, dict)]
    if notices:
        verdict += f" · {len(notices)} criteri{'on' if len(notices) == 1 else 'a'} not scored"
    return {
        "type": "run_finished",
        "verdict": verdict,
        "run": {"id": run.pk, "name": run.name, "status": run.status, "branch": run.branch, "model": run.model,
                "evalset": run.evalset_version.evalset.display_name, "evalset_version": version,
                "url": absolute(reverse("run_detail", args=[run.pk]))},
        "pass_rate": pass_rate,
        "regressions": regressions,
        "new_causes": new_causes,
        "baseline": {"id": baseline_id, "url": absolute(reverse("run_detail", args=[baseline_id])),
                     "label": label,
                     "branch": baseline.branch if baseline is not None else None,
                     "model": baseline.model if baseline is not None else None,
                     "evalset_version": baseline.evalset_version.number if baseline is not None else None}
        if baseline_id else None,
        "compare_url": compare_url(baseline_id, run.pk) if baseline_id else None,
        "causes": causes,
        "notices": [{"criterion": n.get("criterion"), "kind": n.get("kind"), "reason": n.get("reason"),
                     "cases": n.get("cases"), "on_baseline": n.get("on_baseline"), "text": n.get("text")}
                    for n in notices],
    }


def monitor_item(rule: NotifyRule, passed: int, total: int, since: str, until: str) -> dict[str, Any]:
    rate = passed / total if total else 0.0
    return {"type": "monitor", "monitor_id": rule.monitor_id, "criterion": rule.criterion, "passed": passed,
            "total": total, "pass_rate": rate, "threshold": rule.threshold, "window_minutes": rule.window_minutes,
            "since": since, "until": until,
            "verdict": f"monitor #{rule.monitor_id}: {rule.criterion} passed {rate:.0%} of {total} "
                       f"in the last {rule.window_minutes} min (below {rule.threshold:.0%})"}


def subject_of(rule: NotifyRule | None, project: Project, items: list[dict[str, Any]]) -> str:
    """One line for the whole message: the only item's verdict, or how many there are."""
    name = rule.name if rule else "test"
    if len(items) == 1:
        return f"[{project.name}] {items[0].get('verdict', name)}"[:300]
    return f"[{project.name}] {name}: {len(items)} alerts"[:300]


def message_payload(*, project: Project, rule: NotifyRule | None, event: str, items: list[dict[str, Any]],
                    recipient: str | None) -> dict[str, Any]:
    return {
        "event": event,
        "project": {"slug": project.slug, "name": project.name},
        "rule": {"id": rule.pk, "name": rule.name} if rule else None,
        "recipient": recipient,
        "subject": subject_of(rule, project, items),
        "items": items,
    }


def webhook_body(payload: dict[str, Any], *, delivery_id: str, created_at: str) -> dict[str, Any]:
    """The webhook's JSON body (docs/notifications.md has its JSON schema)."""
    return {"schema_version": SCHEMA_VERSION, "id": delivery_id, "created_at": created_at, **payload}


def lines_of(payload: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The message as (text, link) lines: what Slack, the e-mail and the in-app list show."""
    out: list[tuple[str, str | None]] = []
    for item in payload.get("items", []):
        kind = item.get("type")
        if kind == "run_finished":
            out.append((item["verdict"], item["compare_url"] or item["run"]["url"]))
            for cause in item.get("causes", []):
                out.append((f"  {_plural(cause['cases'], 'case')}: {cause['signature']}" + (f" ({cause['change']})"
                                                                           if cause.get("change") else ""),
                            cause.get("url")))
            for notice in item.get("notices", []):
                same = {"same": " (the same on the baseline)", "new": " (new)"}.get(notice.get("on_baseline") or "", "")
                out.append((f"  not scored: {notice.get('text') or notice.get('criterion')}{same}", None))
        elif kind in ("triage_assigned", "mention"):
            out.append((item["verdict"], item.get("url")))
            if item.get("excerpt"):
                out.append((f"  “{item['excerpt']}”", None))
        elif kind == "digest":
            out.append((item["verdict"], None))
            for run in item.get("regressed_runs", []):
                out.append((f"  run #{run['id']} {run['name']}: {_plural(run['regressions'], 'regression')}".rstrip(),
                            run.get("url")))
            status = ", ".join(f"{n} {s}" for s, n in sorted(item.get("triage", {}).items()))
            if status:
                out.append((f"  triage: {status}", None))
        else:
            out.append((str(item.get("verdict", "")), item.get("url")))
    return out
