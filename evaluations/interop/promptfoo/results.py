"""promptfoo results files (`promptfoo eval -o results.json`, results version 3), read for
`results_import` (`interop/results.py` is the registry).

`{"evalId", "results": {"version", "prompts", "results": [...], "stats"}, "config", ...}`: one
entry per test, prompt and provider (`testIdx`, `promptIdx`, `provider`, `prompt`, `response`,
`success`, `score`, `error`, `failureReason`, `latencyMs`, `testCase`, `gradingResult` with
`componentResults`, one per assertion: `pass`, `score`, `reason`, `assertion`).

- A run is one prompt with one provider: a file holding several is refused, saying which (run
  promptfoo with `--filter-providers` / `--filter-prompts`, or import the run of each).
- Each test -> a case, its eval id derived as the config reader derives it (its description when
  unique, else `test-<testIdx + 1>`), so a run of a suite imported from its config finds its
  cases. Its output is the response's output; its status promptfoo's `success` (an `error` with
  failure reason 2 is the case's error).
- Scores: `promptfoo_test`, the test's weighted score with its pass and reason, and one per
  assertion under the criterion key the config reader gives it (`promptfoo_contains`,
  `promptfoo_contains_2`, ..., `promptfoo_llm_rubric`; an assert-set's assertions under
  `<set>.<type>`), each with promptfoo's pass, score, reason, weight and the assertion.
- The tokens (`tokenUsage`: prompt, completion, total) and `cost` promptfoo recorded for the
  provider's answer are the case's usage, summed per run like any other run's.
- The provider is the run's model label and the prompt a tag (`promptfoo-prompt:<label>`).
- Without a chosen eval set, the run's suite is found by the config's description, else created
  from the tests the file carries (their vars and assertions, the prompt template).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluations.interop.base import SourceFile, stem
from evaluations.interop.promptfoo.assertions import criterion_key
from evaluations.interop.promptfoo.evalset import derive_ids
from evaluations.interop.promptfoo.js import dump_yaml
from evaluations.interop.results import ImportedCase, ImportedScore, ParsedResults, Path, Reader, ResultsFormat, unit
from evaluations.interop.writing import safe_name
from evaluations.schemas.outputs import AgentOutput

FAILURE_ERROR = 2  # promptfoo's ResultFailureReason.ERROR


def _claims(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        return False
    inner = doc["results"]
    return isinstance(inner.get("results"), list) and ("evalId" in doc or "version" in inner) and (
        "prompts" in inner or "stats" in inner)


def _pair(entry: dict[str, Any]) -> tuple[str, str]:
    provider = entry.get("provider")
    provider_id = provider.get("label") or provider.get("id") if isinstance(provider, dict) else provider
    prompt = entry.get("prompt")
    label = prompt.get("label") or prompt.get("raw") if isinstance(prompt, dict) else prompt
    return str(provider_id or ""), str(label or "")


def _read(r: Reader) -> ParsedResults:
    doc = r.doc
    inner = doc["results"]
    prefix: Path = ("results", "results")
    version = inner.get("version")
    if isinstance(version, int) and version < 3:
        r.add(("results", "version"), f"promptfoo results version {version} (written before promptfoo 0.60): "
                                      "run the eval again with a current promptfoo")
        r.fail("unsupported_version")
    entries = r.items(inner, "results", ("results",))
    pairs = Counter(_pair(entry) for _, entry in entries)
    if len(pairs) > 1:
        listed = "; ".join(f"{provider or '?'} with prompt {prompt[:60]!r}" for provider, prompt in pairs)
        r.add(prefix, f"the file holds {len(pairs)} prompt and provider runs ({listed}): evalsite imports one run "
                      "per file (run promptfoo with --filter-providers / --filter-prompts, once for each)")
        r.fail("several_runs")
    tests: dict[int, tuple[Path, dict[str, Any]]] = {}
    for path, entry in entries:
        index = entry.get("testIdx")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            r.add((*path, "testIdx"), "expected the test's index (a whole number from 0)")
            continue
        if index in tests:
            r.add((*path, "testIdx"), f"a second result for test {index} with the same prompt and provider")
            continue
        tests[index] = (path, entry)
    order = sorted(tests)
    descriptions = []
    for index in order:
        test = tests[index][1].get("testCase")
        description = test.get("description") if isinstance(test, dict) else None
        descriptions.append(description if isinstance(description, str) else None)
    # The config reader numbers tests by position; results by testIdx, which is that position.
    derived = derive_ids(descriptions)
    ids = [eid if not eid.startswith("test-") or (descriptions[k] is not None and eid == descriptions[k])
           else f"test-{order[k] + 1}" for k, eid in enumerate(derived)]
    cases = [_case(r, *tests[index], eval_id) for index, eval_id in zip(order, ids, strict=True)]
    provider, prompt = next(iter(pairs)) if pairs else ("", "")
    name = _suite_name(doc)
    parsed = ParsedResults("promptfoo", r.file, name or stem(r.file.name), cases)
    parsed.labels = {"model": provider[:200], "tags": [f"promptfoo-prompt:{prompt[:80]}"] if prompt else []}
    parsed.evalset_format, parsed.evalset_if_missing = "promptfoo", True
    parsed.evalset_file = _suite_file(doc, name or stem(r.file.name), [tests[i][1] for i in order], cases)
    return parsed


def _suite_name(doc: dict[str, Any]) -> str:
    config = doc.get("config")
    description = config.get("description") if isinstance(config, dict) else None
    return description.strip()[:200] if isinstance(description, str) and description.strip() else ""


def _case(r: Reader, path: Path, entry: dict[str, Any], eval_id: str) -> ImportedCase:
    case = ImportedCase(eval_id, path)
    case.passed = r.flag(entry, "success", path, eval_id)
    latency = r.number(entry, "latency_ms", path, eval_id)
    case.latency = latency / 1000 if latency is not None else None
    if entry.get("failureReason") == FAILURE_ERROR and entry.get("error"):
        case.error = str(entry["error"])
    response = entry.get("response")
    output = response.get("output") if isinstance(response, dict) else None
    usage = _usage(r, entry, path, eval_id)
    turns = [{"final_response": output, **({"usage": usage} if usage else {})}] if response or usage else []
    case.output = AgentOutput.model_validate({"eval_id": eval_id, "latency_seconds": case.latency, "turns": turns})
    grading = entry.get("gradingResult")
    test: dict[str, Any] = entry["testCase"] if isinstance(entry.get("testCase"), dict) else {}
    threshold = test.get("threshold") if isinstance(test.get("threshold"), (int, float)) else None
    score = r.number(entry, "score", path, eval_id)
    if isinstance(grading, dict) or score is not None:
        reason = grading.get("reason") if isinstance(grading, dict) else None
        case.scores.append(ImportedScore("promptfoo_test", score, unit(score), case.passed,
                                         float(threshold) if threshold is not None else None,
                                         {"imported_from": "promptfoo", "reason": reason}))
    if not isinstance(grading, dict):
        return case
    components = grading.get("componentResults")
    if components is None:
        return case
    if not isinstance(components, list):
        r.add((*path, "gradingResult", "componentResults"), "expected a list", eval_id)
        return case
    _components(r, case, components, (*path, "gradingResult", "componentResults"))
    return case


TOKEN_FIELDS = (("prompt", "prompt_tokens"), ("completion", "completion_tokens"), ("total", "total_tokens"))


def _usage(r: Reader, entry: dict[str, Any], path: Path, eval_id: str) -> dict[str, Any]:
    """The tokens and cost promptfoo recorded for the provider's answer: the entry's
    `tokenUsage` and `cost`, else its response's (the tokens its assertions' graders spent
    are under `tokenUsage.assertions`, not the agent's, and are left out)."""
    response: dict[str, Any] = entry["response"] if isinstance(entry.get("response"), dict) else {}
    usage: dict[str, Any] = {}
    for holder, where in ((entry, path), (response, (*path, "response"))):
        tokens = holder.get("tokenUsage")
        if tokens is None or any(f in usage for _, f in TOKEN_FIELDS):
            continue
        if not isinstance(tokens, dict):
            r.add((*where, "tokenUsage"), "expected an object of token counts", eval_id)
            continue
        for key, field in TOKEN_FIELDS:
            value = r.number(tokens, key, (*where, "tokenUsage"), eval_id)
            if value is not None and (value < 0 or value != int(value)):
                r.add((*where, "tokenUsage", key), f"expected a whole number of tokens from 0, not {value:g}", eval_id)
            elif value is not None:
                usage[field] = int(value)
    for holder, where in ((entry, path), (response, (*path, "response"))):
        cost = r.number(holder, "cost", where, eval_id)
        if cost is not None and cost < 0:
            r.add((*where, "cost"), f"expected a cost from 0, not {cost:g}", eval_id)
        elif cost is not None:
            usage["cost_usd"] = cost
            break
    return usage


def _components(r: Reader, case: ImportedCase, components: list[Any], path: Path) -> None:
    seen = Counter[str]()
    index = 0
    while index < len(components):
        item = components[index]
        where = (*path, index)
        index += 1
        if item is None:
            continue  # select-best / max-score leave their place empty
        if not isinstance(item, dict):
            r.add(where, "expected an assertion's result (an object)", case.key)
            continue
        key = _key(item, seen)
        case.scores.append(_score(r, key, item, where, case.key))
        subs = item.get("componentResults")
        if isinstance(subs, list) and subs:  # an assert-set: its results follow it, flattened
            inner = Counter[str]()
            for offset, sub in enumerate(components[index:index + len(subs)]):
                if isinstance(sub, dict):
                    case.scores.append(_score(r, f"{key}.{_key(sub, inner)}", sub, (*path, index + offset), case.key))
            index += len(subs)


def _key(item: dict[str, Any], seen: Counter[str]) -> str:
    assertion = item.get("assertion")
    kind = assertion.get("type") if isinstance(assertion, dict) else None
    kind = kind if isinstance(kind, str) and kind else "assertion"
    seen[kind] += 1
    return criterion_key(kind) + (f"_{seen[kind]}" if seen[kind] > 1 else "")


def _score(r: Reader, key: str, item: dict[str, Any], path: Path, eval_id: str) -> ImportedScore:
    value = r.number(item, "score", path, eval_id)
    passed = r.flag(item, "pass", path, eval_id)
    assertion: dict[str, Any] = item["assertion"] if isinstance(item.get("assertion"), dict) else {}
    threshold = assertion.get("threshold")
    justification: dict[str, Any] = {"imported_from": "promptfoo", "reason": item.get("reason"),
                                     "assertion": assertion, "weight": assertion.get("weight", 1)}
    if isinstance(item.get("metadata"), dict) and "renderedAssertionValue" in item["metadata"]:
        justification["rendered_value"] = item["metadata"]["renderedAssertionValue"]
    return ImportedScore(key, value, unit(value), passed,
                         float(threshold) if isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
                         else None, justification)


def _suite_file(doc: dict[str, Any], name: str, entries: list[dict[str, Any]],
                cases: list[ImportedCase]) -> SourceFile:
    """The suite the results ran, as a promptfooconfig.yaml the config reader imports: the
    prompt template, and each test's description, vars and assertions as the file holds them."""
    suite: dict[str, Any] = {}
    if _suite_name(doc):
        suite["description"] = _suite_name(doc)
    prompts = doc["results"].get("prompts")
    if isinstance(prompts, list) and len(prompts) == 1 and isinstance(prompts[0], dict) and isinstance(
            prompts[0].get("raw"), str):
        suite["prompts"] = [prompts[0]["raw"]]
    config = doc.get("config")
    if isinstance(config, dict) and config.get("providers") is not None:
        suite["providers"] = config["providers"]
    tests = []
    for position, (entry, case) in enumerate(zip(entries, cases, strict=True), start=1):
        test_case: dict[str, Any] = entry["testCase"] if isinstance(entry.get("testCase"), dict) else {}
        test: dict[str, Any] = {}
        description = test_case.get("description")
        if isinstance(description, str):
            test["description"] = description
        elif case.key != f"test-{position}":
            test["description"] = case.key  # a test the run skipped moves the later ones' positions
        test["vars"] = test_case.get("vars") if isinstance(test_case.get("vars"), dict) else entry.get("vars") or {}
        if isinstance(test_case.get("assert"), list):
            test["assert"] = test_case["assert"]
        for key in ("threshold", "options", "metadata"):
            if test_case.get(key) not in (None, {}):
                test[key] = test_case[key]
        tests.append(test)
    suite["tests"] = tests
    return SourceFile(f"{safe_name(name)}.promptfooconfig.yaml", dump_yaml(suite).encode())


results_format = ResultsFormat("promptfoo", _claims, _read)
