"""Two runs compared through the API: the compare page's numbers, as JSON.

`GET /api/v1/compare/?candidate=<id>[&baseline=<id>|pinned|default][&alpha=0.05][&limit=100]`

Everything comes from the stored comparison (`comparison.comparison_get`), as on the page;
this module only reshapes it. The same payload serves `manage.py eval` in local mode
(`comparison_payload`), so the CLI gates on exactly what the API answers.

**The regression gate** (`gate`): without `alpha`, the candidate regressed when any case
did (passed in the baseline, fails or errors in the candidate). With `alpha`, only when some
criterion got worse beyond chance: more pass -> fail flips than fail -> pass, with the exact
McNemar p-value of the flips below `alpha`. A handful of cases can then flip without
failing the build, which is what a noisy agent needs; a small eval set rarely reaches
significance, so leave `alpha` out there.

**Regressions still open** (`open_regressions`): comparing with the run before keeps no
memory, so a regressed run, once it is the next run's baseline, would make the same failures
read "unchanged fail" and the gate pass. A case that regressed in an earlier run on the
candidate's branch and still fails in the candidate keeps failing the gate until it passes
again on the branch or a person accepts it: triaged "expected change" or "flaky", or a run
that fails it pinned as the baseline (`triage.open_regressions`). With `alpha` they count as
pass -> fail flips of the case outcome beside the candidate's own regressions.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.errors import ApiError, ErrorSerializer, problem
from evaluations.api.serializers import CausesSerializer
from evaluations.api.serializers.runs import NoticeSerializer
from evaluations.converters import MAX_ID, parse_id
from evaluations.models import Run, Triage
from evaluations.review import baselines, comparison, triage
from evaluations.review import causes as cause_reads
from evaluations.review.notices import compared_notices
from evaluations.runs import selectors as selectors_runs

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
PINNED = "pinned"
DEFAULT = "default"  # the same as no baseline: `evaluations.review.baselines`, as the pages choose


class CompareError(ValueError):
    """Two runs that cannot be compared: a 400 with code `no_baseline` (nothing to compare
    with: no pinned run, or no earlier one) or `not_comparable` (the candidate itself, or
    another eval set's run)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def runs_visible_to(user: Any) -> QuerySet[Run]:
    return selectors_runs.runs_visible_to(user).select_related("project", "evalset_version__evalset__baseline_run")


def resolve_baseline(candidate: Run, ref: str | None, runs: QuerySet[Run]) -> Run:
    """The baseline a reference names: a run id (of the candidate's project, else a 404 from
    the caller's `runs`), `pinned` (the eval set's pinned run), or nothing (the page's
    default: `evaluations.review.baselines`, the pinned run, else the previous one on its branch).

    Raises CompareError for a baseline that exists but cannot be compared."""
    evalset = candidate.evalset_version.evalset
    if ref == PINNED:
        baseline = evalset.baseline_run
        if baseline is None or baseline.project_id != candidate.project_id:
            raise CompareError("no_baseline", f"eval set {evalset.eval_set_id!r} has no pinned baseline run")
    elif ref and ref != DEFAULT:
        ref_pk = parse_id(ref)
        if ref_pk is None:
            raise CompareError("invalid", "give a run id or `pinned`")
        baseline = get_object_or_404(runs, pk=ref_pk, project=candidate.project_id)
    else:  # none, or DEFAULT
        found = comparison.default_baseline(candidate)
        if found is None:
            raise CompareError("no_baseline", f"no baseline: eval set {evalset.eval_set_id!r} has no pinned run, "
                                           f"no earlier completed run on {candidate.branch or 'no branch'} and "
                                           "none on its default branch")
        baseline = found
    if baseline.pk == candidate.pk:
        raise CompareError("not_comparable", "the baseline is the candidate itself: choose another run")
    if baseline.evalset_version.evalset_id != evalset.pk:
        raise CompareError("not_comparable", f"run {baseline.pk} is of eval set "
                                       f"{baseline.evalset_version.evalset.eval_set_id!r}, run {candidate.pk} of "
                                       f"{evalset.eval_set_id!r}: compare runs of the same eval set")
    return baseline


def gate(summary: dict[str, Any], alpha: float | None, still_open: int = 0, branch: str = "") -> dict[str, Any]:
    """Did the candidate regress? See the module docstring for the rule. `still_open` counts
    the regressions of earlier runs on the branch that the candidate still fails
    (`triage.open_regressions`): they keep failing the gate until fixed or accepted."""
    regressed_cases = summary["counts"].get(comparison.REGRESSED, 0)
    where = f"on {branch}" if branch else "without a branch"
    open_text = (f"{still_open} regression{'' if still_open == 1 else 's'} of earlier runs {where} "
                 f"still open" if still_open else "")
    if alpha is None:
        failed = regressed_cases > 0 or still_open > 0
        reason = (f"{regressed_cases} case{'' if regressed_cases == 1 else 's'} regressed" if regressed_cases
                  else "no case regressed")
        return {"alpha": None, "regressed": failed, "criteria": [], "open_regressions": still_open,
                "reason": reason + (f", {open_text}" if still_open else "")}
    worse = [c["name"] for c in summary["criteria"]
             if c["pass_to_fail"] > c["fail_to_pass"] and c["p_value"] < alpha]
    # The open regressions count as pass -> fail flips of the case outcome, with this run's own.
    improved = summary["counts"].get(comparison.IMPROVED, 0)
    open_p = comparison.mcnemar_exact_p(regressed_cases + still_open, improved) if still_open else 1.0
    open_worse = still_open > 0 and regressed_cases + still_open > improved and open_p < alpha
    if worse:
        reason = "significantly worse (McNemar p < {:g}): {}".format(alpha, ", ".join(
            f"{c['name']} {c['pass_to_fail']} pass->fail vs {c['fail_to_pass']} fail->pass, p={c['p_value']:.3g}"
            for c in summary["criteria"] if c["name"] in worse))
    elif open_worse:
        reason = (f"significantly worse (McNemar p < {alpha:g}) with the open regressions: {open_text}, "
                  f"{regressed_cases} new, {improved} improved, p={open_p:.3g}")
    else:
        reason = (f"no criterion significantly worse at alpha {alpha:g} "
                  f"({regressed_cases} case{'' if regressed_cases == 1 else 's'} regressed"
                  + (f", {open_text}" if still_open else "") + ")")
    return {"alpha": alpha, "regressed": bool(worse) or open_worse, "criteria": worse,
            "open_regressions": still_open, "reason": reason}


def verdict(summary: dict[str, Any], gated: dict[str, Any]) -> str:
    if gated["regressed"]:
        return "regressed"
    counts = summary["counts"]
    if counts.get(comparison.IMPROVED, 0) and not counts.get(comparison.REGRESSED, 0):
        return "improved"
    if counts.get(comparison.REGRESSED, 0) or counts.get(comparison.IMPROVED, 0):
        return "mixed"
    return "unchanged"


def _run_brief(run: Run, absolute: Any) -> dict[str, Any]:
    return {
        "id": run.pk, "name": run.name, "status": run.status, "model": run.model, "branch": run.branch,
        "git_commit": run.git_commit, "evalset": run.evalset_version.evalset_id,
        "evalset_version": run.evalset_version.number, "finished_at": run.finished_at,
        "url": absolute(reverse("run_detail", args=[run.pk])),
    }


def _cases(summary: dict[str, Any], status: str, limit: int, scores: dict[str, dict[int, tuple[float, float]]],
           indices: dict[int, int], baseline: Run, candidate: Run, absolute: Any) -> dict[str, Any]:
    from evaluations.review.selectors import Walk, case_link

    matching = comparison.filter_cases(summary, status)
    walk = Walk(baseline.pk, candidate.pk, status, "")
    results = []
    for raw in matching[:limit]:
        row = comparison.case_row(raw)
        index = indices[id(raw)]
        link = case_link(row, baseline, candidate, walk)
        results.append({
            "eval_id": raw["id"], "status": raw["s"],
            "baseline_outcome": raw["bo"], "baseline_passed": raw["bp"], "baseline_repeats": raw["bn"],
            "candidate_outcome": raw["co"], "candidate_passed": raw["cp"], "candidate_repeats": raw["cn"],
            "baseline_result": raw["br"], "candidate_result": raw["cr"],
            "scores": {name: {"baseline": by_case[index][0], "candidate": by_case[index][1]}
                       for name, by_case in scores.items() if index in by_case},
            "url": absolute(link) if link else None,
        })
    return {"count": len(matching), "results": results}


def _open(found: list[triage.OpenRegression], limit: int, absolute: Any) -> dict[str, Any]:
    return {"count": len(found), "results": [{
        "eval_id": item.eval_id, "regressed_in": item.regressed_in, "regressed_against": item.regressed_against,
        "candidate_outcome": item.candidate_outcome, "triage": item.triage,
        "compare_url": absolute(reverse("compare") + "?" + urlencode(
            {"baseline": item.regressed_against, "candidate": item.regressed_in})),
    } for item in found[:limit]]}


def comparison_payload(*, baseline: Run, candidate: Run, alpha: float | None = None, limit: int = DEFAULT_LIMIT,
                       absolute: Any = None) -> dict[str, Any]:
    """The API's comparison body. `absolute` turns a site path into a URL (the request's
    `build_absolute_uri`); without it links stay paths (local mode)."""
    absolute = absolute or (lambda path: path)
    summary = comparison.comparison_get(baseline=baseline, candidate=candidate)
    still_open = triage.open_regressions(baseline=baseline, candidate=candidate, cases=summary["cases"])
    gated = gate(summary, alpha, len(still_open), candidate.branch)
    scores = {c["name"]: comparison.scores_by_case(summary, c["name"]) for c in summary["criteria"]}
    indices = {id(case): i for i, case in enumerate(summary["cases"])}
    latency = summary["latency"]
    before, after = latency["baseline"], latency["candidate"]
    stats = ("count", "p50", "p95", "mean")
    compare_path = reverse("compare") + "?" + urlencode({"baseline": baseline.pk, "candidate": candidate.pk})
    return {
        "baseline": _run_brief(baseline, absolute),
        "candidate": _run_brief(candidate, absolute),
        "live": not (baseline.is_finished and candidate.is_finished),
        "headline": comparison.headline(summary),
        "verdict": verdict(summary, gated),
        "gate": gated,
        "counts": {key: summary["counts"].get(key, 0) for key in comparison.STATUSES},
        "total_cases": len(summary["cases"]),
        "criteria": summary["criteria"],
        "latency": {
            "baseline": {k: before.get(k) for k in stats},
            "candidate": {k: after.get(k) for k in stats},
            "delta_p50": latency["delta_p50"],
            "delta_p95": latency["delta_p95"],
            "delta_mean": None if before.get("mean") is None or after.get("mean") is None
            else after["mean"] - before["mean"],
        },
        "tags": summary["tags"],
        "regressions": _cases(summary, comparison.REGRESSED, limit, scores, indices, baseline, candidate, absolute),
        "improvements": _cases(summary, comparison.IMPROVED, limit, scores, indices, baseline, candidate, absolute),
        "open_regressions": _open(still_open, limit, absolute),
        "confidence": summary["confidence"],
        "resamples": summary["resamples"],
        "compare_url": absolute(compare_path),
        "causes": causes_payload(cause_reads.compared_causes(baseline=baseline, candidate=candidate,
                                                             limit=CAUSES_LIMIT)),
        # criteria that could not be scored: the run's set-up, said once (never a cause or a regression)
        "notices": [n.as_dict() for n in compared_notices(baseline=baseline, candidate=candidate)],
        "baseline_named": _named(baseline, candidate),
    }


def _named(baseline: Run, candidate: Run) -> dict[str, str]:
    """The baseline in the pages' words (`baselines.baseline_words`)."""
    reason = baselines.reason_for(baseline=baseline, candidate=candidate)
    words = baselines.baseline_words(baseline=baseline, candidate=candidate, reason=reason)
    return {"reason": reason, "text": words.text, "warning": words.warning,
            "branch_note": baselines.branch_difference(baseline, candidate)}


CAUSES_LIMIT = 50


def causes_payload(found: cause_reads.RunCauses | None) -> dict[str, Any] | None:
    """A run's or a comparison's causes as the API gives them (None while a run is going)."""
    if found is None:
        return None
    return {"failing_cases": found.failing_cases, "total": found.total, "items": [row.as_dict() for row in found.rows]}


# --- Shapes, for the schema ----------------------------------------------------------------------


class CompareQuerySerializer(serializers.Serializer):
    candidate = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="the candidate run's id")
    baseline = serializers.RegexField(
        r"^(\d{1,18}|pinned|default)$", required=False,
        error_messages={"invalid": "give a run id, `pinned` or `default`"},
        help_text="a run id of the same eval set, `pinned` (the eval set's pinned run) or `default` (the same as "
                  "leaving it out): the pinned run, else the previous completed run on the candidate's branch "
                  "(the same model and eval-set version first), else, on a branch with no earlier run, the "
                  "latest completed run on the eval set's default branch (as on the compare page)")
    alpha = serializers.FloatField(required=False, min_value=1e-12, max_value=0.5,
                                   help_text="significance level of the regression gate (see `gate`)")
    limit = serializers.IntegerField(required=False, default=DEFAULT_LIMIT, min_value=0, max_value=MAX_LIMIT,
                                     help_text="cases listed in `regressions` and `improvements`")


class CompareRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=Run.Status.choices)
    model = serializers.CharField(allow_blank=True)
    branch = serializers.CharField(allow_blank=True)
    git_commit = serializers.CharField(allow_blank=True)
    evalset = serializers.IntegerField()
    evalset_version = serializers.IntegerField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.URLField(help_text="the run's page")


class GateSerializer(serializers.Serializer):
    alpha = serializers.FloatField(allow_null=True)
    regressed = serializers.BooleanField(help_text="what `manage.py eval --fail-on-regression` fails on")
    criteria = serializers.ListField(child=serializers.CharField(),
                                     help_text="criteria significantly worse at `alpha` (empty without it)")
    open_regressions = serializers.IntegerField(
        help_text="regressions of earlier runs on the candidate's branch that it still fails (see "
                  "`open_regressions`); without `alpha` any of them fails the gate")
    reason = serializers.CharField()


class CriterionDeltaSerializer(serializers.Serializer):
    name = serializers.CharField()
    n = serializers.IntegerField(help_text="cases both runs scored")
    baseline_mean = serializers.FloatField(allow_null=True)
    candidate_mean = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(allow_null=True, help_text="mean of the paired deltas (candidate - baseline)")
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField(help_text="likely real / not distinguishable from chance across N cases / "
                                    "too few cases to call (n = N; 6 or more needed) / no change / "
                                    "not enough data (evaluations/review/verdict.py)")
    judged = serializers.IntegerField()
    pass_to_fail = serializers.IntegerField()
    fail_to_pass = serializers.IntegerField()
    p_value = serializers.FloatField(help_text="exact McNemar test of the pass/fail flips")
    flips_verdict = serializers.CharField(help_text="likely real / not distinguishable from chance across N cases / "
                                          "too few cases to call (...) / no flips")


class LatencyStatsSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)


class LatencyMoveSerializer(serializers.Serializer):
    baseline = LatencyStatsSerializer()
    candidate = LatencyStatsSerializer()
    delta_p50 = serializers.FloatField(allow_null=True)
    delta_p95 = serializers.FloatField(allow_null=True)
    delta_mean = serializers.FloatField(allow_null=True)


class TagPassRateSerializer(serializers.Serializer):
    tag = serializers.CharField()
    baseline_passed = serializers.IntegerField()
    baseline_n = serializers.IntegerField()
    candidate_passed = serializers.IntegerField()
    candidate_n = serializers.IntegerField()


class ScorePairSerializer(serializers.Serializer):
    baseline = serializers.FloatField()
    candidate = serializers.FloatField()


OUTCOMES = [comparison.PASS, comparison.FAIL, comparison.ERROR, comparison.MIXED, comparison.NO_VERDICT]


class CompareCaseSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    status = serializers.ChoiceField(choices=list(comparison.STATUSES))
    baseline_outcome = serializers.ChoiceField(choices=OUTCOMES, allow_null=True)
    baseline_passed = serializers.IntegerField(allow_null=True, help_text="repeats that passed")
    baseline_repeats = serializers.IntegerField()
    candidate_outcome = serializers.ChoiceField(choices=OUTCOMES, allow_null=True)
    candidate_passed = serializers.IntegerField(allow_null=True)
    candidate_repeats = serializers.IntegerField()
    baseline_result = serializers.IntegerField(allow_null=True)
    candidate_result = serializers.IntegerField(allow_null=True)
    scores = serializers.DictField(child=ScorePairSerializer(), help_text="per criterion")
    url = serializers.URLField(allow_null=True, help_text="the case's drill-down page")


class OpenRegressionSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    regressed_in = serializers.IntegerField(help_text="the earlier run on the branch the regression landed in")
    regressed_against = serializers.IntegerField(help_text="the baseline it regressed against there")
    candidate_outcome = serializers.ChoiceField(choices=OUTCOMES, help_text="the case in the candidate")
    triage = serializers.ChoiceField(choices=Triage.Status.choices, allow_null=True,
                                     help_text="its triage on the branch (open or confirmed: not accepted)")
    compare_url = serializers.URLField(help_text="the comparison it regressed in")


class OpenRegressionListSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="all of them; `results` holds the first `limit`")
    results = OpenRegressionSerializer(many=True)


class CaseListSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="all such cases; `results` holds the first `limit`")
    results = CompareCaseSerializer(many=True)


# Cases per comparison status; two statuses ("unchanged-pass", ...) are not Python names.
CountsSerializer = type("CountsSerializer", (serializers.Serializer,),
                        {key: serializers.IntegerField() for key in comparison.STATUSES})


class BaselineNamedSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=["pinned", "previous", "previous_unlike", "default_branch", "chosen"],
                                     help_text="why this run is the baseline (evaluations/review/baselines.py)")
    text = serializers.CharField(help_text="`vs #12 · previous on main`, as every page says it")
    warning = serializers.CharField(allow_blank=True, help_text="what makes the two runs unlike, or empty")
    branch_note = serializers.CharField(allow_blank=True, help_text="`feat/x compared with main`, or empty")


class ComparisonSerializer(serializers.Serializer):
    baseline = CompareRunSerializer()
    candidate = CompareRunSerializer()
    live = serializers.BooleanField(help_text="a run is still going: computed afresh, not stored")
    headline = serializers.CharField(help_text="the compare page's one-line answer")
    verdict = serializers.ChoiceField(choices=["regressed", "improved", "mixed", "unchanged"])
    gate = GateSerializer()
    counts = CountsSerializer(help_text="cases per comparison status")
    total_cases = serializers.IntegerField()
    criteria = CriterionDeltaSerializer(many=True)
    latency = LatencyMoveSerializer()
    tags = TagPassRateSerializer(many=True)
    regressions = CaseListSerializer()
    improvements = CaseListSerializer()
    open_regressions = OpenRegressionListSerializer(
        help_text="cases that regressed in an earlier run on the candidate's branch and still fail in the "
                  "candidate, neither fixed since nor accepted (triaged expected or flaky, or failing in the "
                  "pinned run): they keep failing the gate though the baseline fails them too")
    confidence = serializers.FloatField()
    resamples = serializers.IntegerField()
    compare_url = serializers.URLField(help_text="the compare page")
    causes = CausesSerializer(allow_null=True, help_text="the candidate's failures grouped by cause, each new, "
                                                         "grown, shrunk or the same against the baseline's, then "
                                                         "the baseline's that are gone; null while a run is going")
    notices = NoticeSerializer(many=True, help_text="criteria the candidate could not score (not runnable, or "
                                                    "their evaluator errored), each `same` or `new` against the "
                                                    "baseline: never a cause, never counted as a regression")
    baseline_named = BaselineNamedSerializer(help_text="the baseline in the pages' words")




ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="bad parameters, or runs that cannot be compared "
                                                      "(different eval sets, no baseline)"),
    401: OpenApiResponse(ErrorSerializer, description="no or invalid token"),
    403: OpenApiResponse(ErrorSerializer, description="not allowed"),
    404: OpenApiResponse(ErrorSerializer, description="no such run in your projects"),
}


class CompareView(APIView):
    @extend_schema(
        operation_id="compare_runs",
        summary="Compare a candidate run with a baseline",
        description=(
            "The compare page's numbers as JSON: cases per status, per-criterion mean deltas with their "
            "bootstrap interval and the McNemar test of the pass/fail flips, latency movement, the "
            "regressions and improvements (the first `limit` of each, with their counts), and links to the "
            "pages.\n\n"
            "`gate` is what `manage.py eval --fail-on-regression` fails on: without `alpha`, any regressed "
            "case (passed in the baseline, fails or errors in the candidate); with `alpha`, only a criterion "
            "with more pass -> fail than fail -> pass flips at McNemar p < `alpha`. Regressions that landed in "
            "earlier runs on the candidate's branch and that it still fails (`open_regressions`) keep failing the "
            "gate until the case passes again or someone accepts it (triage: expected change or flaky; or pin a "
            "baseline that fails it).\n\n"
            "Both runs must be of the same eval set (400 `not_comparable`); 400 `no_baseline` when there is "
            "no baseline to compare with."
        ),
        parameters=[CompareQuerySerializer],
        responses={200: ComparisonSerializer, **ERRORS},
        tags=["comparisons"],
    )
    def get(self, request: Request) -> Response:
        query = CompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        runs = runs_visible_to(request.user)
        candidate = get_object_or_404(runs, pk=params["candidate"])
        try:
            baseline = resolve_baseline(candidate, params.get("baseline"), runs)
        except CompareError as exc:
            raise ApiError(400, exc.code, str(exc), [problem(str(exc), "baseline")]) from None
        return Response(comparison_payload(baseline=baseline, candidate=candidate, alpha=params.get("alpha"),
                                           limit=params["limit"], absolute=request.build_absolute_uri))
