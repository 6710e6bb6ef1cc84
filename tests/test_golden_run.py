"""Speed work changes nothing a user can see: a few hundred varied cases imported from an
ADK file, evaluated twice (a baseline, then a candidate with regressions, errors, missing
outputs, NULs and a second iteration) with six evaluators, give exactly the stored golden —
the imported content, every score, the status counts, the aggregates, the comparison and
every export.

The golden (tests/data/golden/run_golden.json) was written by the code before the speed
work; `EVALSITE_WRITE_GOLDEN=1 python -m pytest tests/test_golden_run.py` rewrites it (only
for a change meant to alter results, said so in its commit).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import random
import re
from typing import Any

import pytest
from django.db import connection

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.models import CaseResult, Comparison, Project, Run, Score, ToolUsage
from evaluations.runs import exports
from evaluations.runs import services as runs
from evaluations.schemas.evalset import EvalConfig
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "data" / "golden" / "run_golden.json"
CASES = 300
ID_KEYS = {"br", "cr", "result", "result_id", "run_id", "baseline_result", "candidate_result"}
# Kept whole in the golden; the rest (scores with their justifications, outputs, the long
# exports) as a digest per case, score or line, so a difference still names where it is.
WHOLE = {"counts", "summary", "export_csv", "comparison"}
# Exports that list a result's scores in the order they were written, which is the order of
# the criteria in the run's stored config: PostgreSQL's jsonb keeps object keys sorted, so
# there they come out in another order. The golden was written on SQLite (the default); on
# PostgreSQL everything else is compared, these are not.
# "export_aggregated" holds the database's averages, whose last bits differ between them.
IN_SCORE_ORDER = {"export_report", "export_metric_records", "export_upsonic", "export_aggregated"}

CRITERIA = {
    "trajectory_match": {"threshold": 0.8, "match_type": "IN_ORDER"},
    "tool_trajectory_avg_score": {"threshold": 1.0},
    "response_match_score": {"threshold": 0.5},
    "exact_match": {"threshold": 1.0},
    "reliability": {"threshold": 1.0},
    "latency_seconds": {"threshold": 4.0},
}
CITIES = ["Tokyo", "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Zürich", "Séoul", "東京"]
TOOLS = ["get_weather", "get_forecast", "search_flights", "book_flight", "get_order", "cancel_order"]


def _adk_file(r: random.Random) -> tuple[dict[str, Any], dict[str, list[tuple[list[dict], str]]]]:
    """An ADK EvalSet of CASES cases (1-3 turns, 0-4 tool calls a turn, nested arguments,
    unicode, a NUL here and there) and, per eval id, each turn's expected calls and answer."""
    cases, expected = [], {}
    for i in range(CASES):
        eval_id = f"case_{i:04d}"
        turns = []
        conversation = []
        for t in range(r.randint(1, 3)):
            city = r.choice(CITIES)
            calls = [{"name": name, "args": {"city": city, "days": r.randint(1, 5),
                                             "options": {"units": r.choice(["metric", "imperial"]),
                                                         "extra": [1, {"deep": r.random() < 0.5}]}}}
                     for name in r.sample(TOOLS, r.randint(0, 4))]
            answer = f"In {city} it will be {r.randint(-5, 35)} degrees; bring a jacket after sunset."
            question = f"Plan turn {t} of my day in {city}"
            if r.random() < 0.03:
                question += " with a NUL \x00 inside"
            if r.random() < 0.03:
                answer += " \x00"
            turns.append((calls, answer))
            conversation.append({
                "invocation_id": f"inv-{i}-{t}",
                "user_content": {"parts": [{"text": question}], "role": "user"},
                "final_response": {"parts": [{"text": answer}], "role": "model"},
                "intermediate_data": {"tool_uses": [{"id": f"call-{i}-{t}-{k}", **c} for k, c in enumerate(calls)]},
                "creation_timestamp": 1747341706.5 + i + t,
            })
        cases.append({"eval_id": eval_id, "conversation": conversation,
                      "session_input": {"app_name": "golden", "user_id": f"u{i % 7}", "state": {"n": i}},
                      "creation_timestamp": 1747341700.0 + i})
        expected[eval_id] = turns
    return {"eval_set_id": "golden_set", "name": "Golden eval set", "eval_cases": cases,
            "creation_timestamp": 1747341700.0}, expected


def _outputs(r: random.Random, expected: dict[str, list[tuple[list[dict], str]]], *, candidate: bool) -> list[dict]:
    outputs = []
    for eval_id, turns in expected.items():
        if candidate and r.random() < 0.04:
            continue  # missing
        out_turns = []
        for t, (calls, answer) in enumerate(turns):
            actual = [{"name": c["name"], "args": json.loads(json.dumps(c["args"]))} for c in calls]
            reply: Any = answer
            if candidate:
                roll = r.random()
                if roll < 0.08 and actual:
                    actual[0]["args"]["city"] = "Nowhere"
                elif roll < 0.14 and actual:
                    actual.pop()
                elif roll < 0.18:
                    actual.reverse()
                elif roll < 0.22:
                    actual.append({"name": "send_email", "args": {"to": "x@example.com"}})
                if r.random() < 0.1:
                    reply = answer.replace("jacket", "umbrella")
                elif r.random() < 0.03:
                    reply = {"structured": answer}
                elif r.random() < 0.03:
                    reply = answer + " \x00 tail"
                if actual and r.random() < 0.05:
                    actual[-1]["error"] = "tool timed out"
            turn: dict[str, Any] = {"invocation_id": f"inv-{eval_id[5:].lstrip('0') or '0'}-{t}",
                                    "final_response": reply, "tool_calls": actual,
                                    "latency_seconds": round(r.uniform(0.1, 3.0), 3)}
            if r.random() < 0.8:
                turn["usage"] = {"prompt_tokens": r.randint(100, 900), "completion_tokens": r.randint(10, 90),
                                 "cost_usd": round(r.uniform(0.0001, 0.002), 6)}
            out_turns.append(turn)
        output: dict[str, Any] = {"eval_id": eval_id, "turns": out_turns}
        if candidate and r.random() < 0.03:
            output = {"eval_id": eval_id, "error": "agent crashed: timeout after 30 s", "turns": []}
        outputs.append(output)
        if candidate and r.random() < 0.1:  # a second iteration for some cases
            outputs.append({**json.loads(json.dumps(output)), "iteration": 1})
    return outputs


def _run(project: Project, version: Any, outputs: list[dict]) -> Run:
    read = read_outputs([SourceFile("outputs.json", json.dumps(outputs).encode())])
    run = runs.run_create(project=project, version=version, target_kind="uploaded", outputs=read,
                          config=EvalConfig.model_validate({"criteria": CRITERIA}), enqueue=False)
    return runs.run_execute_here(run.pk, workers=1)


def _scrub(text: str, run: Run) -> str:
    """Database ids and clock times out of an export."""
    text = re.sub(r"run\d+-score\d+", "run-score", text)
    text = text.replace(f'"report_id": "run-{run.pk}"', '"report_id": "run"')
    text = re.sub(r'"run_id": \d+', '"run_id": 0', text)
    text = re.sub(r'"created_at": "[^"]*"', '"created_at": ""', text)
    return re.sub(r'"duration_seconds": [0-9.e-]+,\n', '"duration_seconds": 0,\n', text)


def _facts(run: Run) -> dict[str, Any]:
    run.refresh_from_db()
    results = list(CaseResult.objects.filter(run=run).order_by("case__position", "iteration").values(
        "pk", "case__eval_id", "iteration", "status", "error", "latency_seconds", "prompt_tokens",
        "completion_tokens", "cost_usd", "output"))
    key = {r.pop("pk"): f"{r['case__eval_id']}#{r['iteration']}" for r in results}
    scores = sorted(
        ({"result": key[s.pop("result_id")], **s} for s in Score.objects.filter(run=run).values(
            "result_id", "criterion", "evaluator", "applies_to", "turn_index", "node_name", "score", "raw_value",
            "passed", "threshold", "justification", "error")),
        key=lambda s: (s["result"], s["criterion"], s["applies_to"], s["turn_index"], s["node_name"]))
    tools = sorted(({"result": key[t.pop("result_id")], **t} for t in ToolUsage.objects.filter(run=run).values(
        "result_id", "tool_name", "node_name", "calls", "failures", "latency_seconds")),
        key=lambda t: (t["result"], t["tool_name"], t["node_name"]))
    counts = {f: getattr(run, f) for f in ("status", "cases_total", "cases_done", "cases_failed", "cases_errored",
                                           "cases_missing", "cases_not_runnable")}
    return {
        "counts": counts,
        "summary": run.summary,
        "results": results,
        "scores": scores,
        "tool_usage": tools,
        "export_report": _scrub("".join(exports.run_report_chunks(run)), run),
        "export_csv": "".join(exports.csv_lines(exports.run_wide_rows(run))),
        "export_metric_records": _scrub("".join(exports.run_metric_records_chunks(run)), run),
        "export_aggregated": [
            {**r, "individual_results": [{**i, "id": ""} for i in r.get("individual_results", [])]}
            for r in exports.run_metric_records(run, aggregated=True)],
        "export_upsonic": _scrub("".join(exports.run_upsonic_chunks(run)), run),
    }


def _comparison(baseline: Run, candidate: Run) -> Any:
    stored = Comparison.objects.filter(baseline=baseline, candidate=candidate).first()
    assert stored is not None, "the candidate's comparison with its baseline was not stored"
    # result ids differ between databases; the eval ids say which case it is
    # What the pages read (the head, a row per case, each criterion's scatter) mirrors the summary.
    from evaluations.review import comparison

    summary = comparison.stored_summary(stored)
    assert summary is not None and stored.summary == {}  # kept in a row of its own
    assert json.loads(stored.head) == json.loads(json.dumps(comparison.head_of(summary)))
    rows = [(position, *row) for position, row in enumerate(stored.case_rows.order_by("position").values_list(
        "eval_id", "status", "baseline_passed", "baseline_repeats", "baseline_outcome", "candidate_passed",
        "candidate_repeats", "candidate_outcome", "baseline_result_id", "candidate_result_id", "scores"))]
    # (the scores' JSON compared as values: PostgreSQL's jsonb keeps the summary's keys in its own order)
    assert [(*row[:-1], json.loads(row[-1])) for row in rows] == [
        (*row[:-1], json.loads(row[-1])) for row in comparison.case_rows_of(summary)]
    expected = {}
    for criterion in summary["points"]:
        groups, scored = comparison.scatter_groups(summary, criterion)
        expected[criterion] = (json.loads(json.dumps(groups)), scored)
    assert {s.criterion: (json.loads(s.points), s.scored) for s in stored.scatters.all()} == expected
    return {"summary": _no_ids(summary), "counts": stored.counts, "version": stored.version,
            "walk": [[status, eval_id] for status, eval_id in rows_walk(stored)]}


def rows_walk(stored: Comparison) -> list[tuple[str, str]]:
    """The comparison's case order as the drill-down walks it: (status, eval_id) by position."""
    return list(stored.case_rows.order_by("position").values_list("status", "eval_id"))


def _no_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: 0 if k in ID_KEYS and isinstance(v, int) else _no_ids(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_no_ids(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _compact(facts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in facts.items():
        if name in WHOLE or not isinstance(value, str | list):
            out[name] = value
        elif isinstance(value, str):  # an export: a digest per line (a case or a record a line)
            out[name] = [_digest(line) for line in value.split("\n")]
        else:  # rows: labelled by their case where they have one
            out[name] = [f"{row.get('result', row.get('case__eval_id', ''))} {_digest(row)}" for row in value]
    return out


def _golden_now(project: Project) -> dict[str, Any]:
    r = random.Random(20261124)
    doc, expected = _adk_file(r)
    [outcome] = evalset_import(project=project, files=[SourceFile("golden.test.json", json.dumps(doc).encode())])
    version = outcome.version
    baseline = _run(project, version, _outputs(r, expected, candidate=False))
    candidate = _run(project, version, _outputs(r, expected, candidate=True))
    return {
        "import": {"format": outcome.variant, "content_hash": version.content_hash, "cases": version.case_count,
                   "turns": version.turn_count, "tool_calls": version.tool_call_count,
                   "native_export": _compact({"text": exports.version_native_text(version)})["text"],
                   "has_replacement": "\ufffd" in exports.version_native_text(version)},
        "baseline": _compact(_facts(baseline)),
        "candidate": _compact(_facts(candidate)),
        "comparison": _comparison(baseline, candidate),
    }


@pytest.mark.django_db
def test_a_run_gives_exactly_the_golden_scores_counts_and_exports(acme: Project) -> None:
    now = json.loads(json.dumps(_golden_now(acme)))  # as JSON would store it
    if os.environ.get("EVALSITE_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    golden = json.loads(GOLDEN.read_text())
    # the data is varied as intended (else the comparison proves little)
    counts = golden["candidate"]["counts"]
    assert counts["cases_failed"] > 20 and counts["cases_errored"] > 0 and counts["cases_missing"] > 0
    assert counts["cases_total"] > CASES  # a second iteration for some cases
    assert golden["import"]["has_replacement"]  # a NUL was replaced
    assert next(csv.reader(io.StringIO(golden["candidate"]["export_csv"])))[0] == "eval_id"
    for part in ("import", "comparison"):
        assert now[part] == golden[part], part
    differ = []
    for run in ("baseline", "candidate"):
        for part in golden[run]:
            if part == "export_csv":  # the criteria's column order is the stored config's (jsonb sorts keys)
                same = _csv_rows(now[run][part]) == _csv_rows(golden[run][part])
            elif part in IN_SCORE_ORDER and connection.vendor != "sqlite":
                continue  # see IN_SCORE_ORDER
            elif part == "summary" and connection.vendor != "sqlite":  # the database's AVG: last bits differ
                same = _close(now[run][part], golden[run][part])
            else:
                same = now[run][part] == golden[run][part]
            if not same:
                differ.append(f"{run} {part}")
    assert not differ


def _close(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-9 relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and bool(a == pytest.approx(b, rel=1e-9))
    return bool(a == b)


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))
