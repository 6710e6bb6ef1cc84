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

`mismatches` also speaks for a pinned or hand-picked baseline: model, eval-set version,
evaluation config and iterations are what make two runs' numbers unlike. A branch is not
among them: comparing a feature branch with the default branch is the ordinary case, and
`branch_difference` says it once, as a fact rather than a warning.

`baseline_label` names the baseline in words wherever a change is shown ("vs #12 · main ·
pinned", "vs #12 · previous on main"), so nobody has to hover to learn what a number is
against (the branch an eval set leads with on home is `runs.listing.default_branch`).
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluations.models import Run

PINNED = "pinned"
LIKE_FOR_LIKE = "same branch, model and eval-set version"
FALLBACK = "latest completed run (none on the same branch, model and eval-set version)"
CHOSEN = "chosen"  # a baseline named in the request, not the default rule's


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


REASON_WORDS = {PINNED: "pinned", LIKE_FOR_LIKE: "previous on", FALLBACK: "latest on"}


def baseline_label(*, baseline_pk: int, baseline_branch: str, reason: str) -> str:
    """The baseline a change is against, in the cell that shows the change:
    `vs #12 · main · pinned`, `vs #12 · previous on main`, `vs #12 · latest on main`
    (the fallback: nothing like for like before it). A hand-picked baseline (any other
    `reason`) is `vs #12 · main · chosen`."""
    branch = baseline_branch or "no branch"
    if reason == PINNED:
        return f"vs #{baseline_pk} · {branch} · pinned"
    if reason in REASON_WORDS:
        return f"vs #{baseline_pk} · {REASON_WORDS[reason]} {branch}"
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

    def __str__(self) -> str:
        return f"{self.text} · {self.warning}" if self.warning else self.text


def baseline_words(*, baseline: Run, candidate: Run, reason: str) -> BaselineLabel:
    """`baseline_label` and `unlike_warning` of two runs (`reason`: PINNED, LIKE_FOR_LIKE,
    FALLBACK or CHOSEN)."""
    return BaselineLabel(baseline_label(baseline_pk=baseline.pk, baseline_branch=baseline.branch, reason=reason),
                         unlike_warning(mismatches(baseline, candidate)))


def reason_for(*, baseline: Run, candidate: Run) -> str:
    """Why a baseline named in a request is one: the eval set's pinned run, else chosen."""
    pinned = candidate.evalset_version.evalset.baseline_run_id
    return PINNED if pinned == baseline.pk else CHOSEN
