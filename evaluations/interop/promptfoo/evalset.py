"""promptfoo test suites (`promptfooconfig.yaml`, promptfoo 0.123): each test a case, its
deterministic assertions evalsite criteria.

Read (YAML 1.2 core schema as js-yaml reads it, safely: no object-building tags, depth and
alias-expansion limits, see `js.load_yaml`):

- `description` -> the eval set's name; the eval-set id is the file's name without
  `promptfooconfig.yaml` (`smoke.promptfooconfig.yaml` -> `smoke`), else its folder's name, else
  `promptfoo`.
- `tests`: a list of tests, of `file://` references, or one reference (`file://tests.csv`,
  `file://tests/*.yaml`), resolved among the uploaded files (a folder or a zip) relative to the
  config; YAML / JSON lists of tests and promptfoo's CSV (vars columns, `__expected[N]` in
  promptfoo's `type:value` notation, `__description`, `__threshold`, `__metadata:key`).
  `defaultTest`'s `vars` and `assert` are merged into every test as promptfoo merges them (the
  test's vars win; the default assertions come first).
- Each test -> a case: eval id its `description` when unique in the suite, else `test-<n>` (n
  its 1-based position); the name its description; one turn whose user content is the prompt
  rendered with the test's vars when the suite has one prompt written inline (`{{ var }}`
  references), else the vars as a JSON part. The vars and the rest of the test (`threshold`,
  `options`, `metadata`, `provider`, ...) are kept in `metadata["promptfoo"]`.
- Each assertion -> `case.criteria["promptfoo_<type>"]` (`_2`, `_3`, ... for a type's later
  assertions in the test), the assertion as written. The eval set's config enables the
  `promptfoo_*` evaluator of each deterministic type (`evaluators/promptfoo.py`), and lists the
  others (llm-rubric, javascript, python, similar, ...) disabled, with why; a case's assertions
  evalsite does not score are also named in `metadata["promptfoo"]["not_scored"]`, and the
  upload's warnings say how many there are. None is dropped.
- The rest of the config (prompts, providers, scenarios, options) is kept in the eval set's
  metadata, and written back by `export.py`.
"""

from __future__ import annotations

import fnmatch
import json
import marshal
import math
import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evaluations.interop.base import (
    MAX_REPORTED_PROBLEMS,
    CaseSink,
    EvalSetImportError,
    ParsedEvalSet,
    PathPart,
    Problem,
    SourceFile,
    format_path,
    max_cases,
    schema_error,
    too_many_cases,
)
from evaluations.interop.promptfoo.assertions import assertion_from_string, base_type, criterion_key, not_scored_reason
from evaluations.interop.promptfoo.js import TemplateError, YamlError, load_yaml, node_line, render_prompt
from evaluations.schemas.evalset import (
    CriterionConfig,
    EvalCase,
    EvalConfig,
    EvalSet,
    Invocation,
    MessageContent,
)

YAML_SUFFIXES = {"yaml", "yml"}
TEST_KEYS = {"vars", "assert", "description"}


def suite_id(name: str, description: Any = None) -> str:
    """`evals/smoke.promptfooconfig.yaml` -> `smoke`; `getting-started/promptfooconfig.yaml` ->
    `getting-started`; `suite.yaml` -> `suite`; a lone `promptfooconfig.yaml` -> its description,
    else `promptfoo`."""
    folder, _, base = name.rpartition("/")
    for suffix in (".yaml", ".yml"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    if base.lower().endswith("promptfooconfig"):
        base = base[: -len("promptfooconfig")].rstrip("._-")
    if base or folder:
        return base or folder.rpartition("/")[2]
    if isinstance(description, str) and description.strip():
        return description.strip().replace("/", "_")[:200]
    return "promptfoo"


def derive_ids(descriptions: list[str | None]) -> list[str]:
    """A test's eval id: its description when unique in the suite, else `test-<n>`."""
    counts = Counter(d for d in descriptions if d)
    return [d if d and counts[d] == 1 and len(d) <= 200 else f"test-{n}"
            for n, d in enumerate(descriptions, start=1)]


# --- The reader ------------------------------------------------------------------------------


_YAML_CACHE = "_cache_promptfoo_yaml"  # SourceFile.release() drops it with the file's other caches


class _Packed:
    """A test written in the config's `tests` list, kept as marshal's bytes (about the size of
    its text) from the moment it is read until its case is made: built whole, a config's values
    took four times its text beside the cases' rows. Only a mapping written there is packed
    (`load_yaml`'s `pack`), never an alias, an anchored one or one holding an alias: a value
    aliases share is never copied."""

    __slots__ = ("data", "description")

    def __init__(self, test: dict[str, Any]) -> None:
        self.data = marshal.dumps(test)
        description = test.get("description")
        self.description = description if isinstance(description, str) else None

    def unpack(self) -> dict[str, Any]:
        test: dict[str, Any] = marshal.loads(self.data)  # noqa: S302 - bytes `__init__` made
        return test


# A test, the file it is in, that file's text (for lines) and the test's path there.
_Located = tuple[dict[str, Any] | _Packed, SourceFile, Any, list[PathPart]]


def _unpacked(test: dict[str, Any] | _Packed) -> dict[str, Any]:
    return test.unpack() if isinstance(test, _Packed) else test


def _yaml_source(file: SourceFile) -> str | bytes:
    """What the YAML parser reads: a UTF-8 file's bytes (libyaml reads them as they are; the
    decoded text and the parser's UTF-8 copy of it were two more copies of the file), else
    its text (UTF-16, a byte-order mark, or a text already decoded)."""
    if "text" in file.__dict__ or file.data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return file.text
    file.check_encoding()  # the located error, as decoding the text raises it
    return file.data


def _yaml_doc(file: SourceFile) -> tuple[Any, Any]:
    """(document, where it came from) of a YAML file, cached on the file; raises the located
    error. The tests written in a config's `tests` list are `_Packed`."""
    cached = file.__dict__.get(_YAML_CACHE)
    if cached is None:
        try:
            cached = load_yaml(_yaml_source(file), pack=_Packed)
        except YamlError as exc:
            raise EvalSetImportError(exc.code, [Problem(str(exc), file=file.name, line=exc.line, column=exc.column)],
                                     final=exc.final) from None
        file.__dict__[_YAML_CACHE] = cached
    return cached


def _looks_like_tests(items: Any) -> bool:
    return (isinstance(items, list) and bool(items)
            and all(isinstance(t, dict) and TEST_KEYS & set(t) and not {"eval_id", "input", "eval_cases"} & set(t)
                    for t in items[:50]))


class PromptfooReader:
    name = "promptfoo"
    label = "promptfoo test suite (promptfooconfig.yaml)"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix not in YAML_SUFFIXES:
            return "not a .yaml / .yml file"
        try:
            doc, _ = _yaml_doc(file)
        except EvalSetImportError as exc:
            if exc.final:
                raise
            return exc.problems[0].message
        if not isinstance(doc, dict):
            return "the YAML document is not a mapping"
        if "tests" in doc or {"prompts", "providers"} <= set(doc) or "defaultTest" in doc:
            return None
        return "no `tests` (nor `prompts` with `providers`)"

    def is_companion(self, file: SourceFile) -> bool:
        """A tests file a config references: a YAML or JSON list of tests, or a CSV with
        promptfoo's `__expected` / `__description` columns."""
        try:
            if file.suffix in YAML_SUFFIXES:
                return _looks_like_tests(_yaml_doc(file)[0])
            if file.suffix == "json":
                doc, error = file.try_outline()
                return error is None and _looks_like_tests(doc)
            if file.suffix == "csv":
                return any(h.startswith(("__expected", "__description")) for h in file.csv_header)
        except EvalSetImportError as exc:
            if exc.final:
                raise
            return False
        return False

    def parse(self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None) -> ParsedEvalSet:
        return _Suite(file, companions, sink).parse()


class _Suite:
    def __init__(self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None):
        self.file = file
        # Each case goes to the sink as it is made: a defaultTest, a tests file or a var copied into
        # ten thousand tests is counted (and refused) case by case, not after all are built.
        self.sink = sink
        self.companions = {c.name: c for c in companions}
        self.used: dict[str, SourceFile] = {}
        self.problems: list[Problem] = []
        self.warnings: list[str] = []

    def problem(self, message: str, where: SourceFile, node: Any, path: Sequence[PathPart],
                case: str | None = None) -> None:
        # Each line is found by parsing the file again: only for the problems an error shows.
        located = (node_line(node, tuple(path)) if where.suffix in YAML_SUFFIXES
                   and len(self.problems) < MAX_REPORTED_PROBLEMS else None)
        self.problems.append(Problem(message, file=where.name, case=case, path=format_path(path) or None,
                                     line=located[0] if located else None,
                                     column=located[1] if located else None))

    def parse(self) -> ParsedEvalSet:
        doc, node = _yaml_doc(self.file)
        if not isinstance(doc, dict):
            raise schema_error([Problem("a promptfoo config is a YAML mapping", file=self.file.name, line=1)])
        description = doc.get("description")
        if description is not None and not isinstance(description, str):
            self.problem("expected text", self.file, node, ["description"])
        default = doc.get("defaultTest")
        default_vars: dict[str, Any] = {}
        default_asserts: list[Any] = []
        header_default: dict[str, Any] | None = None
        if isinstance(default, str):
            self.problem("a defaultTest read from a file is not supported: write it in the config", self.file,
                         node, ["defaultTest"])
        elif default is not None and not isinstance(default, dict):
            self.problem("expected a mapping", self.file, node, ["defaultTest"])
        elif isinstance(default, dict):
            default_vars = self._mapping(default.get("vars"), self.file, node, ["defaultTest", "vars"]) or {}
            raw_asserts = default.get("assert")
            if raw_asserts is not None and not isinstance(raw_asserts, list):
                self.problem("expected a list of assertions", self.file, node, ["defaultTest", "assert"])
            else:
                default_asserts = list(raw_asserts or [])
                for index, assertion in enumerate(default_asserts):
                    self._check_assertion(assertion, self.file, node, ["defaultTest", "assert", index], None)
            header_default = {k: v for k, v in default.items() if k not in ("vars", "assert")}
        template = self._template(doc.get("prompts"))
        tests = self._expanded(self._tests(doc, node), default_vars)
        if self.problems:
            raise schema_error(self.problems)
        if len(tests) > max_cases():
            raise too_many_cases(self.file.name)
        ids = derive_ids([t[0].description if isinstance(t[0], _Packed) else t[0].get("description")
                          if isinstance(t[0].get("description"), str) else None for t in tests])
        metadata = {k: v for k, v in doc.items() if k not in ("description", "tests", "defaultTest")}
        # From here the tests are held by `tests` alone, each let go once its case is made: a
        # config's values take about five times its text, its cases' rows three.
        del doc
        for source in (self.file, *self.used.values()):
            source.__dict__.pop(_YAML_CACHE, None)
        cases: list[EvalCase] = []
        criteria_config: dict[str, CriterionConfig] = {}
        unscored = Counter[str]()
        pending: list[Any] = tests
        del tests
        for index, eval_id in enumerate(ids):
            packed, where, tnode, path = pending[index]
            pending[index] = None
            test = _unpacked(packed)
            del packed
            case = self._case(test, where, tnode, path, eval_id, default_vars, default_asserts, template,
                              criteria_config, unscored)
            if case is not None:
                if self.sink is not None:
                    self.sink.add(case)
                else:
                    cases.append(case)
        if self.problems:
            raise schema_error(self.problems)
        if unscored:
            listed = ", ".join(f"{kind}: {n}" for kind, n in unscored.most_common())
            self.warnings.append(f"{sum(unscored.values())} promptfoo assertion(s) are kept in their cases but not "
                                 f"scored by evalsite ({listed}): see docs/evalsets.md, promptfoo")
        if header_default:
            metadata["defaultTest"] = header_default
        evalset = EvalSet(eval_set_id=suite_id(self.file.name, description),
                          name=description if isinstance(description, str) else "", eval_cases=cases,
                          metadata={"promptfoo": metadata} if metadata else {})
        return ParsedEvalSet(evalset=evalset, format="promptfoo", variant="promptfooconfig", source=self.file,
                             companions_used=list(self.used.values()),
                             default_config=EvalConfig(criteria=criteria_config), warnings=self.warnings)

    # Prompts ----------------------------------------------------------------------------------

    def _template(self, prompts: Any) -> str | None:
        """The one inline prompt template, or None (several prompts, or one read from a file)."""
        if isinstance(prompts, str):
            prompts = [prompts]
        if isinstance(prompts, dict) and len(prompts) == 1:
            prompts = list(prompts)
        if not isinstance(prompts, list) or len(prompts) != 1:
            return None
        prompt = prompts[0]
        if isinstance(prompt, dict):
            prompt = prompt.get("raw")
        if not isinstance(prompt, str) or prompt.startswith("file://"):
            return None
        return prompt

    # Tests ------------------------------------------------------------------------------------

    def _tests(self, doc: dict[str, Any], node: Any) -> list[_Located]:
        raw = doc.get("tests")
        out: list[_Located] = []
        if raw is None:
            return out
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list):
            self.problem("expected a list of tests or a file:// reference", self.file, node, ["tests"])
            return out
        for index, item in enumerate(items):
            path: list[PathPart] = ["tests", index] if not isinstance(raw, str) else ["tests"]
            if isinstance(item, str):
                out.extend(self._tests_from_files(item, path, node))
            elif isinstance(item, (dict, _Packed)):
                out.append((item, self.file, node, path))
            else:
                self.problem("expected a test (a mapping) or a file:// reference", self.file, node, path)
            if len(out) > max_cases():
                raise too_many_cases(self.file.name)
        return out

    def _expanded(self, tests: list[_Located],
                  default_vars: dict[str, Any]) -> list[_Located]:
        """promptfoo's `generateVarCombinations`: a test whose vars hold lists of text runs once
        per combination of their values (unless `options.disableVarExpansion`), each its own case."""
        out: list[_Located] = []
        for kept, where, node, path in tests:
            test = _unpacked(kept)  # a packed test stays packed unless it runs once per combination
            own, options = test.get("vars"), test.get("options")
            if not isinstance(own, dict):
                out.append((kept, where, node, path))
                continue
            lists = any(isinstance(v, list) and v and isinstance(v[0], str) for v in {**default_vars, **own}.values())
            if not lists or (isinstance(options, dict) and options.get("disableVarExpansion")):
                out.append((kept, where, node, path))
                continue
            combinations: list[dict[str, Any]] = [{}]
            for key, value in {**default_vars, **own}.items():
                values = value if isinstance(value, list) and value and isinstance(value[0], str) else [value]
                combinations = [{**c, key: v} for c in combinations for v in values]
                if len(out) + len(combinations) > max_cases():
                    raise too_many_cases(where.name)
            out.extend(({**test, "vars": combination}, where, node, path) for combination in combinations)
        return out

    def _tests_from_files(self, ref: str, path: list[PathPart],
                          node: Any) -> list[_Located]:
        if not ref.startswith("file://"):
            self.problem(f"a test given as text must be a file:// reference, not {ref[:80]!r}", self.file, node, path)
            return []
        target = posixpath.normpath(posixpath.join(posixpath.dirname(self.file.name), ref[7:]))
        matches = sorted(n for n in self.companions if fnmatch.fnmatchcase(n, target)) if any(
            c in target for c in "*?[") else ([target] if target in self.companions else [])
        if not matches:
            self.problem(f"the tests file {ref[7:]!r} is not in the upload: upload the config's folder or a zip "
                         "holding both", self.file, node, path)
            return []
        out: list[_Located] = []
        for name in matches:
            source = self.companions[name]
            self.used[name] = source
            out.extend(self._tests_in(source))
        return out

    def _tests_in(self, source: SourceFile) -> list[_Located]:
        if source.suffix == "csv":
            return [(test, source, None, []) for test in self._csv_tests(source)]
        if source.suffix in YAML_SUFFIXES:
            doc, node = _yaml_doc(source)
        elif source.suffix == "json":
            doc, node = source.json, None
        else:
            self.problems.append(Problem("a tests file is .yaml, .yml, .json or .csv", file=source.name))
            return []
        if not isinstance(doc, list):
            self.problems.append(Problem("a tests file holds a list of tests", file=source.name, line=1))
            return []
        out: list[_Located] = []
        for index, test in enumerate(doc):
            if isinstance(test, dict):
                out.append((test, source, node, [index]))
            else:
                self.problem("expected a test (a mapping)", source, node, [index])
        return out

    def _csv_tests(self, source: SourceFile) -> list[dict[str, Any]]:
        tests = []
        for line, row in source.iter_csv_rows():
            test: dict[str, Any] = {}
            variables: dict[str, Any] = {}
            asserts: list[dict[str, Any]] = []
            metadata: dict[str, Any] = {}
            options: dict[str, Any] = {}
            for raw_key, value in row.items():
                key = raw_key.strip()
                if key.startswith("__expected"):
                    if value.strip():
                        asserts.append(assertion_from_string(value.strip()))
                elif key == "__description":
                    test["description"] = value
                elif key == "__threshold":
                    try:
                        number = float(value)
                    except ValueError:
                        number = math.nan
                    if math.isfinite(number):
                        test["threshold"] = number
                    else:  # 1e400 reads as infinity: no score reaches it, and JSON cannot keep it
                        shown = value if len(value) <= 40 else value[:37] + "..."
                        self.problems.append(Problem(f"__threshold {shown!r} is not a finite number",
                                                     file=source.name, line=line, path="__threshold"))
                elif key in ("__prefix", "__suffix"):
                    options[key[2:]] = value
                elif key.startswith("__metadata:"):
                    if value.strip():
                        name = key[11:]
                        metadata[name.removesuffix("[]")] = (
                            [v.strip().replace("\\,", ",") for v in re.split(r"(?<!\\),", value)]
                            if name.endswith("[]") else value)
                elif key.startswith("__"):
                    test.setdefault("__columns", {})[key] = value
                else:
                    variables[key] = value
            test["vars"] = variables
            if asserts:
                test["assert"] = asserts
            if options:
                test["options"] = options
            if metadata:
                test["metadata"] = metadata
            test["__line"] = line
            tests.append(test)
        return tests

    def _mapping(self, value: Any, where: SourceFile, node: Any, path: list[PathPart],
                 case: str | None = None) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.problem("expected a mapping of variable names to values", where, node, path, case)
            return None
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            self.problem(f"variable names are text, not {bad[0]!r}", where, node, path, case)
            return None
        return value

    def _check_assertion(self, assertion: Any, where: SourceFile, node: Any, path: list[PathPart],
                         case: str | None) -> bool:
        if not isinstance(assertion, dict):
            self.problem("expected an assertion (a mapping with a type)", where, node, path, case)
            return False
        if not isinstance(assertion.get("type"), str) or not assertion["type"].strip():
            self.problem("required field is missing" if "type" not in assertion else "expected text",
                         where, node, [*path, "type"], case)
            return False
        for key in ("weight", "threshold"):
            number = assertion.get(key)
            if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))):
                self.problem("expected a number", where, node, [*path, key], case)
                return False
        return True

    def _case(self, test: dict[str, Any], where: SourceFile, node: Any, path: list[PathPart], eval_id: str,
              default_vars: dict[str, Any], default_asserts: list[Any], template: str | None,
              config: dict[str, CriterionConfig], unscored: Counter[str]) -> EvalCase | None:
        line = test.pop("__line", None)
        columns = test.pop("__columns", None)
        before = len(self.problems)

        def located(message: str, sub: list[PathPart]) -> None:
            if line is not None:
                self.problems.append(Problem(message, file=where.name, case=eval_id, line=line,
                                             path=format_path(sub) or None))
            else:
                self.problem(message, where, node, [*path, *sub], eval_id)

        description = test.get("description")
        if description is not None and not isinstance(description, str):
            located("expected text", ["description"])
        own_vars = test.get("vars")
        if isinstance(own_vars, str):
            located("vars read from a file are not supported: write them in the test", ["vars"])
        elif own_vars is not None and (not isinstance(own_vars, dict) or not all(isinstance(k, str) for k in own_vars)):
            located("expected a mapping of variable names to values", ["vars"])
        own_asserts = test.get("assert")
        if own_asserts is not None and not isinstance(own_asserts, list):
            located("expected a list of assertions", ["assert"])
            own_asserts = []
        for index, assertion in enumerate(own_asserts or []):
            if line is not None:
                if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
                    located("expected an assertion with a type", ["assert", index])
            else:
                self._check_assertion(assertion, where, node, [*path, "assert", index], eval_id)
        if len(self.problems) > before:
            return None
        variables = {**default_vars, **(own_vars if isinstance(own_vars, dict) else {})}
        asserts = [*default_asserts, *(own_asserts or [])]
        criteria: dict[str, dict[str, Any] | None] = {}
        not_scored: dict[str, str] = {}
        seen = Counter[str]()
        for assertion in asserts:
            kind = assertion["type"]
            seen[kind] += 1
            key = criterion_key(kind) + (f"_{seen[kind]}" if seen[kind] > 1 else "")
            criteria[key] = assertion
            why = not_scored_reason(assertion)
            if why is None:
                config.setdefault(key, CriterionConfig(evaluator=criterion_key(base_type(kind)[0]), threshold=1.0))
            else:
                not_scored[key] = why
                unscored[kind] += 1
                config.setdefault(key, CriterionConfig(enabled=False, evaluator="promptfoo_not_scored",
                                                      options={"not_scored": why}))
        meta: dict[str, Any] = {"vars": variables}
        rest = {k: v for k, v in test.items() if k not in ("vars", "assert", "description")}
        if rest:
            meta["test"] = rest
        if columns:
            meta["csv_columns"] = columns
        if not_scored:
            meta["not_scored"] = not_scored
        user = self._user_turn(template, variables, eval_id)
        try:
            return EvalCase(eval_id=eval_id, name=description or "", criteria=criteria,
                            metadata={"promptfoo": meta},
                            conversation=[Invocation(invocation_id="turn_1", user_content=user)])
        except ValidationError as exc:  # pragma: no cover - the values above are plain JSON
            located(str(exc.errors()[0]["msg"]), [])
            return None

    def _user_turn(self, template: str | None, variables: dict[str, Any], eval_id: str) -> MessageContent:
        if template is not None:
            try:
                return MessageContent.user(render_prompt(template, variables))
            except EvalSetImportError as exc:  # the repeats of a var past the expansion limit: say where
                raise EvalSetImportError(exc.code, [Problem(p.message, file=self.file.name, case=eval_id,
                                                            path="prompts") for p in exc.problems],
                                         final=exc.final) from None
            except TemplateError as exc:
                if not any("prompt template" in w for w in self.warnings):
                    self.warnings.append(f"the prompt template is not rendered ({exc}): each case's user turn is "
                                         "its vars")
        return MessageContent.json_part("user", json.loads(json.dumps(variables, default=str)))


reader = PromptfooReader()
