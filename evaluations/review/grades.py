"""People's grades of results, and the grading queue.

**A grade** is one person's verdict on one criterion of one result: pass or fail, an
optional score on the automatic score's scale ([0, 1], the drill-down's "Score" column) and a
note. Each grader has one grade per result and criterion; grading again changes it
(`grade_save`). Several people may grade the same result. A criterion can be graded where the
result has a conversation-level score for it (the score people are compared with). Every
new or changed grade is an activity event (`grade.added`, `grade.changed`).

**The grading queue** of a project (`queue_keys`, `queue_page`) lists (result, criterion)
items to grade, in two parts:

1. every *disagreement*: an item whose graders disagree with each other, or one of whose
   grades disagrees with the automatic pass/fail; found by one GROUP BY over the grades;
2. then a *stratified sample* of the automatic scores: per stratum (eval set, criterion,
   automatic pass or fail) the first `PER_STRATUM` scores in a fixed pseudo-random order
   (a multiplicative hash of the score's id and a seed derived from the project: the same
   data gives the same queue), strata interleaved, so a queue shows passes and fails of every
   criterion from the start. One window-function query (ROW_NUMBER per stratum), cached
   under the runs it was drawn from and when they finished. The sample is drawn from each
   eval set's latest completed run, or from the one run the filter names.

A sampled item that is also a disagreement is listed once, among the disagreements. A page
reads its rows with three queries whatever the number of cases.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from evaluations.audit import audit_record
from evaluations.evaluators.base import text_of
from evaluations.evaluators.diffing import ARGS_DIFFER, MATCHED, MISSING, UNEXPECTED, align
from evaluations.models import AuditEvent, CaseResult, HumanGrade, Project, Run, Score
from evaluations.review.causes import criterion_families
from evaluations.review.drilldown import result_output, turn_pairs
from evaluations.review.selectors import trajectory_settings
from evaluations.runs.engine import native_case
from evaluations.runs.exports import CASE_FIELDS

NOTE_MAX_CHARS = 5_000
PER_STRATUM = 10
QUEUE_PER_PAGE = 25
LINE_CHARS = 160
SAMPLE_CACHE_VERSION = 1
SAMPLE_CACHE_SECONDS = 24 * 3600
_HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash; ids stay far from 64-bit overflow
_HASH_MODULUS = 2147483647  # a prime


def conversation_scores() -> QuerySet[Score]:
    """The scores people's grades are compared with: one per result and criterion."""
    return Score.objects.filter(applies_to=Score.Level.CONVERSATION, turn_index=-1, node_name="")


def first_response() -> Any:
    """The result's first final response as text, read by the database (KT cannot cross the
    foreign key)."""
    return KeyTextTransform("final_response", KeyTransform("0", KeyTransform("turns", "result__output")))


def judge_model_expression() -> Any:
    """The model that judged a score (see `evaluations.review.calibration`), "" if none."""
    return Coalesce(
        KT("justification__judge__model"), KT("justification__evaluation_model"), Value(""), output_field=TextField()
    )


def prompt_version_expression() -> Any:
    """The judge's prompt version, "" where none was recorded."""
    return Coalesce(KT("justification__judge__prompt_version"), Value(""), output_field=TextField())


def judged(scores: QuerySet[Score]) -> QuerySet[Score]:
    """The scores an LLM judge gave."""
    return scores.filter(Q(justification__has_key="judge") | Q(justification__has_key="evaluation_model"))


LLM_JUDGED = "llm"
DETERMINISTIC = "deterministic"
KINDS = {LLM_JUDGED: "LLM-judged only", DETERMINISTIC: "deterministic only"}


def by_kind(scores: QuerySet[Score], kind: str) -> QuerySet[Score]:
    """`scores` an LLM judge gave (`LLM_JUDGED`, what the calibration page counts), the others
    (`DETERMINISTIC`), or all ("")."""
    if kind == LLM_JUDGED:
        return judged(scores)
    if kind == DETERMINISTIC:
        return scores.exclude(Q(justification__has_key="judge") | Q(justification__has_key="evaluation_model"))
    return scores


def by_judge(scores: QuerySet[Score], judge_model: str | None, prompt_version: str | None) -> QuerySet[Score]:
    """`scores` of one judge model and/or prompt version (None: any)."""
    if judge_model is None and prompt_version is None:
        return scores
    scores = judged(scores).annotate(judge_model=judge_model_expression(), prompt_version=prompt_version_expression())
    if judge_model is not None:
        scores = scores.filter(judge_model=judge_model)
    if prompt_version is not None:
        scores = scores.filter(prompt_version=prompt_version)
    return scores


# --- Services -----------------------------------------------------------------------------


def parse_verdict(value: Any) -> bool | None:
    """ "pass" / "fail" (and true / false) as a bool; None for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    return {
        "pass": True,
        "passed": True,
        "true": True,
        "1": True,
        "fail": False,
        "failed": False,
        "false": False,
        "0": False,
    }.get(text)


def grade_save(
    *, result: CaseResult, criterion: str, grader: Any, passed: bool, score: float | None = None, note: str = ""
) -> tuple[HumanGrade, bool]:
    """Create or change `grader`'s grade of `criterion` on `result`; returns (grade, created).

    Raises ValidationError (with the field in `error_dict`) for a criterion the result has no
    score for, a score outside [0, 1] or a note that is too long; nothing is written then."""
    errors: dict[str, str] = {}
    if not conversation_scores().filter(result=result, criterion=criterion).exists():
        errors["criterion"] = f"this result has no score for {criterion!r} to grade"
    if score is not None and not (0.0 <= score <= 1.0):  # NaN fails both comparisons
        errors["score"] = "a score is between 0 and 1 (the automatic score's scale)"
    if len(note) > NOTE_MAX_CHARS:
        errors["note"] = f"a note has at most {NOTE_MAX_CHARS} characters"
    if errors:
        raise ValidationError(errors)
    run = result.run
    with transaction.atomic():
        grade = HumanGrade.objects.select_for_update().filter(result=result, criterion=criterion, grader=grader).first()
        created = grade is None
        before = None if grade is None else {"passed": grade.passed, "score": grade.score, "note": grade.note}
        if grade is None:
            grade = HumanGrade(project_id=run.project_id, run=run, result=result, criterion=criterion, grader=grader)
        grade.passed, grade.score, grade.note = passed, score, note
        grade.updated_at = timezone.now()
        grade.save()
        after = {"passed": passed, "score": score, "note": note}
        if before != after:
            verdict = "pass" if passed else "fail"
            audit_record(
                project=run.project,
                actor=grader,
                verb=AuditEvent.Verb.GRADE_ADDED if created else AuditEvent.Verb.GRADE_CHANGED,
                obj=grade,
                summary=f"graded {criterion} of {result.case.eval_id} in run #{run.pk}: "
                f"{verdict}" + (f" ({score:g})" if score is not None else ""),
                data={"before": before, "after": after, "run": run.pk, "result": result.pk, "criterion": criterion},
            )
    return grade, created


# --- One result's grades (the drill-down) -------------------------------------------------


@dataclass(frozen=True)
class GradeRow:
    pk: int
    grader: str
    grader_id: int
    passed: bool
    score: float | None
    note: str
    updated_at: Any


@dataclass
class CriterionGrades:
    criterion: str
    auto_passed: bool | None
    auto_score: float | None
    grades: list[GradeRow] = field(default_factory=list)
    mine: GradeRow | None = None

    @property
    def disagreement(self) -> bool:
        verdicts = {g.passed for g in self.grades}
        if self.auto_passed is not None:
            verdicts.add(self.auto_passed)
        return len(verdicts) > 1


def _row(grade: HumanGrade) -> GradeRow:
    return GradeRow(
        grade.pk, grade.grader.get_username(), grade.grader_id, grade.passed, grade.score, grade.note, grade.updated_at
    )


def result_grades(*, result: CaseResult, user: Any) -> list[CriterionGrades]:
    """Each gradable criterion of the result, its automatic verdict and everyone's grades."""
    by_criterion = {
        criterion: CriterionGrades(criterion, passed, score)
        for criterion, passed, score in conversation_scores()
        .filter(result=result)
        .order_by("criterion")
        .values_list("criterion", "passed", "score")
    }
    for grade in (
        HumanGrade.objects.filter(result=result).select_related("grader").order_by("criterion", "grader__username")
    ):
        entry = by_criterion.get(grade.criterion)
        if entry is None:
            continue
        row = _row(grade)
        entry.grades.append(row)
        if grade.grader_id == getattr(user, "pk", None):
            entry.mine = row
    return list(by_criterion.values())


# --- The queue ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueScope:
    project: Project
    evalset: int | None = None
    criterion: str = ""
    run: int | None = None
    judge_model: str | None = None  # only items this judge model scored
    prompt_version: str | None = None  # "" for scores with no recorded version
    kind: str = ""  # LLM_JUDGED / DETERMINISTIC / "" for both

    def query(self) -> dict[str, str]:
        """The scope as the queue page's query string."""
        out = {}
        if self.kind:
            out["kind"] = self.kind
        if self.evalset is not None:
            out["evalset"] = str(self.evalset)
        if self.criterion:
            out["criterion"] = self.criterion
        if self.run is not None:
            out["run"] = str(self.run)
        if self.judge_model is not None:
            out["judge_model"] = self.judge_model
        if self.prompt_version is not None:
            out["prompt_version"] = self.prompt_version or "-"
        return out


def _grades_in(scope: QueueScope) -> QuerySet[HumanGrade]:
    grades = HumanGrade.objects.filter(project=scope.project)
    if scope.run is not None:
        grades = grades.filter(run_id=scope.run)
    if scope.evalset is not None:
        grades = grades.filter(run__evalset_version__evalset_id=scope.evalset)
    if scope.criterion:
        grades = grades.filter(criterion=scope.criterion)
    if scope.judge_model is not None or scope.prompt_version is not None or scope.kind:
        scores = by_kind(by_judge(conversation_scores(), scope.judge_model, scope.prompt_version), scope.kind)
        grades = grades.filter(Exists(scores.filter(result_id=OuterRef("result_id"), criterion=OuterRef("criterion"))))
    return grades


def disagreement_keys(scope: QueueScope) -> list[tuple[int, str]]:
    """(result id, criterion) of every graded item people disagree on, or on which a grade
    disagrees with the automatic verdict: one GROUP BY."""
    auto = (
        conversation_scores()
        .filter(result=OuterRef("result_id"), criterion=OuterRef("criterion"))
        .annotate(verdict=Case(When(passed=True, then=1), When(passed=False, then=0), output_field=IntegerField()))
        .values("verdict")[:1]
    )
    rows = (
        _grades_in(scope)
        .values("result_id", "criterion")
        .annotate(
            n=Count("pk"),
            passes=Sum(Case(When(passed=True, then=1), default=0, output_field=IntegerField())),
            auto=Max(Subquery(auto, output_field=IntegerField())),
        )
        .filter(Q(passes__gt=0, passes__lt=F("n")) | Q(auto=1, passes__lt=F("n")) | Q(auto=0, passes__gt=0))
        .order_by("result_id", "criterion")
        .values_list("result_id", "criterion")
    )
    return [(r, c) for r, c in rows]


def sample_runs(scope: QueueScope) -> list[tuple[int, Any]]:
    """The runs the sample is drawn from, with when they finished: the named run, else each
    eval set's latest completed run."""
    runs = Run.objects.filter(project=scope.project, status=Run.Status.COMPLETED)
    if scope.run is not None:
        return list(runs.filter(pk=scope.run).values_list("pk", "finished_at"))
    if scope.evalset is not None:
        runs = runs.filter(evalset_version__evalset_id=scope.evalset)
    latest: dict[int, tuple[int, Any]] = {}
    for pk, evalset, finished_at in runs.order_by("-finished_at", "-pk").values_list(
        "pk", "evalset_version__evalset_id", "finished_at"
    ):
        latest.setdefault(evalset, (pk, finished_at))
    return sorted(latest.values(), key=lambda run: run[0])


def sample_keys(scope: QueueScope, *, per_stratum: int = PER_STRATUM) -> list[tuple[int, str]]:
    """The stratified sample, in queue order: rank within its stratum, then the hash. It
    depends only on the runs (and when they finished) and the filters, so it is cached."""
    runs = sample_runs(scope)
    if not runs:
        return []
    key = (
        "grading-sample:"
        + hashlib.sha256(
            json.dumps(
                [
                    SAMPLE_CACHE_VERSION,
                    scope.project.pk,
                    [(pk, str(at)) for pk, at in runs],
                    scope.criterion,
                    scope.judge_model,
                    scope.prompt_version,
                    scope.kind,
                    per_stratum,
                ]
            ).encode()
        ).hexdigest()
    )
    cached = cache.get(key)
    if cached is not None:
        return [(r, c) for r, c in cached]
    sample = _sample(scope, [pk for pk, _ in runs], per_stratum)
    cache.set(key, sample, timeout=SAMPLE_CACHE_SECONDS)
    return sample


def _sample(scope: QueueScope, run_ids: list[int], per_stratum: int) -> list[tuple[int, str]]:
    seed = (scope.project.pk * 7919) % _HASH_MODULUS
    hashed = ExpressionWrapper(
        (F("pk") * Value(_HASH_MULTIPLIER) + Value(seed)) % Value(_HASH_MODULUS), output_field=BigIntegerField()
    )
    scores = conversation_scores().filter(
        run_id__in=run_ids,
        passed__isnull=False,
        error="",
        result__status__in=(CaseResult.Status.PASSED, CaseResult.Status.FAILED),
    )
    if scope.criterion:
        scores = scores.filter(criterion=scope.criterion)
    scores = by_kind(by_judge(scores, scope.judge_model, scope.prompt_version), scope.kind)
    rows = (
        scores.annotate(
            h=hashed,
            rank=Window(
                RowNumber(),
                partition_by=[F("run__evalset_version__evalset_id"), F("criterion"), F("passed")],
                order_by=[hashed.asc(), F("pk").asc()],
            ),
        )
        .filter(rank__lte=per_stratum)
        .order_by("rank", "h", "pk")
        .values_list("result_id", "criterion")
    )
    return [(r, c) for r, c in rows]


def queue_keys(scope: QueueScope) -> tuple[list[tuple[int, str]], int]:
    """The queue's items in order, and how many of them are disagreements (they come first)."""
    disagreements = disagreement_keys(scope)
    seen = set(disagreements)
    sample = [key for key in sample_keys(scope) if key not in seen]
    return disagreements + sample, len(disagreements)


@dataclass(frozen=True)
class ItemSource:
    """What an item is graded against, for the page to lay out: the result (its output and
    case loaded), the run's config (trajectory settings), the criterion's evaluator group
    ("trajectory" for the tool-call criteria) and the automatic score's justification."""

    result: CaseResult
    config: dict[str, Any]
    family: str
    justification: Any
    score_error: str


@dataclass
class QueueItem:
    position: int  # 1-based in the queue
    result_id: int
    run_id: int
    criterion: str
    eval_id: str
    evalset: str
    status: str
    auto_passed: bool | None
    auto_score: float | None
    line: str
    disagreement: bool
    grades: list[GradeRow] = field(default_factory=list)
    mine: GradeRow | None = None
    source: ItemSource | None = None

    @property
    def key(self) -> str:
        return f"{self.result_id}-{self.criterion}"


@dataclass
class QueuePage:
    items: list[QueueItem]
    total: int
    disagreements: int
    page: int
    pages: int
    per_page: int

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages


def _line(value: Any) -> str:
    if isinstance(value, str) and value.startswith("{"):  # a message object: its text
        try:
            message = json.loads(value)
        except ValueError:
            message = None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            value = message["content"]
    text = " ".join(str(value).split()) if value is not None else ""
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def queue_page(
    scope: QueueScope, *, user: Any, page: int | str | None = 1, per_page: int = QUEUE_PER_PAGE
) -> QueuePage:
    keys, disagreements = queue_keys(scope)
    total = len(keys)
    pages = max(1, -(-total // per_page))
    try:
        number = min(max(1, int(page or 1)), pages)
    except (TypeError, ValueError):
        number = 1
    start = (number - 1) * per_page
    chunk = keys[start : start + per_page]
    items: list[QueueItem] = []
    if chunk:
        wanted = set(chunk)
        result_ids = sorted({r for r, _ in chunk})
        criteria = sorted({c for _, c in chunk})
        found: dict[tuple[int, str], dict[str, Any]] = {}
        for row in (
            _item_scores()
            .filter(result_id__in=result_ids, criterion__in=criteria)
            .values(
                "result_id",
                "run_id",
                "criterion",
                "passed",
                "score",
                "eval_id",
                "status",
                "evalset_id",
                "evalset_name",
                "response",
                "justification",
                "error",
            )
        ):
            key = (row["result_id"], row["criterion"])
            if key in wanted:
                found[key] = row
        grades: dict[tuple[int, str], list[HumanGrade]] = {}
        for grade in (
            HumanGrade.objects.filter(result_id__in=result_ids, criterion__in=criteria)
            .select_related("grader")
            .order_by("grader__username")
        ):
            grades.setdefault((grade.result_id, grade.criterion), []).append(grade)
        results = _results(result_ids)
        for index, key in enumerate(chunk):
            if key not in found:
                continue
            row = found[key]
            rows = [_row(g) for g in grades.get(key, [])]
            items.append(
                QueueItem(
                    position=start + index + 1,
                    result_id=key[0],
                    run_id=row["run_id"],
                    criterion=key[1],
                    eval_id=row["eval_id"],
                    evalset=row["evalset_name"] or row["evalset_id"],
                    status=row["status"],
                    auto_passed=row["passed"],
                    auto_score=row["score"],
                    line=_line(row["response"]),
                    disagreement=start + index < disagreements,
                    grades=rows,
                    mine=next((g for g in rows if g.grader_id == getattr(user, "pk", None)), None),
                    source=_source(results.get(key[0]), row),
                )
            )
    return QueuePage(items, total, disagreements, number, pages, per_page)


def _results(result_ids: list[int]) -> dict[int, CaseResult]:
    """The results of a page with their outputs, cases and runs' configs: one query."""
    return {
        result.pk: result
        for result in CaseResult.objects.filter(pk__in=result_ids)
        .select_related("case", "run")
        .only("pk", "output", "error", "run", "case", "run__config", *(f"case__{name}" for name in CASE_FIELDS))
    }


def _source(result: CaseResult | None, row: dict[str, Any]) -> ItemSource | None:
    if result is None:
        return None
    config = result.run.config or {}
    return ItemSource(
        result=result,
        config=config,
        family=_families(json.dumps(config, sort_keys=True, default=str)).get(row["criterion"], ""),
        justification=row["justification"],
        score_error=row["error"] or "",
    )


def item_turns(source: ItemSource | None) -> list[dict[str, Any]]:
    """The item's turns as the API gives them: the user's message, the expected and actual
    final responses, and the step-aligned calls counted by kind (the page draws them)."""
    if source is None:
        return []
    output, _ = result_output(source.result)
    match_type, rules = trajectory_settings(source.config)
    turns = []
    for invocation, turn in turn_pairs(native_case(source.result.case), output):
        expected = invocation.expected_final_response if invocation else None
        alignment = align(invocation.expected_tool_trajectory if invocation else [],
                          turn.tool_calls if turn else [], match_type, rules)
        turns.append({
            "user": invocation.user_content.get_text() if invocation else None,
            "expected_response": expected.get_text() if expected is not None else None,
            "actual_response": text_of(turn.final_response) if turn and turn.final_response is not None else None,
            "tool_calls": {kind: alignment.count(kind) for kind in (MATCHED, ARGS_DIFFER, MISSING, UNEXPECTED)},
        })
    return turns


@functools.lru_cache(maxsize=64)
def _families(config: str) -> dict[str, str]:
    return criterion_families(json.loads(config))


def _item_scores() -> Any:
    """Conversation-level scores with what a queue item shows beside them: the case, its
    result's status, the eval set and the agent's first response."""
    return conversation_scores().annotate(
        eval_id=F("result__case__eval_id"),
        status=F("result__status"),
        evalset_id=F("run__evalset_version__evalset__eval_set_id"),
        evalset_name=F("run__evalset_version__evalset__name"),
        response=first_response(),
    )


def queue_item(
    scope: QueueScope, *, user: Any, result_id: int, criterion: str, position: int, disagreement: bool
) -> QueueItem | None:
    """One item of the queue again (after it was graded), with its grades as they are now."""
    row = (
        _item_scores()
        .filter(result_id=result_id, criterion=criterion, run__project=scope.project)
        .values("run_id", "passed", "score", "eval_id", "status", "evalset_id", "evalset_name", "response",
                "criterion", "justification", "error")
        .first()
    )
    if row is None:
        return None
    rows = [
        _row(g)
        for g in HumanGrade.objects.filter(result_id=result_id, criterion=criterion)
        .select_related("grader")
        .order_by("grader__username")
    ]
    return QueueItem(
        position=position,
        result_id=result_id,
        run_id=row["run_id"],
        criterion=criterion,
        eval_id=row["eval_id"],
        evalset=row["evalset_name"] or row["evalset_id"],
        status=row["status"],
        auto_passed=row["passed"],
        auto_score=row["score"],
        line=_line(row["response"]),
        # listed among the disagreements, or one now that it was graded
        disagreement=disagreement or len({g.passed for g in rows} | ({row["passed"]} - {None})) > 1,
        grades=rows,
        mine=next((g for g in rows if g.grader_id == getattr(user, "pk", None)), None),
        source=_source(_results([result_id]).get(result_id), row),
    )
