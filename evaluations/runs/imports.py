"""Results import: another tool's results file becomes a completed run of the matching eval set.

Read, one file at a time (the format is recognised by its keys, or by the file itself): ADK,
DeepEval / Confident AI, AgentFlow and UiPath results, Inspect AI eval logs. Each tool's reader is
in `interop/<tool>/results.py` (the registry: `interop/results.py`); what each reads is said there.

Every score is stored as the other tool computed it: its metric name as the criterion, its
score, threshold (`{"lower_limit": t}`, the tool's own value also in the justification), pass/fail
and reason, with `evaluator = "imported:<tool>"`. The run is an uploaded-outputs run tagged
`imported:<tool>` whose target records the tool and file, and whose config lists the tool's metrics
(`options.imported_from`; the threshold where the tool gave one); it is completed through
`run_finish`, so its summary, comparison and exports are those of any run. A case's status is the
tool's own verdict where it gives one. Cases of the eval set the file does not cover are `missing`.

Bad input raises `EvalSetImportError` with file, case, field path and line; nothing is written
(`results_import` is one transaction).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from evaluations.converters import whole_number
from evaluations.evalsets.services import evalset_import
from evaluations.evaluators import get_evaluator_class
from evaluations.interop.base import EvalSetImportError, Problem, SourceFile, format_path, gc_paused, locate, stem
from evaluations.interop.outputs import OutputRow
from evaluations.interop.results import ImportedCase, ParsedResults, Reader, read_results
from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetVersion, Project, Run, Score
from evaluations.runs import services
from evaluations.runs.engine import dumps, executemany
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput

ORIGIN_PREFIX = "imported:"
SCORE_BATCH = 10_000  # score rows inserted together


# --- Writing --------------------------------------------------------------------------------


def _resolve_version(project: Project, parsed: ParsedResults, evalset: EvalSet | None, user: Any) -> EvalSetVersion:
    if evalset is not None:
        if evalset.project_id != project.pk or evalset.latest_version is None:
            raise EvalSetImportError("no_evalset", [Problem("the eval set is not in this project",
                                                            file=parsed.file.name)])
        return evalset.latest_version
    found = None
    if parsed.eval_set_id:
        found = (EvalSet.objects.filter(project=project, eval_set_id=parsed.eval_set_id).first()
                 or EvalSet.objects.filter(project=project, name=parsed.eval_set_id).first())
    if parsed.tool == "adk" and found is not None and found.latest_version is not None:
        return found.latest_version  # ADK's expected invocations are the eval set's cases, as it ran them
    if parsed.carries_cases and parsed.tool == "adk":
        first: dict[str, dict[str, Any]] = {}
        for c in parsed.cases:
            first.setdefault(c.key, c.golden if isinstance(c.golden, dict) else {})
        doc = {"eval_set_id": parsed.eval_set_id or stem(parsed.file.name), "eval_cases": list(first.values())}
        try:
            outcome = evalset_import(project=project, files=[SourceFile(f"{doc['eval_set_id']}.evalset.json",
                                                                        json.dumps(doc).encode())],
                                     format="adk", user=user)
        except EvalSetImportError as exc:
            raise EvalSetImportError(exc.code, [Problem(f"the expected invocations are not an ADK eval set: {p}",
                                                        file=parsed.file.name, case=p.case) for p in exc.problems],
                                     total=exc.total) from None
        return outcome[0].version
    if parsed.evalset_file is not None and not (parsed.evalset_if_missing and found is not None):
        try:
            outcome = evalset_import(project=project, files=[parsed.evalset_file],
                                     format=parsed.evalset_format or parsed.tool, user=user)
        except EvalSetImportError as exc:  # the reader checked each case already: said of the file as a whole
            raise EvalSetImportError(exc.code, [Problem(f"the cases do not make an eval set: {p.message}",
                                                        file=parsed.file.name, case=p.case, path=p.path)
                                                for p in exc.problems], total=exc.total) from None
        return outcome[0].version
    if parsed.carries_cases:
        # The bytes `json.dumps` of the goldens as a list writes, from each one's JSON.
        goldens = ("[" + ", ".join(c.golden if isinstance(c.golden, str) else json.dumps(c.golden)
                                   for c in parsed.cases) + "]").encode()
        for c in parsed.cases:
            c.golden = None  # read again from `goldens`: the parsed test cases need not stay beside them
        name = f"{parsed.eval_set_id or stem(parsed.file.name)}.json"
        try:
            outcome = evalset_import(project=project, files=[SourceFile(name, goldens)], format="deepeval", user=user)
        except EvalSetImportError as exc:  # said of the test cases, where they are in the uploaded file
            raise EvalSetImportError(exc.code, [_in_file(parsed, p) for p in exc.problems], total=exc.total) from None
        return outcome[0].version
    if found is None or found.latest_version is None:
        raise EvalSetImportError("no_evalset", [Problem(
            f"a {parsed.tool} results file does not carry its eval cases, and this project has no eval set "
            f"{parsed.eval_set_id!r}: import the eval set first, or choose one (--evalset / evalset)",
            file=parsed.file.name)])
    return found.latest_version


def _in_file(parsed: ParsedResults, problem: Problem) -> Problem:
    """A problem the goldens reader found in the goldens made of the test cases, placed in the
    results file: `[3].expected_output` -> `testCases[3]`, with the line of that test case."""
    path = problem.path or ""
    index = path[1:path.find("]")] if path.startswith("[") and "]" in path else ""
    number = whole_number(index)
    if number is None or number >= len(parsed.cases):
        return Problem(problem.message, file=parsed.file.name, case=problem.case)
    case = parsed.cases[number]
    field = path[path.find("]") + 1:].lstrip(".")
    text = parsed.located_text()
    located = locate(text, case.path) if text is not None else None
    return Problem(f"{field}: {problem.message}" if field else problem.message, file=parsed.file.name,
                   case=problem.case or case.key, path=format_path(case.path),
                   line=located[0] if located else None, column=located[1] if located else None)


def _match(parsed: ParsedResults, version: EvalSetVersion) -> None:
    """Each case's eval id in `version`: unknown ones are reported with their place in the file."""
    rows = list(EvalCase.objects.in_version(version).values_list("eval_id", "name"))
    ids = {eval_id for eval_id, _ in rows}
    names = Counter(name for _, name in rows if name)
    by_name = {name: eval_id for eval_id, name in rows if name and names[name] == 1}
    reader: Reader | None = None  # made at the first unknown case: the text is decoded again only then
    for case in parsed.cases:
        key = case.key
        if parsed.match_by_name and key in by_name:
            key = by_name[key]
        if key not in ids:
            if reader is None:
                reader = Reader(parsed.file, None, parsed.located_text())
            what = "no case with this name or eval id" if parsed.match_by_name else "no case with this eval id"
            reader.add(case.path, f"{what} in eval set {version.evalset.eval_set_id!r} (version {version.number})",
                       case.key)
            continue
        case.key = key
        if isinstance(case.output, OutputRow):
            if (case.output.eval_id, case.output.iteration) != (key, case.iteration):
                output = AgentOutput.model_validate_json(case.output.json)
                case.output = OutputRow(key, case.iteration, output.model_copy(
                    update={"eval_id": key, "iteration": case.iteration}).model_dump_json(exclude_defaults=True))
        elif case.output is not None:
            case.output = case.output.model_copy(update={"eval_id": key, "iteration": case.iteration})
    if reader is not None:
        reader.fail("unknown_cases")
    twice = [c for c, n in Counter((c.key, c.iteration) for c in parsed.cases).items() if n > 1]
    if twice:
        raise EvalSetImportError("duplicate_outputs", [Problem("two results for one case and iteration",
                                                               file=parsed.file.name, case=k) for k, _ in twice])


def _status(case: ImportedCase) -> str:
    if case.error:
        return CaseResult.Status.ERROR
    if case.not_evaluated:
        return CaseResult.Status.NOT_RUNNABLE
    if case.passed is not None:
        return CaseResult.Status.PASSED if case.passed else CaseResult.Status.FAILED
    if any(s.passed is False for s in case.scores if s.turn_index == -1):
        return CaseResult.Status.FAILED
    return CaseResult.Status.PASSED


def results_import(*, project: Project, file: SourceFile, evalset: EvalSet | None = None, user: Any = None,
                   name: str = "") -> Run:
    """Import one results file as a completed run; all or nothing."""
    parsed = read_results(file)
    # Only a problem needs the text again (to say its line): decoded again then, not held meanwhile.
    parsed.release_text()
    with gc_paused(), transaction.atomic():
        version = _resolve_version(project, parsed, evalset, user)
        _match(parsed, version)
        outputs = [c.output if c.output is not None else AgentOutput(eval_id=c.key, iteration=c.iteration)
                   for c in parsed.cases]
        run = services.run_create(
            project=project, version=version, target_kind=Run.TargetKind.UPLOADED, outputs=outputs,
            target={"imported": parsed.tool, "filename": file.name[:255], "outputs": parsed.carries_outputs,
                    **parsed.details},
            labels={**parsed.labels, "tags": [f"{ORIGIN_PREFIX}{parsed.tool}", *parsed.labels.get("tags", [])]},
            name=name or f"{parsed.tool} results: {file.basename}",
            user=user, enqueue=False,
        )
        del outputs  # stored: the run holds them now
        pending = {(eval_id, iteration): pk for pk, eval_id, iteration in
                   CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
                   .values_list("pk", "case__eval_id", "iteration")}
        now = timezone.now()
        stamp = connection.ops.adapt_datetimefield_value(now)
        results: list[tuple[Any, ...]] = []  # (status, error, latency, tokens, cost, updated_at, pk)
        scores: list[tuple[Any, ...]] = []
        origin = f"{ORIGIN_PREFIX}{parsed.tool}"
        criteria: dict[str, dict[str, Any]] = {}  # the run's config: the tool's metrics, for pages and exports
        score_columns = ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index", "node_name",
                         "score", "raw_value", "passed", "threshold", "justification", "error"]
        for case in parsed.cases:
            pk = pending[(case.key, case.iteration)]
            error = case.error or next((s.error for s in case.scores if s.error), "")
            # What the engine records too; an output kept as its JSON (DeepEval's) reports no usage.
            usage = case.output.usage() if isinstance(case.output, AgentOutput) else None
            results.append((_status(case), error, case.latency, usage and usage.prompt_tokens,
                            usage and usage.completion_tokens, usage and usage.cost_usd, stamp, pk))
            for s in case.scores:
                entry = criteria.setdefault(s.criterion[:100],
                                            {"enabled": True, "options": {"imported_from": parsed.tool}})
                if s.threshold is not None and "threshold" not in entry:
                    entry["threshold"] = s.threshold
                if isinstance(s.justification.get("strict_mode"), bool):
                    entry["options"].setdefault("strict_mode", s.justification["strict_mode"])
                level = Score.Level.CONVERSATION if s.turn_index == -1 else Score.Level.INTERACTION
                scores.append((run.pk, pk, s.criterion[:100], origin, level.value, s.turn_index, "", s.score,
                               s.raw_value, s.passed,
                               dumps({"lower_limit": s.threshold}) if s.threshold is not None else None,
                               dumps(s.justification), s.error))
            case.scores, case.output = [], None  # made into rows: let go as the rows are made
            if len(scores) >= SCORE_BATCH:  # inserted a batch at a time, in order, not held all at once
                executemany(Score, score_columns, scores, json_columns={"threshold", "justification"})
                scores = []
        parsed.cases.clear()
        # Rows as tuples, as the engine writes them (`runs/engine.py`): bulk_update builds a CASE
        # per field per batch, seconds at 10,000 results.
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {CaseResult._meta.db_table} SET status = %s, error = %s, "  # noqa: S608
                               "latency_seconds = %s, prompt_tokens = %s, completion_tokens = %s, cost_usd = %s, "
                               "updated_at = %s WHERE id = %s", results)
        executemany(Score, score_columns, scores, json_columns={"threshold", "justification"})
        statuses, written = Counter(r[0] for r in results), len(results)
        # The file, its cases and their rows let go before the run completes: its completion
        # compares it with the eval set's previous run (`review.completion`), and that, not the
        # reading, was the import's peak (both callers hand the file over, holding no other reference).
        del file, parsed, pending, results, scores
        not_runnable = statuses[CaseResult.Status.NOT_RUNNABLE]
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING, started_at=now, heartbeat_at=now, config={"criteria": criteria},
            criteria_order=list(criteria), cases_done=written - not_runnable,
            cases_not_runnable=run.cases_not_runnable + not_runnable,
            cases_failed=statuses[CaseResult.Status.FAILED], cases_errored=statuses[CaseResult.Status.ERROR],
            cases_unscored=statuses[CaseResult.Status.NOT_FULLY_SCORED])
        services.run_finish(run.pk)
    run.refresh_from_db()
    return run


def rescore_config(run: Run, *, judge: bool = False) -> EvalConfig:
    """The config a rescore of an imported run uses: the eval set's own, plus each imported
    metric evalsite computes itself under the same criterion name and threshold (DeepEval's
    `deepeval_*`), so the two runs compare metric by metric. The metrics that call an LLM
    judge only with `judge` (they cost calls)."""
    config = services.config_for(run.evalset_version)
    added: dict[str, CriterionConfig] = {}
    for name, entry in ((run.config or {}).get("criteria") or {}).items():
        if name in config.criteria or not isinstance(entry, dict):
            continue
        try:
            evaluator = get_evaluator_class(name)
        except KeyError:
            continue  # a metric only the tool computes
        if evaluator.calls_judge and not judge:
            continue
        options = {k: v for k, v in (entry.get("options") or {}).items() if k == "strict_mode"}
        threshold = entry.get("threshold", getattr(evaluator, "default_threshold", None))
        added[name] = CriterionConfig.model_validate(
            {"options": options, **({"threshold": threshold} if isinstance(threshold, int | float) else {})})
    if not added:
        return config
    return config.model_copy(update={"criteria": {**config.criteria, **added}})


def run_rescore(*, run: Run, user: Any = None, judge: bool = False) -> Run:
    """Queue a normal evalsite run on the outputs an imported run holds, for the compare page
    (`rescore_config`: with `judge`, the imported LLM-judged metrics are rescored too)."""
    if not (run.target or {}).get("outputs"):
        raise services.RunError("this run holds no agent outputs to rescore (the results file carried none)")
    outputs = [AgentOutput.model_validate(o) for o in
               CaseResult.objects.filter(run=run).exclude(output=None).order_by("pk").values_list("output", flat=True)]
    return services.run_create(
        config=rescore_config(run, judge=judge),
        project=run.project, version=run.evalset_version, target_kind=Run.TargetKind.UPLOADED, outputs=outputs,
        target={"rescored_from": run.pk}, name=f"{run.name} (rescored by evalsite)"[:255], user=user,
        labels={"model": run.model, "git_commit": run.git_commit, "branch": run.branch,
                "tags": [t for t in run.tags if not str(t).startswith(ORIGIN_PREFIX)]},
    )
