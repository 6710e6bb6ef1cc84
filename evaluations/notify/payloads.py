"""What a message says: the JSON payload stored with it, which the webhook sends as its body
(with the delivery's id) and from which Slack's text, the e-mail and the in-app list are made.

Every string from users or agents (run names, cause signatures, comments) goes in as data;
each channel escapes it for its own format.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.urls import reverse

from evaluations.models import NotifyRule, Project, Run

SCHEMA_VERSION = 1
CAUSES_SHOWN = 3
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: str) -> str:
    """The text with every run of control characters (CR, LF, tab, NUL, C1, the Unicode line
    and paragraph separators) as one space: a name can add no header or line of its own."""
    return _CONTROL.sub(" ", text)


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


PERSONAL_TYPES = ("triage_assigned", "mention")
CASES_NAMED = 5


def _names(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(v for v in values if v))


def personal_summary(items: list[dict[str, Any]]) -> str:
    """What one person's message holds: "alice assigned you 3 cases and mentioned you on 3
    cases: case-1, case-2, case-3" (the cases named once, the first few)."""
    assigned = [i for i in items if i.get("type") == "triage_assigned"]
    mentions = [i for i in items if i.get("type") == "mention"]
    said = []
    by = _names([i.get("by", "") for i in assigned])
    if assigned:
        said.append(f"{by} assigned you {_plural(len(assigned), 'case')}")
    if mentions:
        authors = _names([i.get("author", "") for i in mentions])
        who = "" if assigned and authors == by else f"{authors} "
        said.append(f"{who}mentioned you on {_plural(len(mentions), 'case')}")
    cases = list(dict.fromkeys(str(i.get("eval_id") or "") for i in items if i.get("eval_id")))
    more = len(cases) - CASES_NAMED
    named = ", ".join(cases[:CASES_NAMED]) + (f" and {more} more" if more > 0 else "")
    return " and ".join(said) + (f": {named}" if named else "")


def subject_of(rule: NotifyRule | None, project: Project, items: list[dict[str, Any]]) -> str:
    """One line for the whole message: the only item's verdict, what one person was sent, or
    how many there are."""
    name = rule.name if rule else "test"
    if len(items) == 1:
        return one_line(f"[{project.name}] {items[0].get('verdict', name)}")[:300]
    if items and all(i.get("type") in PERSONAL_TYPES for i in items):
        return one_line(f"[{project.name}] {personal_summary(items)}")[:300]
    return one_line(f"[{project.name}] {name}: {len(items)} alerts")[:300]


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
    """The message as (text, link) lines: what Slack, the e-mail and the in-app list show, each
    one line whatever the names in it hold."""
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
        elif kind in PERSONAL_TYPES:
            continue  # listed together below
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
    out += _personal_lines([i for i in payload.get("items", []) if i.get("type") in PERSONAL_TYPES])
    return [(one_line(text), link) for text, link in out]


def _personal_lines(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Assignments and mentions, grouped: who assigned, or who said what, once, then each case
    (linked). A lone item is its verdict line, as before."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for item in items:
        key = (("assigned", str(item.get("by", "")), str(item.get("assignee", "")), "")
               if item.get("type") == "triage_assigned"
               else ("mention", str(item.get("author", "")), str(item.get("mentioned", "")),
                     str(item.get("excerpt", ""))))
        groups.setdefault(key, []).append(item)
    out: list[tuple[str, str | None]] = []
    for key, group in groups.items():
        if len(group) == 1:
            out.append((group[0]["verdict"], group[0].get("url")))
        elif key[0] == "assigned":
            out.append((f"{key[1]} assigned {_plural(len(group), 'case')} to {key[2]}", None))
        else:
            out.append((f"{key[1]} mentioned @{key[2]} on {_plural(len(group), 'case')}", None))
        if key[0] == "mention" and key[3]:
            out.append((f"  “{key[3]}”", None))
        if len(group) > 1:
            out += [(f"  {i.get('eval_id', '')}", i.get("url")) for i in group]
    return out
