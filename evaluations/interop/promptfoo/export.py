"""promptfoo's eval-set writer: a version as a `promptfooconfig.yaml` (tests with their vars and
assertions), inverting `interop/promptfoo/evalset.py`; `evalsets/exports.py` reads every export
back with it.

The suite's prompts, providers and other settings come back from the eval set's metadata; each
case becomes a test: its name the description, its vars, and its criteria as the assertions
(a type's assertions in the order of their keys, `promptfoo_contains` before
`promptfoo_contains_2`, so they come back under the same keys). A `defaultTest`'s vars and
assertions were merged into every test at import and are written there. What a promptfoo test
cannot hold (expected responses, tool trajectories, tags, a user turn that is not the prompt
rendered with the vars) is a loss, and the export is refused.
"""

from __future__ import annotations

import re
from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.promptfoo.assertions import criterion_key
from evaluations.interop.promptfoo.evalset import derive_ids, suite_id
from evaluations.interop.promptfoo.js import dump_yaml
from evaluations.interop.writing import EvalSetWriter, Header, Loss, safe_name

_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")


def _ordered(criteria: dict[str, Any]) -> list[dict[str, Any]]:
    """The assertions, each type's in the order of its keys' numbers."""
    def rank(key: str) -> tuple[str, int]:
        value = criteria[key]
        kind = criterion_key(value["type"]) if isinstance(value, dict) and isinstance(value.get("type"), str) else key
        match = _SUFFIX.match(key[len(kind):] if key.startswith(kind) else "")
        number = int(match.group(2)) if match and match.group(2) else 1
        return kind, number
    firsts: dict[str, int] = {}
    for position, key in enumerate(criteria):
        firsts.setdefault(rank(key)[0], position)
    return [criteria[k] for k in sorted(criteria, key=lambda k: (firsts[rank(k)[0]], rank(k)[1]))]


def _test(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    eid = case["eval_id"]
    for key, message in (("tags", "promptfoo tests have no tags"), ("rubrics", "promptfoo tests have no rubrics"),
                         ("session_input", "promptfoo tests have no session input"),
                         ("conversation_scenario", "promptfoo tests have no conversation scenario")):
        if case.get(key):
            losses.append(Loss(eid, key, message))
    if case.get("description"):
        losses.append(Loss(eid, "description", "a promptfoo test has one description: the case's name"))
    if len(case["conversation"]) != 1:
        losses.append(Loss(eid, "conversation", f"a promptfoo test is one prompt (this case has "
                                                f"{len(case['conversation'])} turns)"))
    else:
        turn = case["conversation"][0]
        for key in ("expected_tool_trajectory", "expected_intermediate_responses", "rubrics", "metadata"):
            if turn.get(key):
                losses.append(Loss(eid, f"conversation[0].{key}", "a promptfoo test has none (its assertions say "
                                                                  "what is expected)"))
        if turn.get("expected_final_response") is not None:
            losses.append(Loss(eid, "conversation[0].expected_final_response",
                               "a promptfoo test has no expected response: say it with an `equals` assertion"))
    metadata = dict(case.get("metadata") or {})
    meta = metadata.pop("promptfoo", None)
    meta = dict(meta) if isinstance(meta, dict) else {}
    for key in metadata:
        losses.append(Loss(eid, f"metadata.{key}", "a promptfoo test keeps only its own fields"))
    test: dict[str, Any] = {}
    if case.get("name"):
        test["description"] = case["name"]
    test["vars"] = meta.get("vars") or {}
    asserts = _ordered(case.get("criteria") or {})
    if asserts:
        test["assert"] = asserts
    rest = meta.get("test")
    if isinstance(rest, dict):
        test.update({k: v for k, v in rest.items() if k not in test})
    if meta.get("csv_columns"):
        losses.append(Loss(eid, "metadata.promptfoo.csv_columns", "CSV columns promptfoo reads otherwise "
                                                                  "(__config, __metric, __providerOutput)"))
    return test


def write(header: Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    suite: dict[str, Any] = {}
    if header.name:
        suite["description"] = header.name
    if header.description:
        losses.append(Loss(None, "description", "a promptfoo config has one description: the eval set's name"))
    metadata = dict(header.metadata or {})
    stored = metadata.pop("promptfoo", None)
    for key in metadata:
        losses.append(Loss(None, f"metadata.{key}", "a promptfoo config keeps only its own settings"))
    stored = dict(stored) if isinstance(stored, dict) else {}
    default = stored.pop("defaultTest", None)
    suite.update(stored)
    if default:
        suite["defaultTest"] = default
    tests = [_test(case, losses) for case in cases]
    expected_ids = derive_ids([t.get("description") for t in tests])
    for case, eval_id in zip(cases, expected_ids, strict=True):
        if case["eval_id"] != eval_id:
            losses.append(Loss(case["eval_id"], "eval_id", f"a promptfoo test's id is its description when unique, "
                                                           f"else its position: it would come back as {eval_id!r}"))
    suite["tests"] = tests
    name = safe_name(header.eval_set_id)
    # The name the reader takes the id from: `<id>.promptfooconfig.yaml`, or a lone config whose
    # description is the id. An id no file name holds comes back as another: the check says so.
    filename = "promptfooconfig.yaml" if suite_id("promptfooconfig.yaml", header.name) == header.eval_set_id \
        else f"{name}.promptfooconfig.yaml"
    return [SourceFile(filename, dump_yaml(suite).encode())]


writer = EvalSetWriter("promptfoo", "promptfoo (promptfooconfig.yaml)", write)
