"""Which run a candidate is compared with by default, and how the two differ.

One rule, used by every place that compares without being told the baseline: the compare
page, home's change per eval set, the run page's "N regressions vs #id", the drill-down, the
run's own comparison precomputed when it finishes (and so the activity feed and the
notifications), the API and the CLI (`comparison.default_baseline` calls `baseline_for`):

1. the eval set's pinned run (of the candidate's project, not the candidate itself);
2. else the previous completed run on the candidate's **own branch**: the latest created
   before it with the same model and eval-set version (like for like), else the latest there
   whatever its model or version (`mismatches` then says what differs, as a warning);
3. else, on a branch with no earlier run, the latest completed run before the candidate on
   the eval set's **default branch** (`runs.listing.default_branch`: the pinned run's branch,
   else main, else the most used), like for like first, and the label says so: "vs #4 ·
   latest on main (no earlier run on feat/x)";
4. else none: a first run on the default branch has nothing to compare with. A run of
   another feature branch is never a default baseline.

`mismatches` also speaks for a pinned or hand-picked baseline: model, eval-set version,
evaluation config and iterations are what make two runs' numbers unlike. A branch is not
among them: comparing a feature branch with the default branch is the ordinary case, and
`branch_difference` says it once, as a fact rather than a warning.

`baseline_label` names the baseline in words wherever a change is shown ("vs #12 · main ·
pinned", "vs #12 · previous on main"), so nobody has to hover to learn what a number is
against. A baseline named in a request that is the default one anyway keeps the default's
words (`reason_for`): the run page's "vs #4 · previous on main" and the compare page it opens
say the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, Count, IntegerField, QuerySet, Value, When

from evaluations.models import Run
from evaluations.runs.listing import default_branch

PINNED = "pinned"
LIKE_FOR_LIKE = "previous"  # the previous run on the branch, same model and eval-set version
SAME_BRANCH = "previous_unlike"  # the previous run on the branch, another model or eval-set version
FALLBACK = "default_branch"  # no earlier run on the branch: the default branch's latest
CHOSEN = "chosen"  # a baseline named in the request, not the default rule's


@dataclass(frozen=True)
class BaselineChoice:
    run: Run
    reason: str  # PINNED / LIKE_FOR_LIKE / SAME_BRANCH / FALLBACK


def _earlier(candidate: Run) -> QuerySet[Run]:
    evalset_id = candidate.evalset_version.evalset_id
    return (Run.objects.filter(evalset_version__evalset_id=evalset_id, project_id=candidate.project_id,
                               status=Run.Status.COMPLETED, created_at__lte=candidate.created_at)
            .exclude(pk=candidate.pk).select_related("evalset_version__evalset").order_by("-created_at", "-pk"))


def _latest(earlier: QuerySet[Run], candidate: Run, branch: str | None = None) -> Run | None:
    """The latest of `earlier` on `branch` (any branch when None, the candidate's own first),
    like for like (model, version) first: one query."""
    like = Case(When(model=candidate.model, evalset_version_id=candidate.evalset_version_id, then=Value(0)),
                default=Value(1), output_field=IntegerField())
    if branch is not None:
        return earlier.filter(branch=branch).alias(unlike=like).order_by("unlike", "-created_at", "-pk").first()
    elsewhere = Case(When(branch=candidate.branch, then=Value(0)), default=Value(1), output_field=IntegerField())
    return earlier.alias(elsewhere=elsewhere, unlike=like).order_by("elsewhere", "unlike", "-created_at", "-pk").first()


def baseline_choice(candidate: Run) -> BaselineChoice | None:
    """The default baseline of `candidate` and why it was chosen; None when there is none.
    One query (the eval set, with its pinned run, is usually loaded already); two more for the
    first run of a feature branch, to find the default branch's."""
    evalset = candidate.evalset_version.evalset
    pinned = evalset.baseline_run
    if pinned is not None and pinned.pk != candidate.pk and pinned.project_id == candidate.project_id:
        return BaselineChoice(pinned, PINNED)
    earlier = _earlier(candidate)
    found = _latest(earlier, candidate)
    if found is None:
        return None
    if found.branch == candidate.branch:
        like = found.model == candidate.model and found.evalset_version_id == candidate.evalset_version_id
        return BaselineChoice(found, LIKE_FOR_LIKE if like else SAME_BRANCH)
    counts = dict(Run.objects.filter(evalset_version__evalset_id=evalset.pk, project_id=candidate.project_id)
                  .order_by().values_list("branch").annotate(n=Count("pk")).values_list("branch", "n"))
    main = default_branch(pinned_branch=pinned.branch if pinned is not None else None, run_counts=counts)
    if main == candidate.branch:
        return None  # the first run of the default branch: another branch's run is no baseline
    if found.branch != main:
        found = _latest(earlier, candidate, main)
    return BaselineChoice(found, FALLBACK) if found is not None else None


def baseline_for(candidate: Run) -> Run | None:
    choice = baseline_choice(candidate)
    return choice.run if choice is not None else None


def _label(value: str) -> str:
    return value or "(none)"


def mismatches(baseline: Run, candidate: Run) -> list[str]:
    """What differs between two runs that makes their numbers unlike, in words:
    `model gpt-4o → claude-3.5`, `eval-set version v1 → v2`, `evaluation config`,
    `iterations 1 → 3`. Empty when they are like for like (whatever their branches)."""
    found = []
    if baseline.model != candidate.model:
        found.append(f"model {_label(baseline.model)} → {_label(candidate.model)}")
    if baseline.evalset_version_id != candidate.evalset_version_id:
        found.append(f"eval-set version v{baseline.evalset_version.number} → v{candidate.evalset_version.number}")
    if baseline.config != candidate.config:
        found.append("evaluation config")
    if baseline.iterations != candidate.iterations:
        found.append(f"iterations {baseline.iterations} → {candidate.iterations}")
    return found


def branch_difference(baseline: Run, candidate: Run) -> str:
    """`feat/x compared with main`, or "" on the same branch: said once, not as a warning."""
    if baseline.branch == candidate.branch:
        return ""
    return f"{_label(candidate.branch)} compared with {_label(baseline.branch)}"


def baseline_label(*, baseline_pk: int, baseline_branch: str, reason: str, candidate_branch: str | None = None) -> str:
    """The baseline a change is against, in the cell that shows the change:
    `vs #12 · main · pinned`, `vs #12 · previous on main` (the run before on the candidate's
    branch), `vs #12 · latest on main (no earlier run on feat/x)` (a branch's first run
    against the default branch). A hand-picked baseline (any other `reason`) is
    `vs #12 · main · chosen`."""
    branch = baseline_branch or "no branch"
    if reason == PINNED:
        return f"vs #{baseline_pk} · {branch} · pinned"
    if reason in (LIKE_FOR_LIKE, SAME_BRANCH):
        return f"vs #{baseline_pk} · previous on {branch}"
    if reason == FALLBACK:
        own = f" (no earlier run on {candidate_branch or 'no branch'})" if candidate_branch is not None else ""
        return f"vs #{baseline_pk} · latest on {branch}{own}"
    return f"vs #{baseline_pk} · {branch} · chosen"


def unlike_warning(found: list[str] | tuple[str, ...]) -> str:
    """`⚠ not like for like: model a → b · iterations 1 → 2`, or "" when nothing differs
    that matters (`mismatches`)."""
    return "⚠ not like for like: " + " · ".join(found) if found else ""


@dataclass(frozen=True)
class BaselineLabel:
    """What a change is measured against, in the words every page shows beside it (home, the
    runs list, the run page, the compare header): `text` names the run and why it is the
    baseline, `warning` spells out what makes the two unlike ("" when nothing that matters)."""

    text: str  # "vs #12 · main · pinned", "vs #12 · previous on main"
    warning: str = ""  # "⚠ not like for like: model a → b"
    reason: str = ""  # PINNED, LIKE_FOR_LIKE, SAME_BRANCH, FALLBACK or CHOSEN

    def __str__(self) -> str:
        return f"{self.text} · {self.warning}" if self.warning else self.text


def baseline_words(*, baseline: Run, candidate: Run, reason: str) -> BaselineLabel:
    """`baseline_label` and `unlike_warning` of two runs (`reason`: PINNED, LIKE_FOR_LIKE,
    SAME_BRANCH, FALLBACK or CHOSEN)."""
    return BaselineLabel(baseline_label(baseline_pk=baseline.pk, baseline_branch=baseline.branch, reason=reason,
                                        candidate_branch=candidate.branch),
                         unlike_warning(mismatches(baseline, candidate)), reason)


def reason_for(*, baseline: Run, candidate: Run) -> str:
    """Why a baseline named in a request is one: the eval set's pinned run; the default rule's
    own choice (a link from the run page names it), with the default's reason; else chosen."""
    pinned = candidate.evalset_version.evalset.baseline_run_id
    if pinned == baseline.pk:
        return PINNED
    choice = baseline_choice(candidate)
    return choice.reason if choice is not None and choice.run.pk == baseline.pk else CHOSEN
