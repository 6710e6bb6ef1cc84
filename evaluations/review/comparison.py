"""Baseline vs candidate: which cases regressed, how the scores and latency moved, and how
sure we can be.

Cases are matched by `eval_id`, so two runs on different versions of an eval set compare
where their cases overlap; a case only the candidate has is `new`, one only the baseline
has is `removed`.

**A case's outcome in one run.** Each result (one per iteration) is a pass, a fail, an
error (`error` and `missing` mean the agent gave no judgeable answer) or unscored (`not
fully scored` and `not_runnable`: a criterion could not be scored, so there is no verdict);
pending results do not count yet. Over a run's repeats a case is `pass` (every repeat
passed), `fail` (none passed, at least one failed), `error` (every repeat errored), `mixed`
(some passed, some failed or errored) or `unscored` (the repeats that did not pass have no
verdict).

**Classification** (`classify`), first rule that applies:

1. only in the candidate: new; only in the baseline: removed;
2. unscored in either run: judged on what both runs scored (`on_what_both_scored`):
   regressed when the candidate failed only criteria that passed in the baseline, improved the
   other way round, errored when the agent errored now; otherwise not fully scored. A
   criterion that could not run (a judge with no model, an evaluator that raised) is the run's
   notice, never itself a regression;
3. mixed outcomes within either run's repeats: flaky. A case that passes sometimes is kept
   apart from new regressions: its flip may be chance, and the review should not walk
   through it as a regression;
4. baseline pass, candidate fail or error: regressed;
5. baseline fail or error, candidate pass: improved;
6. both pass: unchanged-pass; candidate error (baseline not passing): errored;
   otherwise unchanged-fail.

**Statistics per criterion** (conversation-level scores; with repeats, a case's score is
its mean over them and it passes when it passed in more than half of them):

- mean delta (candidate - baseline) over the cases both runs scored, with a 95% paired
  bootstrap percentile interval (2,000 resamples of the cases' deltas, fixed seed, so the
  same runs always give the same interval);
- pass/fail flips: an exact McNemar test, the two-sided binomial test of the discordant
  pairs (b cases went pass -> fail, c went fail -> pass) against p = 1/2.

Wording for people (`verdict.py`, one place for every page): an interval that excludes 0 (or
p < 0.05) over enough cases is "likely real", otherwise "not distinguishable from chance" or,
below `verdict.MIN_CASES`, "too few cases to call"; no difference at all is "no change" /
"no flips".

Computing this over 10,000 paired cases and six criteria takes about a second (the
bootstrap 0.12 s a criterion, reading the runs most of the rest), so `comparison_get` keeps the
result in a `Comparison` row, keyed on both runs' `finished_at`: a retried run finishes
again with a new time and its comparisons are recomputed on the next view.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluations.bulk import insert_rows
from evaluations.locks import exclusive
from evaluations.models import (
    CaseResult,
    Comparison,
    ComparisonCase,
    ComparisonScatter,
    ComparisonSummary,
    Run,
    Score,
)
from evaluations.paging import Counted
from evaluations.review import verdict as verdicts
from evaluations.review.baselines import baseline_for
from evaluations.review.statistics import (  # re-exported: the comparison's vocabulary
    CONFIDENCE,
    ERROR,
    ERRORED,
    FAIL,
    FLAKY,
    IMPROVED,
    MINUS,
    MIXED,
    NEW,
    NO_VERDICT,
    PASS,
    PENDING,
    REGRESSED,
    REMOVED,
    RESAMPLES,
    SEED,
    SEVERITY,
    SIGNIFICANCE,
    STATUSES,
    UNCHANGED_FAIL,
    UNCHANGED_PASS,
    UNSCORED,
    StatusStyle,
    bootstrap_mean_ci,
    bootstrap_means,
    case_outcome,
    classify,
    mcnemar_exact_p,
    percentile,
    result_outcome,
)

logger = logging.getLogger(__name__)

__all__ = [  # what other modules read of the statistics through this one
    "CONFIDENCE", "ERROR", "ERRORED", "FAIL", "FLAKY", "IMPROVED", "MINUS", "MIXED", "NEW", "NO_VERDICT",
    "PASS", "PENDING", "REGRESSED", "REMOVED", "RESAMPLES", "SEED", "SEVERITY", "SIGNIFICANCE", "STATUSES",
    "UNCHANGED_FAIL", "UNCHANGED_PASS", "UNSCORED", "StatusStyle", "bootstrap_mean_ci", "bootstrap_means",
    "case_outcome", "classify", "mcnemar_exact_p", "percentile", "result_outcome"
]

# Bump when the summary's shape or its computation changes: stored comparisons of an older
# version are recomputed on their next view.
# 4: stored with a row per case and a head; 5: criterion verdicts need MIN_CASES; 6: cases not fully
# scored are their own status (issue 41), never regressed or improved
SUMMARY_VERSION = 6

# Above this many points the paired scatter keeps every changed case and a sample of the rest.
SCATTER_MAX_POINTS = 2000
TAGS_SHOWN = 20
LATENCY_QUANTILES = 100  # the ECDF of each run is kept as this many + 1 quantiles


# --- Reading the runs ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultRow:
    pk: int
    eval_id: str
    iteration: int
    status: str
    latency_seconds: float | None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoreRow:
    result_pk: int
    criterion: str
    score: float | None
    passed: bool | None


@dataclass
class RunData:
    """What a comparison needs of one run: a row per result and per conversation score."""

    results: list[ResultRow]
    scores: list[ScoreRow] = field(default_factory=list)


def run_data(run: Run) -> RunData:
    """Two queries, whatever the size of the run; no outputs or justifications are read. Each
    status and criterion name is kept once, not once a row (a run's completion holds both runs')."""
    words: dict[str, str] = {}
    results = [
        ResultRow(pk, eval_id, iteration, words.setdefault(status, status), latency,
                  tuple(str(t) for t in tags or ()))
        for pk, eval_id, iteration, status, latency, tags in CaseResult.objects.filter(run=run)
        .values_list("pk", "case__eval_id", "iteration", "status", "latency_seconds", "case__tags")
        .iterator(chunk_size=5000)
    ]
    scores = [
        ScoreRow(result_pk, words.setdefault(criterion, criterion), score, passed)
        for result_pk, criterion, score, passed in Score.objects.filter(run=run, applies_to=Score.Level.CONVERSATION)
        .values_list("result_id", "criterion", "score", "passed").iterator(chunk_size=5000)
    ]
    return RunData(results, scores)


# --- Computing ----------------------------------------------------------------------------


@dataclass
class _Side:
    """One case in one run."""

    outcomes: list[str] = field(default_factory=list)  # by iteration
    pks: list[int] = field(default_factory=list)  # by iteration, beside `outcomes`
    tags: tuple[str, ...] = ()
    scores: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    passes: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))

    def link_pk(self, prefer_iteration: int | None = None) -> int | None:
        """The result a link opens: the first repeat that did not pass (what a reviewer wants
        to see), else the first; or the given repeat when there is one."""
        if not self.pks:
            return None
        if prefer_iteration is not None and prefer_iteration < len(self.pks):
            return self.pks[prefer_iteration]
        for pk, outcome in zip(self.pks, self.outcomes, strict=True):
            if outcome != PASS:
                return pk
        return self.pks[0]

    def link_iteration(self) -> int | None:
        pk = self.link_pk()
        return None if pk is None else self.pks.index(pk)


def _sides(data: RunData) -> dict[str, _Side]:
    sides: dict[str, _Side] = {}
    by_pk: dict[int, _Side] = {}
    for row in sorted(data.results, key=lambda r: (r.eval_id, r.iteration)):
        outcome = result_outcome(row.status)
        if outcome is None:
            continue
        side = sides.get(row.eval_id)
        if side is None:
            side = sides[row.eval_id] = _Side(tags=row.tags)
        side.outcomes.append(outcome)
        side.pks.append(row.pk)
        by_pk[row.pk] = side
    for score in data.scores:
        side = by_pk.get(score.result_pk)
        if side is None:
            continue
        if score.score is not None and math.isfinite(score.score):
            side.scores[score.criterion].append(score.score)
        if score.passed is not None:
            side.passes[score.criterion].append(score.passed)
    return sides


def _scored(side: _Side) -> set[str]:
    return {name for name, verdicts in side.passes.items() if verdicts}


def _passed(side: _Side) -> set[str]:
    return {name for name, verdicts in side.passes.items() if verdicts and all(verdicts)}


def _failed(side: _Side) -> set[str]:
    return {name for name, verdicts in side.passes.items() if not all(verdicts)}


def on_what_both_scored(before: _Side, after: _Side) -> str:
    """A case without a verdict in one run, judged on the criteria both runs scored: regressed
    when the candidate failed only criteria that passed in the baseline (a judge with no model
    in both runs hides no tool-call regression), improved the other way round, errored when the
    agent errored now; otherwise not fully scored (what failed was not scored on the other side)."""
    was, now = case_outcome(before.outcomes), case_outcome(after.outcomes)
    if was == NO_VERDICT and now == FAIL:
        failing = _failed(after)
        if failing and failing <= _passed(before):
            return REGRESSED
    elif was == FAIL and now == NO_VERDICT:
        failing = _failed(before)
        if failing and failing <= _passed(after):
            return IMPROVED
    elif was == NO_VERDICT and now == ERROR:
        return ERRORED
    return UNSCORED


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _latency(data: RunData) -> dict[str, Any]:
    values = sorted(r.latency_seconds for r in data.results
                    if r.latency_seconds is not None and result_outcome(r.status) is not None)
    return {
        "count": len(values),
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "mean": _mean(values),
        "quantiles": [percentile(values, i / LATENCY_QUANTILES) for i in range(LATENCY_QUANTILES + 1)]
        if values else [],
    }


def _difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _criterion(name: str, cases: list[tuple[str, _Side | None, _Side | None]], resamples: int,
               seed: int) -> tuple[dict[str, Any], list[list[Any]]]:
    deltas: list[float] = []
    before_scores: list[float] = []
    after_scores: list[float] = []
    points: list[list[Any]] = []
    b = c = judged = 0
    for index, (_, before, after) in enumerate(cases):
        if before is None or after is None:
            continue
        x, y = _mean(before.scores.get(name, [])), _mean(after.scores.get(name, []))
        if x is not None and y is not None:
            deltas.append(y - x)
            before_scores.append(x)
            after_scores.append(y)
            points.append([index, round(x, 4), round(y, 4)])
        pb, pa = before.passes.get(name), after.passes.get(name)
        if pb and pa:
            judged += 1
            was, now = sum(pb) * 2 > len(pb), sum(pa) * 2 > len(pa)
            if was and not now:
                b += 1
            elif now and not was:
                c += 1
    interval = bootstrap_mean_ci(deltas, resamples=resamples, seed=seed)
    p_value = mcnemar_exact_p(b, c)
    low, high = interval if interval else (None, None)
    return {
        "name": name,
        "n": len(deltas),
        "baseline_mean": _mean(before_scores),
        "candidate_mean": _mean(after_scores),
        "delta": _mean(deltas),
        "ci_low": low,
        "ci_high": high,
        "verdict": verdicts.mean_change(low, high, deltas, b, c),
        "judged": judged,
        "pass_to_fail": b,
        "fail_to_pass": c,
        "p_value": p_value,
        "flips_verdict": verdicts.flips(b, c, p_value, judged),
    }, points


def _tags(cases: list[tuple[str, _Side | None, _Side | None]]) -> list[dict[str, Any]]:
    # Per tag: baseline passed, judged; candidate passed, judged. Judged = passed + failed,
    # as in the run summary's pass rate: errors and missing outputs are not judged.
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for _, before, after in cases:
        for offset, side in ((0, before), (2, after)):
            if side is None:
                continue
            passed, failed = side.outcomes.count(PASS), side.outcomes.count(FAIL)
            for tag in side.tags:
                totals[tag][offset] += passed
                totals[tag][offset + 1] += passed + failed
    ranked = sorted(totals.items(), key=lambda item: (-(item[1][1] + item[1][3]), item[0]))[:TAGS_SHOWN]
    return [{"tag": tag, "baseline_passed": bp, "baseline_n": bn, "candidate_passed": cp, "candidate_n": cn}
            for tag, (bp, bn, cp, cn) in ranked]


def compare(baseline: RunData, candidate: RunData, *, resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    """The comparison summary (a JSON-ready dict) of two runs' data. Pure: no database."""
    before_sides, after_sides = _sides(baseline), _sides(candidate)
    # A case the candidate has not settled every repeat of is pending, not "removed" or judged
    # on the repeats done so far; the verdict waits for it (`headline`).
    pending = {r.eval_id for r in candidate.results if result_outcome(r.status) is None}
    names = sorted({s.criterion for s in baseline.scores} | {s.criterion for s in candidate.scores})
    before_latency, after_latency = _latency(baseline), _latency(candidate)
    # The rows are in the sides now: let them go before the cases are made (a caller that hands
    # the runs' data over, as a run's completion does, frees them here: both runs' rows at once
    # were the largest part of a completion's memory).
    del baseline, candidate
    rows: list[tuple[str, str, _Side | None, _Side | None]] = []
    for eval_id in before_sides.keys() | after_sides.keys() | pending:
        before, after = before_sides.get(eval_id), after_sides.get(eval_id)
        status = PENDING if eval_id in pending else classify(before.outcomes if before else None,
                                                             after.outcomes if after else None)
        if status == UNSCORED and before is not None and after is not None:
            status = on_what_both_scored(before, after)
        rows.append((eval_id, status, before, after))
    rows.sort(key=lambda row: (SEVERITY[row[1]], row[0]))

    cases: list[dict[str, Any]] = []
    for eval_id, status, before, after in rows:
        iteration = after.link_iteration() if after else None
        cases.append({
            "id": eval_id,
            "s": status,
            # passed repeats / repeats in each run; the results a link opens
            "bp": before.outcomes.count(PASS) if before else None,
            "bn": len(before.outcomes) if before else 0,
            "bo": case_outcome(before.outcomes) if before else None,
            "cp": after.outcomes.count(PASS) if after else None,
            "cn": len(after.outcomes) if after else 0,
            "co": case_outcome(after.outcomes) if after else None,
            "br": before.link_pk(iteration) if before else None,
            "cr": after.link_pk() if after else None,
        })
    paired = [(eval_id, before, after) for eval_id, _, before, after in rows]

    criteria = []
    points: dict[str, list[list[Any]]] = {}
    for name in names:
        stats, points[name] = _criterion(name, paired, resamples, seed)
        criteria.append(stats)

    counts = {key: sum(1 for case in cases if case["s"] == key) for key in STATUSES}
    verdicts.within_header(criteria, counts)
    # The cases the overall verdict is over: both runs judged them, on the criteria both scored
    # (a case not fully scored in a run still counts where those criteria agree).
    judged = sum(1 for _, status, before, after in rows
                 if status not in (NEW, REMOVED, PENDING) and before is not None and after is not None
                 and (status != UNSCORED or bool(_scored(before) & _scored(after))))
    return {
        "version": SUMMARY_VERSION,
        "counts": counts,
        "judged": judged,
        "cases": cases,
        "criteria": criteria,
        "points": points,
        "latency": {
            "baseline": before_latency,
            "candidate": after_latency,
            "delta_p50": _difference(after_latency["p50"], before_latency["p50"]),
            "delta_p95": _difference(after_latency["p95"], before_latency["p95"]),
        },
        "tags": _tags(paired),
        "resamples": resamples,
        "confidence": CONFIDENCE,
    }


# --- Cache --------------------------------------------------------------------------------


def _stored(baseline: Run, candidate: Run, *fields: str, **annotations: Any) -> Comparison | None:
    """The stored comparison of two finished runs if it is still current, loading `fields`
    (and `annotations`, as attributes)."""
    stored = (Comparison.objects.filter(baseline=baseline, candidate=candidate)
              .only("version", "computed_at", "baseline_finished_at", "candidate_finished_at", *fields)
              .annotate(**annotations).first())
    if (stored is not None and stored.version == SUMMARY_VERSION
            and stored.baseline_finished_at == baseline.finished_at
            and stored.candidate_finished_at == candidate.finished_at):
        return stored
    return None


def comparison_get(*, baseline: Run, candidate: Run) -> dict[str, Any]:
    """The comparison summary of two runs: stored, or computed and stored.

    A stored comparison is used while both runs' `finished_at` are what they were when it was
    computed; a run that is still going is compared afresh each time and not stored (its
    numbers are still moving). Concurrent first views compute it once: the others wait
    for the pair's lock (`evaluations.locks`) and read what the first stored."""
    cacheable = baseline.is_finished and candidate.is_finished
    if not cacheable:
        return compare(run_data(baseline), run_data(candidate))
    found = _stored_summary(baseline, candidate)
    if found is not None:
        return found
    # Many first views at once (a link posted to the team): one computes, the others wait
    # for the lock and then read what it stored.
    with exclusive("comparison", baseline.pk, candidate.pk):
        found = _stored_summary(baseline, candidate)
        if found is not None:
            return found
        summary = compare(run_data(baseline), run_data(candidate))
        comparison_store(baseline=baseline, candidate=candidate, summary=summary)
        logger.info("comparison computed: run %s vs run %s", baseline.pk, candidate.pk)
    return summary


def _stored_summary(baseline: Run, candidate: Run) -> dict[str, Any] | None:
    stored = _stored(baseline, candidate)
    if stored is None:
        return None
    return stored_summary(stored)


def stored_summary(stored: Comparison) -> dict[str, Any] | None:
    """The whole summary of a stored comparison (kept in a row of its own)."""
    found = ComparisonSummary.objects.filter(comparison=stored).values_list("summary", flat=True).first()
    return found if isinstance(found, dict) and found else None


def comparison_store(*, baseline: Run, candidate: Run, summary: dict[str, Any]) -> None:
    """Keep the summary of two finished runs, valid while their `finished_at` stay these: the
    summary itself (the API, the CSV and the N-way page read it whole), its head, a row per
    case and each criterion's scatter (what the pages read, a page at a time)."""
    with contextlib.suppress(IntegrityError), transaction.atomic():  # a concurrent view stored the pair first
        stored, _ = Comparison.objects.update_or_create(
            baseline=baseline, candidate=candidate,
            defaults={"summary": {}, "computed_at": timezone.now(),
                      "baseline_finished_at": baseline.finished_at,
                      "candidate_finished_at": candidate.finished_at,
                      "version": SUMMARY_VERSION, "counts": summary["counts"], "walk": "",
                      "head": _compact(head_of(summary))},
        )
        ComparisonSummary.objects.update_or_create(comparison=stored, defaults={"summary": summary})
        ComparisonCase.objects.filter(comparison=stored).delete()
        ComparisonScatter.objects.filter(comparison=stored).delete()
        insert_rows(ComparisonCase, ["comparison_id", *_CASE_FIELDS],
                    [(stored.pk, *row) for row in case_rows_of(summary)])
        scatters = []
        for criterion in summary["points"]:
            groups, scored = scatter_groups(summary, criterion)
            scatters.append((stored.pk, criterion, _compact(groups), scored))
        insert_rows(ComparisonScatter, ["comparison_id", "criterion", "points", "scored"], scatters)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# The summary's case entry keys and the ComparisonCase fields that hold them.
_CASE_KEYS = {"id": "eval_id", "s": "status", "bp": "baseline_passed", "bn": "baseline_repeats",
              "bo": "baseline_outcome", "cp": "candidate_passed", "cn": "candidate_repeats",
              "co": "candidate_outcome", "br": "baseline_result_id", "cr": "candidate_result_id"}
_CASE_FIELDS = ("position", *_CASE_KEYS.values(), "scores")


def head_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary less its cases and points, plus what the page needs of those: how many
    cases, and how many regressions failed in every repeat of several."""
    head = {key: value for key, value in summary.items() if key not in ("cases", "points")}
    head["total"] = len(summary["cases"])
    head["regressed_repeated"] = sum(1 for case in summary["cases"] if case["s"] == REGRESSED and case["cn"] >= 2)
    return head


def total_of(summary: dict[str, Any]) -> int:
    """How many cases a summary or a head has."""
    return summary["total"] if "total" in summary else len(summary["cases"])


def _case_scores(summary: dict[str, Any]) -> list[dict[str, list[float]]]:
    """Per case (by index): {criterion: [baseline, candidate]}."""
    out: list[dict[str, list[float]]] = [{} for _ in summary["cases"]]
    for criterion, points in summary["points"].items():
        for index, x, y in points:
            out[index][criterion] = [x, y]
    return out


def case_rows_of(summary: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The ComparisonCase rows of a summary (`_CASE_FIELDS`, without the comparison)."""
    scores = _case_scores(summary)
    return [(position, *(case[key] for key in _CASE_KEYS), _compact(scores[position]))
            for position, case in enumerate(summary["cases"])]


def scatter_groups(summary: dict[str, Any], criterion: str) -> tuple[list[list[Any]], int]:
    """The paired scatter of one criterion, grouped: cases with the same scores and status are
    one point (an unchanged 10,000-case run is mostly one dot at 1, 1) standing for how many
    there are, named by its first case. Cases only the baseline has are left out (no result
    to open). Past `SCATTER_MAX_POINTS` points every moved case is kept and the unchanged ones
    are taken in order. ([[x, y, status, eval_id, candidate result id, count], ...], how many
    cases have both scores)."""
    cases = summary["cases"]
    points = summary["points"].get(criterion, [])
    groups: dict[tuple[float, float, str], list[Any]] = {}
    for index, x, y in sorted(points):
        case = cases[index]
        if case["cr"] is not None:
            group = groups.get((x, y, case["s"]))
            if group is None:
                groups[(x, y, case["s"])] = [x, y, case["s"], case["id"], case["cr"], 1]
            else:
                group[5] += 1
    keys = list(groups)
    if len(keys) > SCATTER_MAX_POINTS:
        moved = [k for k in keys if k[0] != k[1] or k[2] != UNCHANGED_PASS]
        still = [k for k in keys if k[0] == k[1] and k[2] == UNCHANGED_PASS]
        keys = moved + still[:max(0, SCATTER_MAX_POINTS - len(moved))]
    return [groups[k] for k in keys], len(points)




def _raw(row: tuple[Any, ...]) -> dict[str, Any]:
    """A ComparisonCase as values_list(*_CASE_KEYS fields, "scores") into a summary case entry
    (with its scores under "sc")."""
    raw = dict(zip(_CASE_KEYS, row[:-1], strict=True))
    raw["sc"] = json.loads(row[-1])
    return raw


class _Rows:
    """Raw case entries of a filtered ComparisonCase queryset, sliced in the database."""

    def __init__(self, queryset: Any):
        self.queryset = queryset.values_list(*_CASE_KEYS.values(), "scores")

    def count(self) -> int:
        return int(self.queryset.count())

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            return [_raw(row) for row in self.queryset[item]]
        return _raw(self.queryset[item])


@dataclass
class CaseSource:
    """A comparison as the pages read it: `head` (`head_of`) and its cases a page at a time,
    from the stored rows (`comparison_id`) or, for runs still going, from the summary computed
    for this request."""

    head: dict[str, Any]
    comparison_id: int | None = None
    summary: dict[str, Any] | None = None

    def _memory(self) -> list[dict[str, Any]]:
        assert self.summary is not None
        if "_sc" not in self.__dict__:
            scores = _case_scores(self.summary)
            self.__dict__["_sc"] = [{**case, "sc": scores[i]} for i, case in enumerate(self.summary["cases"])]
        return self.__dict__["_sc"]

    def cases(self, status: str, q: str = "", eval_ids: Any = None) -> Any:
        """The case entries with `status` ("all" for every one) whose eval_id contains q (and
        is one of `eval_ids`, a query of `eval_id` values, when given: a cause's cases), in
        the comparison's order: a sliceable sequence with `count()` (for a Paginator)."""
        q = q.strip()
        if self.comparison_id is None:
            folded = q.casefold()
            kept = None if eval_ids is None else {row["eval_id"] for row in eval_ids}
            return [case for case in self._memory() if (status == "all" or case["s"] == status)
                    and (not folded or folded in case["id"].casefold()) and (kept is None or case["id"] in kept)]
        rows = ComparisonCase.objects.filter(comparison_id=self.comparison_id).order_by("position")
        if status != "all":
            rows = rows.filter(status=status)
        if eval_ids is not None:
            rows = rows.filter(eval_id__in=eval_ids)
        if q or eval_ids is not None:
            return _Rows(rows.filter(eval_id__icontains=q) if q else rows)
        known = self.head["total"] if status == "all" else self.head["counts"].get(status, 0)
        return Counted(_Rows(rows), known)

    def first(self, status: str, limit: int) -> list[dict[str, Any]]:
        return list(self.cases(status)[:limit])

    def scatter(self, criterion: str) -> tuple[list[list[Any]], int]:
        """`scatter_groups` of one criterion."""
        if self.comparison_id is None:
            assert self.summary is not None
            return scatter_groups(self.summary, criterion)
        found = (ComparisonScatter.objects.filter(comparison_id=self.comparison_id, criterion=criterion)
                 .values_list("points", "scored").first())
        return (json.loads(found[0]), found[1]) if found else ([], 0)

    def neighbours(self, eval_id: str, status: str, q: str = "") -> Walked:
        """Where a case sits in the filtered list and the candidate results before and after
        it (a removed case has none to open): a few indexed queries for stored rows."""
        if self.comparison_id is None:
            cases = self._memory()
            own = next((case["s"] for case in cases if case["id"] == eval_id), None)
            rows = self.cases(status, q)
            index = next((i for i, case in enumerate(rows) if case["id"] == eval_id), None)
            before = after = None
            if index is not None:
                before = next((c["cr"] for c in reversed(rows[:index]) if c["cr"] is not None), None)
                after = next((c["cr"] for c in rows[index + 1:] if c["cr"] is not None), None)
            return Walked(own, index, len(rows), before, after)
        mine = (ComparisonCase.objects.filter(comparison_id=self.comparison_id, eval_id=eval_id)
                .values_list("position", "status").first())
        listed = ComparisonCase.objects.filter(comparison_id=self.comparison_id)
        if status != "all":
            listed = listed.filter(status=status)
        if q.strip():
            listed = listed.filter(eval_id__icontains=q.strip())
            total = listed.count()
        else:
            total = self.head["total"] if status == "all" else self.head["counts"].get(status, 0)
        if mine is None:
            return Walked(None, None, total, None, None)
        position, own = mine
        index = None
        before = after = None
        if (status == "all" or own == status) and (not q.strip() or q.strip().casefold() in eval_id.casefold()):
            # positions run 0, 1, 2, ... so unfiltered the index is the position itself
            index = position if status == "all" and not q.strip() else listed.filter(position__lt=position).count()
            with_result = listed.filter(candidate_result_id__isnull=False)
            before = (with_result.filter(position__lt=position).order_by("-position")
                      .values_list("candidate_result_id", flat=True).first())
            after = (with_result.filter(position__gt=position).order_by("position")
                     .values_list("candidate_result_id", flat=True).first())
        return Walked(own, index, total, before, after)


def cases_with_status(comparisons: Sequence[Comparison],
                      status: str | Collection[str]) -> dict[int, list[dict[str, Any]]]:
    """Per stored comparison, its case entries with `status` (one, or any of several) in the
    comparison's order (one query over the case rows; a comparison stored before there were
    rows, from its summary)."""
    statuses = {status} if isinstance(status, str) else set(status)
    out: dict[int, list[dict[str, Any]]] = {c.pk: [] for c in comparisons}
    rowed = [c.pk for c in comparisons if c.version >= 4]
    for row in (ComparisonCase.objects.filter(comparison_id__in=rowed, status__in=statuses)
                .order_by("comparison_id", "position").values_list("comparison_id", *_CASE_KEYS.values(), "scores")
                if rowed else []):
        out[row[0]].append(_raw(row[1:]))
    for c in comparisons:
        if c.version < 4:
            out[c.pk] = [case for case in (c.summary or {}).get("cases", []) if case.get("s") in statuses]
    return out


@dataclass(frozen=True)
class Walked:
    """A case in a comparison's filtered list: its own status, its index there (None when the
    filter leaves it out), how many the list holds, and the candidate results either side."""

    status: str | None
    index: int | None
    total: int
    previous: int | None
    next: int | None


def comparison_source(*, baseline: Run, candidate: Run) -> CaseSource:
    """What the pages read of a comparison: for two finished runs the stored head and rows
    (computed and stored on first use; one small query after that), else the summary computed
    for this request."""
    if baseline.is_finished and candidate.is_finished:
        stored = _stored(baseline, candidate, "head")
        if stored is None or not stored.head:
            comparison_get(baseline=baseline, candidate=candidate)  # computes and stores it
            stored = _stored(baseline, candidate, "head")
        if stored is not None and stored.head:
            return CaseSource(json.loads(stored.head), stored.pk)
    summary = compare(run_data(baseline), run_data(candidate))
    return CaseSource(head_of(summary), None, summary)


def eval_ids_with_status(*, baseline: Run, candidate: Run, status: str, limit: int | None = None) -> list[str]:
    """The eval ids of a comparison's cases with `status`, in its order (one query over the
    stored case rows for two finished runs), at most `limit` of them."""
    cases = comparison_source(baseline=baseline, candidate=candidate).cases(status)
    picked = cases[:limit] if limit is not None else cases[:len(cases)]
    return list(dict.fromkeys(case["id"] for case in picked))


def stored_stamp(*, baseline: Run, candidate: Run, **annotations: Any) -> str | None:
    """What identifies the stored comparison of two finished runs while it is current (pages
    derived from it are cached under it), with the values of `annotations` (expressions over
    the comparison row: whatever else such a page shows); None when there is none or the
    runs are still going. One query."""
    if not (baseline.is_finished and candidate.is_finished):
        return None
    stored = _stored(baseline, candidate, **annotations)
    if stored is None:
        return None
    extra = [str(getattr(stored, name)) for name in sorted(annotations)]
    return "@".join([str(stored.pk), str(stored.computed_at.timestamp()), *extra])


def stored_counts(*, baseline: Run, candidate: Run) -> dict[str, int] | None:
    """The status counts of two finished runs' stored comparison while it is current (one
    query, without decoding the summary or the walk); None otherwise."""
    if not (baseline.is_finished and candidate.is_finished):
        return None
    stored = _stored(baseline, candidate, "counts")
    return stored.counts if stored is not None and stored.counts else None


def default_baseline(candidate: Run) -> Run | None:
    """The candidate's default baseline: one rule for every page, the API and the CLI
    (`evaluations.review.baselines`: pinned, else like for like on branch, model and version)."""
    return baseline_for(candidate)


# --- Reading a summary --------------------------------------------------------------------


OUTCOME_WORDS = {PASS: "✓ pass", FAIL: "✗ fail", ERROR: "! error", NO_VERDICT: "? not fully scored"}


def outcome_text(outcome: str | None, passed: int | None, repeats: int) -> str:
    """✓ pass / ✗ fail / ! error, or "2/3 passed" for a case whose repeats disagree."""
    if outcome is None:
        return "—"
    if outcome == MIXED or (repeats > 1 and outcome == PASS):
        return f"{passed}/{repeats} passed"
    return OUTCOME_WORDS[outcome] + (f" \u00d7{repeats}" if repeats > 1 else "")


@dataclass(frozen=True)
class CaseRow:
    eval_id: str
    status: StatusStyle
    baseline_outcome: str  # as text: "✓ pass", "2/3 passed", "—"
    candidate_outcome: str
    baseline_result: int | None
    candidate_result: int | None
    baseline_score: float | None = None
    candidate_score: float | None = None

    @property
    def score_delta(self) -> str:
        delta = _difference(self.candidate_score, self.baseline_score)
        return "—" if delta is None else signed(delta, 3)


def case_row(raw: dict[str, Any], scores: tuple[float, float] | None = None) -> CaseRow:
    return CaseRow(raw["id"], STATUSES[raw["s"]], outcome_text(raw["bo"], raw["bp"], raw["bn"]),
                   outcome_text(raw["co"], raw["cp"], raw["cn"]), raw["br"], raw["cr"], *(scores or (None, None)))


def filter_cases(summary: dict[str, Any], status: str, q: str = "") -> list[dict[str, Any]]:
    """The summary's case entries with `status` ("all" for every one) whose eval_id contains q."""
    q = q.strip().casefold()
    return [case for case in summary["cases"]
            if (status == "all" or case["s"] == status) and (not q or q in case["id"].casefold())]


def csv_rows(summary: dict[str, Any], cases: list[dict[str, Any]]) -> Iterable[list[Any]]:
    """The comparison as a table, one row per case of `cases` (the summary's, maybe filtered):
    status, both outcomes, and per criterion the baseline and candidate scores and their delta."""
    names = [c["name"] for c in summary["criteria"]]
    indices = {id(case): i for i, case in enumerate(summary["cases"])}
    by_criterion = {name: scores_by_case(summary, name) for name in names}
    yield ["eval_id", "status", "baseline_outcome", "candidate_outcome", "baseline_passed", "baseline_repeats",
           "candidate_passed", "candidate_repeats", "baseline_result_id", "candidate_result_id",
           *(f"{name}:{side}" for name in names for side in ("baseline", "candidate", "delta"))]
    for case in cases:
        row: list[Any] = [case["id"], STATUSES[case["s"]].label, case["bo"] or "", case["co"] or "",
                          case["bp"], case["bn"], case["cp"], case["cn"], case["br"], case["cr"]]
        for name in names:
            pair = by_criterion[name].get(indices[id(case)])
            if pair is None:
                row += [None, None, None]
            else:
                row += [pair[0], pair[1], round(pair[1] - pair[0], 4)]
        yield row


def default_filter(counts: dict[str, int]) -> str:
    """Regressions only when there are any: the question a comparison answers first."""
    return REGRESSED if counts.get(REGRESSED) else "all"


def scores_by_case(summary: dict[str, Any], criterion: str) -> dict[int, tuple[float, float]]:
    """Case index -> (baseline, candidate) score for one criterion."""
    return {index: (x, y) for index, x, y in summary["points"].get(criterion, [])}


def lead_criteria(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The criteria the answer names: up to two whose change is likely real, largest first;
    else the one that moved most (saying it could be noise)."""
    moved = sorted((c for c in summary["criteria"] if c["delta"] is not None), key=lambda c: -abs(c["delta"]))
    return [c for c in moved if c["verdict"] == "likely real"][:2] or moved[:1]


def headline(summary: dict[str, Any]) -> str:
    """The one-line answer: "2 regressions, 1 improvement · trajectory_match -0.25 [-0.50,
    0.00] · too few cases to call the overall change (n = 8); n≈24 would be needed · p95
    latency +1.4 s" (with real minus signs)."""
    counts = summary["counts"]
    if counts.get(PENDING):
        so_far = (f"{counts.get(REGRESSED, 0)} regression{'' if counts.get(REGRESSED, 0) == 1 else 's'} and "
                  f"{counts.get(IMPROVED, 0)} improvement{'' if counts.get(IMPROVED, 0) == 1 else 's'} so far")
        return (f"The candidate is still running: {counts[PENDING]:,} of {total_of(summary):,} cases pending; "
                f"the verdict waits until it finishes ({so_far})")
    parts = [f"{counts.get(REGRESSED, 0)} regression{'' if counts.get(REGRESSED, 0) == 1 else 's'}, "
             f"{counts.get(IMPROVED, 0)} improvement{'' if counts.get(IMPROVED, 0) == 1 else 's'}"
             + "".join(f", {counts[key]} {STATUSES[key].label}" for key in (ERRORED, FLAKY, UNSCORED)
                       if counts.get(key))]
    for c in lead_criteria(summary):
        parts.append(f"{c['name']} {signed(c['delta'])} [{signed(c['ci_low'], sign=False)}, "
                     f"{signed(c['ci_high'], sign=False)}]")
    # One wording for the one question "is the overall change real?" (evaluations.review.verdict);
    # whether each case's flip reproduces is said beside the case.
    parts.append(verdicts.overall(counts, total_of(summary), summary.get("judged")))
    delta_p95 = summary["latency"]["delta_p95"]
    if delta_p95 is not None:
        parts.append(f"p95 latency {signed_seconds(delta_p95)}")
    return " · ".join(parts)


def signed(value: float | None, digits: int = 2, *, sign: bool = True) -> str:
    """+0.08 / -0.08 (with a real minus sign), or — for no value."""
    if value is None:
        return "—"
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return ("±" if sign else "") + text
    if value < 0:
        return MINUS + text
    return ("+" if sign else "") + text


def signed_seconds(value: float | None) -> str:
    """+1.4 s / -52 ms / +99 µs (a real minus sign): two significant digits in the unit that
    fits, as the charts show them."""
    from evaluations.units import fmt_duration, fmt_seconds

    if value is None:
        return "—"
    if float(fmt_seconds(abs(value))) == 0:
        return "±0 s"
    return (MINUS if value < 0 else "+") + fmt_duration(abs(value))


def statuses_in(summary: dict[str, Any]) -> Iterable[tuple[StatusStyle, int]]:
    return ((style, summary["counts"].get(key, 0)) for key, style in STATUSES.items())
