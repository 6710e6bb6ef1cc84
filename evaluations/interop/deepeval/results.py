"""DeepEval / Confident AI results files, read for `results_import` (`interop/results.py` is the registry).

- **DeepEval / Confident AI** test runs (`testCases`, `conversationalTestCases`, also wrapped as
  `.deepeval/.latest_test_run.json` writes them, `{"testRunData": {...}}`; each case with
  `metricsData[]`: `name`, `score`, `threshold`, `success`, `reason`, `error`, ...; snake_case
  too): the test cases carry their inputs, so without a chosen eval set one is created from them
  (as DeepEval goldens: input, expected output, context, expected tools; a conversation's user
  turns and scenario), named after the run's `identifier`, else its `testFile` (`test_rag.py` ->
  `test_rag`), else the file (every `deepeval test run` saves `.latest_test_run.json`). Eval ids
  are derived as for goldens: the test case's `name` when unique, else `golden-<n>`. The same file
  holding only `{"testRunLink": ...}` (what DeepEval leaves once it sent the run to Confident AI)
  is refused as holding no results (`link_only`). A metric evalsite computes as well
  (`interop/deepeval/metrics.py`: `Answer Relevancy` -> `deepeval_answer_relevancy`) is kept
  under that criterion's name, DeepEval's in `justification.deepeval_name`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from evaluations import safejson
from evaluations.interop.base import EvalSetImportError, SourceFile, stem
from evaluations.interop.deepeval.evalset import derive_eval_ids
from evaluations.interop.deepeval.metrics import criterion_for
from evaluations.interop.results import (
    ImportedCase,
    ImportedScore,
    ParsedResults,
    Path,
    Reader,
    ResultsFormat,
    kind,
    sniff,
    unit,
)
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput

_MARKERS = ("testCases", "conversationalTestCases", "test_cases", "conversational_test_cases")

def _deepeval(r: Reader) -> ParsedResults:
    doc = r.doc
    prefix: Path = ()
    if set(doc) == {"testRunLink"}:
        # DeepEval overwrites `.latest_test_run.json` with `{"testRunLink": ...}` once it has sent the run
        # to Confident AI (`save_final_test_run_link`), as real published files show.
        r.add(("testRunLink",), "this DeepEval file holds only the link to the test run on Confident AI "
              f"({str(doc['testRunLink'])[:200]}), not its results: import a test run that holds them "
              "(testCases / conversationalTestCases with metricsData)")
        r.fail("link_only")
    if isinstance(doc.get("testRunData"), dict):
        doc, prefix = doc["testRunData"], ("testRunData",)
    single = _rows(r, doc, "test_cases", prefix)
    multi = _rows(r, doc, "conversational_test_cases", prefix)
    if single and multi:
        r.add((), "a DeepEval test run is single-turn or multi-turn, never both (testCases and "
                  "conversationalTestCases both hold cases)")
    rows = single or multi
    names = [row.name if isinstance(row, _Item) else row.get("name") if isinstance(row.get("name"), str) else None
             for _, row in rows]
    ids = derive_eval_ids([[n.strip() if n else None] for n in names], "golden")
    cases = []
    for (path, item), eval_id in zip(rows, ids, strict=True):
        row = item.load(r.text) if isinstance(item, _Item) else item
        case = ImportedCase(eval_id, path)
        case.passed = r.flag(row, "success", path, eval_id)
        duration = r.number(row, "run_duration", path, eval_id)
        case.latency = duration
        for mpath, metric in r.items(row, "metrics_data", path, eval_id, required=False):
            name = r.text_field(metric, "name", mpath, eval_id)
            value = r.number(metric, "score", mpath, eval_id)
            threshold = r.number(metric, "threshold", mpath, eval_id)
            success = r.flag(metric, "success", mpath, eval_id)
            error = r.get(metric, "error")
            if name is None:
                continue
            justification: dict[str, Any] = {"imported_from": "deepeval", "threshold": threshold}
            for key in ("reason", "strict_mode", "evaluation_model", "evaluation_cost", "verbose_logs"):
                if r.get(metric, key) is not None:
                    justification[key] = r.get(metric, key)
            # A metric evalsite computes too takes its criterion's name, so a rescored run compares
            # with this one metric by metric; a G-Eval keeps its own name (a run may hold several).
            criterion = criterion_for(name)
            if criterion is not None and criterion != "deepeval_g_eval":
                justification["deepeval_name"] = name
                name = criterion
            case.scores.append(ImportedScore(name, value, unit(value), success, threshold, justification,
                                             error=str(error) if error else ""))
        if multi:
            turns = r.get(row, "turns") or []
            if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
                r.add((*path, "turns"), "expected a list of {role, content} objects", eval_id)
                continue
            users = [{"role": "user", "content": t.get("content", "")} for t in turns if t.get("role") == "user"]
            golden: dict[str, Any] = {"name": eval_id, "turns": users}
            for key in ("scenario", "expected_outcome", "user_description", "context"):
                if r.get(row, key) is not None:
                    golden[key] = r.get(row, key)
            if "scenario" not in golden:  # goldens need one; a test case may have none
                golden["scenario"] = f"the conversation of DeepEval test case {eval_id}"
            case.golden = json.dumps(golden)  # its JSON is what the eval set is made of: smaller than the dict
            case.keep_output(AgentOutput(eval_id=eval_id, latency_seconds=duration, turns=_deepeval_turns(turns)))
        else:
            text = r.text_field(row, "input", path, eval_id)
            golden = {"name": eval_id, "input": text or ""}
            for key in ("expected_output", "context", "retrieval_context", "expected_tools"):
                if r.get(row, key) is not None:
                    golden[key] = r.get(row, key)
            case.golden = json.dumps(golden)  # its JSON is what the eval set is made of: smaller than the dict
            # One validation of plain data: building the nested models one by one cost 9 a case.
            calls = _tool_dicts(r.get(row, "tools_called") or r.get(row, "tools_used"))  # older: toolsUsed
            case.keep_output(AgentOutput.model_validate({"eval_id": eval_id, "latency_seconds": duration, "turns": [
                {"final_response": r.get(row, "actual_output"), "tool_calls": calls}]}))
        cases.append(case)
    return ParsedResults("deepeval", r.file, _deepeval_name(r, doc), cases)


def _deepeval_name(r: Reader, doc: dict[str, Any]) -> str:
    """The eval set a test run is created as: its `identifier`, else the test file it ran
    (`testFile`: `evals/test_rag.py` -> `test_rag`), else the file's name. Real runs are all saved
    as `.latest_test_run.json`: named after the file alone, unrelated runs would become versions of
    one eval set `.latest_test_run`."""
    identifier, test_file = r.get(doc, "identifier"), r.get(doc, "test_file")
    if isinstance(identifier, str) and identifier.strip():
        return identifier.strip().replace("/", "_")[:200]
    if isinstance(test_file, str) and stem(test_file.strip()):
        return stem(test_file.strip())[:200]
    return stem(r.file.name).lstrip(".") or "deepeval_test_run"


def _tools(value: Any) -> list[OutputToolCall]:
    return [OutputToolCall.model_validate(call) for call in _tool_dicts(value)]


def _tool_dicts(value: Any) -> list[dict[str, Any]]:
    calls = []
    for tool in value if isinstance(value, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            args = tool.get("inputParameters", tool.get("input_parameters")) or {}
            calls.append({"name": tool["name"], "args": args if isinstance(args, dict) else {"value": args},
                          "result": tool.get("output")})
    return calls


def _deepeval_turns(turns: list[dict[str, Any]]) -> list[TurnOutput]:
    out: list[TurnOutput] = []
    for turn in turns:
        if turn.get("role") == "user":
            out.append(TurnOutput())
        elif turn.get("role") == "assistant":
            if not out:
                out.append(TurnOutput())
            if out[-1].final_response is not None:
                out[-1].intermediate_responses.append(out[-1].final_response)
            out[-1].final_response = turn.get("content")
            out[-1].tool_calls.extend(_tools(turn.get("tools_called", turn.get("toolsCalled"))))
    return out


def _claims(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    if any(m in doc for m in _MARKERS):
        return True
    if isinstance(doc.get("testRunData"), dict) and any(m in doc["testRunData"] for m in _MARKERS):
        return True  # `.deepeval/.latest_test_run.json`: {"testRunData": {...}, "testRunLink": ...}
    return set(doc) == {"testRunLink"}  # the same file once DeepEval sent the run to Confident AI


# --- Reading a large test run case by case ---------------------------------------------------
#
# `json.loads` of a whole test run holds every test case as dicts at once (about four times the
# file), and the cases made of them besides. Instead the document is walked with the same C
# decoder (`raw_decode`, as `json.loads` decodes): its members are decoded as usual, but each
# test case list is read once to find where each case starts (each case decoded, its name kept,
# the rest let go), and each case is decoded again when its turn comes. Anything this walk does
# not take as it is (not an object at the top, too deep, an integer too long, invalid JSON, or
# a document another format claims) is left to the whole parse, whose errors are the ones to say.

_DECODER = json.JSONDecoder()  # what `json.loads` uses: NaN and Infinity accepted, last key wins
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json skips it
_OBJECT_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\n\r]*\{")
_LISTS = frozenset(_MARKERS)


@dataclass(frozen=True, slots=True)
class _Item:
    """A test case not decoded yet: where it starts in the text, and its `name` when a string."""

    start: int
    name: str | None

    def load(self, text: str | None) -> dict[str, Any]:
        assert text is not None  # an _Item only comes from a walk of the text
        row: dict[str, Any] = _DECODER.raw_decode(text, self.start)[0]
        return row


@dataclass
class _Items:
    """A test case list walked once: each entry an `_Item`, or the kind of a value that is not an object."""

    entries: list[_Item | str] = field(default_factory=list)


def _rows(r: Reader, doc: dict[str, Any], snake: str, prefix: Path) -> list[tuple[Path, Any]]:
    """`r.items(..., required=False)`, for a list walked (`_Items`) or decoded whole alike."""
    value = r.get(doc, snake)
    if not isinstance(value, _Items):
        return list(r.items(doc, snake, prefix, required=False))
    where = (*prefix, r.key_of(doc, snake))
    out: list[tuple[Path, Any]] = []
    for index, item in enumerate(value.entries):
        if isinstance(item, _Item):
            out.append(((*where, index), item))
        else:
            r.add((*where, index), f"expected an object, not {item}", None)
    return out


def _space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _walk_object(text: str, pos: int, top: bool) -> tuple[dict[str, Any], int]:
    """The object starting at `pos` (a `{`), its test case lists walked, not decoded; and where it ends."""
    out: dict[str, Any] = {}
    pos = _space(text, pos + 1)
    if text.startswith("}", pos):
        return out, pos + 1
    while True:
        if not text.startswith('"', pos):
            raise ValueError("expected a key")
        key, pos = scanstring(text, pos + 1)
        pos = _space(text, pos)
        if not text.startswith(":", pos):
            raise ValueError("expected a colon")
        pos = _space(text, pos + 1)
        value: Any
        if key in _LISTS and text.startswith("[", pos):
            value, pos = _walk_list(text, pos)
        elif top and key == "testRunData" and text.startswith("{", pos):
            value, pos = _walk_object(text, pos, False)
        else:
            value, pos = _DECODER.raw_decode(text, pos)
        out[key] = value
        pos = _space(text, pos)
        if text.startswith(",", pos):
            pos = _space(text, pos + 1)
        elif text.startswith("}", pos):
            return out, pos + 1
        else:
            raise ValueError("expected , or }")


def _walk_list(text: str, pos: int) -> tuple[_Items, int]:
    items = _Items()
    pos = _space(text, pos + 1)
    if text.startswith("]", pos):
        return items, pos + 1
    while True:
        value, end = _DECODER.raw_decode(text, pos)
        if isinstance(value, dict):
            name = value.get("name")
            items.entries.append(_Item(pos, name if isinstance(name, str) else None))
        else:
            items.entries.append(kind(value))
        del value
        pos = _space(text, end)
        if text.startswith(",", pos):
            pos = _space(text, pos + 1)
        elif text.startswith("]", pos):
            return items, pos + 1
        else:
            raise ValueError("expected , or ]")


def _read_file(file: SourceFile) -> ParsedResults | None:
    """A DeepEval test run read case by case (see above), or None to leave the file to the whole parse."""
    data = file.data
    if not _OBJECT_START.match(data) or not any(m.encode() in data for m in _MARKERS):
        return None
    try:
        safejson.check_depth(data)
        text = file.text
        doc, end = _walk_object(text, _space(text, 0), True)
    except (ValueError, RecursionError, EvalSetImportError):
        return None
    if _space(text, end) != len(text) or sniff(doc) is not results_format:
        return None
    walked = [v for v in (doc, doc.get("testRunData")) if isinstance(v, dict)]
    if not any(isinstance(v, _Items) for d in walked for v in d.values()):
        return None  # nothing was spared: the usual path reads it (and says the same of it)
    reader = Reader(file, doc, text)
    parsed = _deepeval(reader)
    parsed.text = reader.text
    reader.fail()
    return parsed


results_format = ResultsFormat("deepeval", _claims, _deepeval, read_file=_read_file)
