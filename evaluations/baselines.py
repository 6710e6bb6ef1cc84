"""Which run a candidate is compared with by default, and how the two differ.

One rule, used by every place that compares without being told the baseline: the compare
page, home's change per eval set, the run page's "N regressions vs #id", the run's own
comparison precomputed when it finishes, the API and the CLI (`comparison.default_baseline`
calls `baseline_for`):

1. the eval set's pinned run (of the candidate's project, not the candidate itself);
2. else the latest completed run created before the candidate on the same branch, with the
   same model and the same eval-set version: a like-for-like comparison;
3. else the latest completed run before the candidate, whatever its labels, so a first run
   on a new branch still has something to compare with. `mismatches` then says what
   differs, and the pages show it as a warning beside the numbers.

`mismatches` also speaks for a pinned or hand-picked baseline: branch, model, eval-set
version, evaluation config and iterations are what make two runs' numbers unlike.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluations.models import Run

PINNED = "pinned"
LIKE_FOR_LIKE = "same branch, model and eval-set version"
FALLBACK = "latest completed run (none on the same branch, model and eval-set version)"


@dataclass(frozen=True)
class BaselineChoice:
    run: Run
    reason: str  # PINNED / LIKE_FOR_LIKE / FALLBACK


def baseline_choice(candidate: Run) -> BaselineChoice | None:
    """The default baseline of `candidate` and why it was chosen; None when there is none.
    At most three queries (the eval set, with its pinned run, is usually loaded already)."""
    evalset = candidate.evalset_version.evalset
    pinned = evalset.baseline_run
    if pinned is not None and pinned.pk != candidate.pk and pinned.project_id == candidate.project_id:
        return BaselineChoice(pinned, PINNED)
    earlier = (Run.objects.filter(evalset_version__evalset_id=evalset.pk, project_id=candidate.project_id,
                                  status=Run.Status.COMPLETED, created_at__lte=candidate.created_at)
               .exclude(pk=candidate.pk).select_related("evalset_version__evalset")
               .order_by("-created_at", "-pk"))
    same = earlier.filter(branch=candidate.branch, model=candidate.model,
                          evalset_version_id=candidate.evalset_version_id).first()
    if same is not None:
        return BaselineChoice(same, LIKE_FOR_LIKE)
    latest = earlier.first()
    return BaselineChoice(latest, FALLBACK) if latest is not None else None


def baseline_for(candidate: Run) -> Run | None:
    choice = baseline_choice(candidate)
    return choice.run if choice is not None else None


def _label(value: str) -> str:
    return value or "(none)"


def mismatches(baseline: Run, candidate: Run) -> list[str]:
    """What differs between two runs that makes their numbers unlike, in words:
    `branch main → feat/x`, `model gpt-4o → claude-3.5`, `eval-set version v1 → v2`,
    `evaluation config`, `iterations 1 → 3`. Empty when they are like for like."""
    found = []
    if baseline.branch != candidate.branch:
        found.append(f"branch {_label(baseline.branch)} → {_label(candidate.branch)}")
    if baseline.model != candidate.model:
        found.append(f"model {_label(baseline.model)} → {_label(candidate.model)}")
    if baseline.evalset_version_id != candidate.evalset_version_id:
        found.append(f"eval-set version v{baseline.evalset_version.number} → v{candidate.evalset_version.number}")
    if baseline.config != candidate.config:
        found.append("evaluation config")
    if baseline.iterations != candidate.iterations:
        found.append(f"iterations {baseline.iterations} → {candidate.iterations}")
    return found


@dataclass(frozen=True)
class BaselineLink:
    """A run against its default baseline, as home and the run page show it: "2 regressions
    vs #7 →" and the pass-rate change, linking to the comparison."""

    candidate_pk: int
    baseline_pk: int
    reason: str
    mismatches: tuple[str, ...]
    regressions: int | None  # None while either run is still going
    improvements: int | None
    pass_rate_delta: float | None  # candidate - baseline, as a fraction

    @property
    def url(self) -> str:
        from django.urls import reverse

        return reverse("compare") + f"?baseline={self.baseline_pk}&candidate={self.candidate_pk}"

    @property
    def delta_points(self) -> int | None:
        return None if self.pass_rate_delta is None else round(self.pass_rate_delta * 100)


def _pass_rate(run: Run) -> float | None:
    from evaluations.selectors_runs import progress_of

    return progress_of(run).pass_rate


def baseline_link(candidate: Run) -> BaselineLink | None:
    """The candidate's default baseline with the comparison's counts (the stored comparison's
    compact columns, computed and stored on first use); None without a baseline."""
    from evaluations.comparison import IMPROVED, REGRESSED, comparison_walk, stored_counts

    choice = baseline_choice(candidate)
    if choice is None:
        return None
    baseline = choice.run
    regressions = improvements = None
    if baseline.is_finished and candidate.is_finished:
        counts = (stored_counts(baseline=baseline, candidate=candidate)  # one small column
                  or comparison_walk(baseline=baseline, candidate=candidate).counts)
        regressions, improvements = counts.get(REGRESSED, 0), counts.get(IMPROVED, 0)
    before, after = _pass_rate(baseline), _pass_rate(candidate)
    return BaselineLink(candidate.pk, baseline.pk, choice.reason, tuple(mismatches(baseline, candidate)),
                        regressions, improvements, None if before is None or after is None else after - before)
