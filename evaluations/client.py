"""A small client for evalsite's REST API, for a team's own test suite or CI job.

    from evaluations.client import Client

    client = Client("https://evals.example.com", token=os.environ["EVALSITE_TOKEN"])
    evalset = client.upload_evalset("evals/travel_agent.evalset.json")
    run = client.push_outputs(evalset, outputs, baseline="pinned", model="gpt-x", branch="main")
    result = client.wait(run, timeout=600)
    result.assert_passed()  # AssertionError: failed cases, scores vs thresholds, links

Standard library only, and nothing from Django or the rest of evalsite: the file can be
copied into any project as it is. Every error the server answers becomes a `ClientError`
carrying the API's error shape (`code`, `message`, `problems`); a server that cannot be
reached is a `ServerUnreachable`, a run that does not finish in time a `WaitTimeout`.

`junit_xml` writes a run's results as JUnit XML (one test case per eval case and criterion),
for CI systems that show test reports.

The file is also the CI command, the same as `python manage.py eval --server` (which calls
`main`'s implementation), without Django or an evalsite install:

    python -m evaluations.client eval EVALSET --server URL (--outputs FILE | --target T) [options]
    python client.py eval ...   # a copy of this one file

Exit codes: 0 all good; 1 thresholds failed, the run did not complete, or (with
--fail-on-regression) a regression; 2 usage, input or server error.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __spec__ is None and sys.path and (
        os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__))):
    # Run as a file from an evalsite checkout: the modules beside it (evaluations/cache.py, ...)
    # must not shadow the standard library's.
    sys.path.pop(0)

import argparse
import io
import json
import re
import secrets
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar
from xml.etree import ElementTree as ET

__all__ = [
    "CaseFailure",
    "Client",
    "ClientError",
    "Comparison",
    "EvalSet",
    "Run",
    "RunResult",
    "ScoreCheck",
    "ServerUnreachable",
    "WaitTimeout",
    "junit_xml",
    "main",
]

USER_AGENT = "evalsite-client/1"
API = "/api/v1/"
TOKEN_ENV = "EVALSITE_TOKEN"
CREATE_RETRY_PAUSES = (1.0, 2.0, 4.0)  # seconds between the tries of a creating request (`Client.create`)
# Results that are not a pass: what `RunResult.failures` lists (not_runnable cases need a
# user simulator; they are reported, never counted as failures).
FAILED_STATUSES = ("failed", "error", "missing", "not_fully_scored")
PROBLEMS_SHOWN = 10
EXCERPT = 240


# --- Errors ---------------------------------------------------------------------------------


class ClientError(Exception):
    """An error answered by the server (`status` is its HTTP status), in the API's error
    shape: a stable `code`, a one-line `message`, and `problems` saying what is wrong where."""

    def __init__(self, message: str, *, status: int | None = None, code: str = "error",
                 problems: Sequence[Mapping[str, Any]] = (), url: str = ""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.problems = [dict(p) for p in problems]
        self.url = url

    def __str__(self) -> str:
        head = self.message if self.status is None else f"HTTP {self.status} {self.code}: {self.message}"
        lines = [head]
        for problem in self.problems[:PROBLEMS_SHOWN]:
            where = ", ".join(f"{key} {problem[key]}" for key in ("file", "case", "path", "line")
                              if problem.get(key) not in (None, ""))
            lines.append(f"  - {problem.get('message', '')}" + (f" ({where})" if where else ""))
        if len(self.problems) > PROBLEMS_SHOWN:
            lines.append(f"  ... and {len(self.problems) - PROBLEMS_SHOWN} more")
        return "\n".join(lines)


class ServerUnreachable(ClientError):
    """No answer at all: wrong address, server down, connection refused or timed out."""


class WaitTimeout(ClientError, TimeoutError):
    """The run did not finish within `wait`'s timeout (it goes on on the server)."""


# --- What the server returns ----------------------------------------------------------------


@dataclass
class EvalSet:
    id: int
    eval_set_id: str
    project: str
    version: int | None  # the version number this upload is (or the latest)
    case_count: int | None
    created: bool  # False: the same content was uploaded before
    url: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class Run:
    id: int
    status: str
    evalset: int
    evalset_version: int
    name: str
    cases_total: int
    cases_done: int
    cases_failed: int
    cases_errored: int
    cases_missing: int
    cases_not_runnable: int
    summary: dict[str, Any] | None
    url: str  # the run's page
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    # What `wait` compares the finished run with: a run id, "pinned", or None (no comparison).
    baseline: int | str | None = None
    # Cases with a criterion the server could not score (and none failed): never passed. 0 from
    # a server older than this field.
    cases_unscored: int = 0

    @property
    def finished(self) -> bool:
        return self.status in {"completed", "failed", "cancelled"}

    @property
    def settled(self) -> int:
        """Results that need no more work, whatever their outcome."""
        return self.cases_done + self.cases_missing + self.cases_not_runnable

    @property
    def cases_passed(self) -> int:
        return self.cases_done - self.cases_failed - self.cases_errored - self.cases_unscored

    @property
    def notices(self) -> list[dict[str, Any]]:
        """The criteria the run could not score: which, why, on how many cases."""
        found = (self.summary or {}).get("notices")
        return [n for n in found if isinstance(n, dict)] if isinstance(found, list) else []

    @property
    def thresholds_met(self) -> bool:
        return (self.status == "completed" and self.cases_failed == 0 and self.cases_errored == 0
                and self.cases_missing == 0 and self.cases_unscored == 0)


def threshold_text(threshold: Mapping[str, Any] | None) -> str:
    """`>= 0.8`, `<= 5`, `0.2..0.9`, or "" for no threshold."""
    if not threshold:
        return ""
    low, high = threshold.get("lower_limit"), threshold.get("upper_limit")
    if low is not None and high is not None:
        return f"{low:g}..{high:g}"
    if low is not None:
        return f">= {low:g}"
    return f"<= {high:g}" if high is not None else ""


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                                            default=str)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def justification_excerpt(justification: Mapping[str, Any] | None, limit: int = EXCERPT) -> str:
    """A justification in a line: expected vs actual where the evaluator gives them, a
    judge's reasoning, else the object itself."""
    if not justification:
        return ""
    if "expected" in justification or "actual" in justification:
        where = justification.get("invocation_id")
        text = (f"{where}: " if where else "") + (f"expected {_compact(justification.get('expected'))}, "
                                                  f"actual {_compact(justification.get('actual'))}")
        return _clip(text, limit)
    for key in ("reason", "reasoning", "critique", "explanation", "message"):
        if isinstance(justification.get(key), str) and justification[key].strip():
            return _clip(justification[key], limit)
    return _clip(_compact(dict(justification)), limit)


@dataclass
class ScoreCheck:
    """One criterion of one case: the conversation-level score, and the turns or nodes that
    did not pass (they carry the expected vs actual detail)."""

    criterion: str
    score: float | None
    raw_value: float | None
    passed: bool | None
    threshold: dict[str, Any] | None
    justification: dict[str, Any]
    error: str = ""
    details: list[dict[str, Any]] = field(default_factory=list)

    @property
    def score_text(self) -> str:
        if self.score is None:
            return "no score"
        text = f"{self.score:.3f}"
        if self.raw_value is not None and self.raw_value != self.score:
            text += f" (raw {self.raw_value:g})"
        return text

    def verdict_text(self) -> str:
        """`trajectory_match 0.000 vs >= 0.8`, or the evaluator's error."""
        if self.error:
            return f"{self.criterion}: evaluator error: {_clip(self.error, EXCERPT)}"
        limit = threshold_text(self.threshold)
        return f"{self.criterion} {self.score_text}" + (f" vs threshold {limit}" if limit else "")

    def excerpt(self, limit: int = EXCERPT) -> str:
        for detail in self.details:
            text = justification_excerpt(detail.get("justification"), limit)
            if text:
                return text
        return justification_excerpt(self.justification, limit)


def score_checks(result: Mapping[str, Any]) -> list[ScoreCheck]:
    """A result's conversation-level scores (as the API lists them), each with the turn- and
    node-level scores of its criterion that did not pass."""
    checks: dict[str, ScoreCheck] = {}
    details: dict[str, list[dict[str, Any]]] = {}
    for score in result.get("scores") or []:
        if score.get("applies_to", "conversation") == "conversation":
            checks[score["criterion"]] = ScoreCheck(
                criterion=score["criterion"], score=score.get("score"), raw_value=score.get("raw_value"),
                passed=score.get("passed"), threshold=score.get("threshold"),
                justification=score.get("justification") or {}, error=score.get("error") or "")
        elif score.get("passed") is False or score.get("error"):
            details.setdefault(score["criterion"], []).append(score)
    for name, check in checks.items():
        check.details = details.get(name, [])
    return list(checks.values())


@dataclass
class CaseFailure:
    eval_id: str
    iteration: int
    status: str  # failed / error / missing
    error: str
    checks: list[ScoreCheck]
    url: str  # the case's page in the run

    @classmethod
    def from_result(cls, result: Mapping[str, Any], run_url: str) -> CaseFailure:
        return cls(eval_id=result["eval_id"], iteration=result.get("iteration", 0), status=result["status"],
                   error=result.get("error") or "", checks=score_checks(result),
                   url=f"{run_url}cases/{result['id']}/")

    def lines(self) -> list[str]:
        name = self.eval_id + (f" (iteration {self.iteration})" if self.iteration else "")
        out = [f"{name}: {self.status}" + (f": {_clip(self.error, EXCERPT)}" if self.error else "")]
        for check in self.checks:
            if check.passed is False or check.error:
                out.append(f"    {check.verdict_text()}")
                excerpt = check.excerpt()
                if excerpt and not check.error:
                    out.append(f"      {excerpt}")
        out.append(f"    {self.url}")
        return out


CAUSES_SHOWN = 5


def notice_text(notice: Mapping[str, Any]) -> str:
    """`trajectory_judge could not run on 10 cases: ...`, and how the baseline compares: the
    pages' wording of a run's notice (its `text`, from a server that sends it)."""
    said = notice.get("text")
    if not isinstance(said, str) or not said:
        cases = int(notice.get("cases") or 0)
        verb = "could not run" if notice.get("kind") == "not_runnable" else "errored"
        said = f"{notice.get('criterion')} {verb} on {cases} case{'' if cases == 1 else 's'}: {notice.get('reason')}"
    if notice.get("on_baseline") == "same":
        was = int(notice.get("baseline_cases") or 0)
        said += f" (the same on the baseline: {was} case{'' if was == 1 else 's'})"
    elif notice.get("on_baseline") == "new":
        said += " (new: not on the baseline)"
    return said


def notice_lines(notices: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The criteria a run could not score, under one heading: its set-up, not a failure of
    the agent (those cases are "not fully scored")."""
    if not notices:
        return []
    return [f"not scored ({len(notices)} criteri{'on' if len(notices) == 1 else 'a'}; those cases are not fully "
            "scored, never passed):", *(f"  {notice_text(n)}" for n in notices)]


def cause_lines(causes: Mapping[str, Any] | None, shown: int = CAUSES_SHOWN) -> list[str]:
    """The candidate's top causes, one line each: how many cases, the cause, and how it moved
    against the baseline ("  12 cases  missing search_flights  (new)")."""
    if not causes:
        return []
    items = [item for item in causes.get("items") or () if item.get("change") != "gone"]
    if not items:
        return []
    out = [f"  top causes ({causes['failing_cases']} failing case{'' if causes['failing_cases'] == 1 else 's'}, "
           f"{causes['total']} cause{'' if causes['total'] == 1 else 's'}):"]
    for item in items[:shown]:
        change = item.get("change")
        moved = ""
        if change in ("grown", "shrunk"):
            moved = f"  ({change}, was {item.get('baseline_cases')})"
        elif change == "new":
            moved = "  (new)"
        out.append(f"    {item['cases']:>5} case{' ' if item['cases'] == 1 else 's'}  {item['signature']}{moved}")
    gone = sum(1 for item in causes.get("items") or () if item.get("change") == "gone")
    if gone:
        out.append(f"    and {gone} cause{'' if gone == 1 else 's'} of the baseline gone")
    return out


@dataclass
class Comparison:
    """A candidate run against a baseline, as the compare page shows it (the API's body is
    in `raw`). `passed` when the regression gate did not trip."""

    raw: dict[str, Any]

    @property
    def baseline_id(self) -> int:
        return int(self.raw["baseline"]["id"])

    @property
    def candidate_id(self) -> int:
        return int(self.raw["candidate"]["id"])

    @property
    def headline(self) -> str:
        return str(self.raw["headline"])

    @property
    def verdict(self) -> str:
        return str(self.raw["verdict"])

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.raw["counts"])

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return list(self.raw["regressions"]["results"])

    @property
    def regression_count(self) -> int:
        return int(self.raw["regressions"]["count"])

    @property
    def improvements(self) -> list[dict[str, Any]]:
        return list(self.raw["improvements"]["results"])

    @property
    def compare_url(self) -> str:
        return str(self.raw["compare_url"])

    @property
    def passed(self) -> bool:
        return not self.raw["gate"]["regressed"]

    def regression_lines(self) -> list[str]:
        """A line per regressed case listed (with the scores that moved), and how many more."""
        out = []
        shown = self.regressions
        for case in shown:
            moved = ", ".join(f"{name} {pair['baseline']:.3f} -> {pair['candidate']:.3f}"
                              for name, pair in case["scores"].items() if pair["baseline"] != pair["candidate"])
            out.append(f"  regressed: {case['eval_id']}" + (f" ({moved})" if moved else ""))
        if self.regression_count > len(shown):
            out.append(f"  ... and {self.regression_count - len(shown)} more regressions")
        still = self.raw.get("open_regressions") or {"count": 0, "results": []}  # older servers: none
        for case in still["results"]:
            out.append(f"  still open: {case['eval_id']} (regressed in run {case['regressed_in']} vs run "
                       f"{case['regressed_against']}, {case['candidate_outcome']} here"
                       + (f", triaged {case['triage']}" if case.get("triage") else "") + ")")
        if still["count"] > len(still["results"]):
            out.append(f"  ... and {still['count'] - len(still['results'])} more open regressions")
        return out

    def lines(self) -> list[str]:
        gate = self.raw["gate"]
        named = (self.raw.get("baseline_named") or {}).get("text") or f"vs baseline run {self.baseline_id}"
        return [f"{named}: {self.headline}", *cause_lines(self.raw.get("causes")),
                *notice_lines(self.raw.get("notices")),
                f"  regression gate: {'FAILED' if gate['regressed'] else 'passed'} ({gate['reason']})",
                *self.regression_lines(), f"  compare: {self.compare_url}"]

    def summary(self) -> str:
        return "\n".join(self.lines())

    def assert_passed(self) -> None:
        if not self.passed:
            raise AssertionError("evalsite: the candidate regressed\n" + self.summary())


@dataclass
class RunResult:
    """A finished run: `passed` when it completed with every case meeting its thresholds and
    (if it was compared with a baseline) nothing regressed."""

    run: Run
    failures: list[CaseFailure]  # the first few cases that did not pass
    comparison: Comparison | None = None
    notes: list[str] = field(default_factory=list)  # e.g. "no pinned baseline yet"

    @property
    def failure_count(self) -> int:
        return self.run.cases_failed + self.run.cases_errored + self.run.cases_missing + self.run.cases_unscored

    @property
    def passed(self) -> bool:
        return self.run.thresholds_met and (self.comparison is None or self.comparison.passed)

    def summary(self) -> str:
        run = self.run
        lines = [f"evalsite run {run.id}" + (f" ({run.name})" if run.name else "")
                 + f": {'PASSED' if self.passed else 'FAILED'} ({run.status})",
                 f"  {run.cases_total} results: {run.cases_passed} passed, {run.cases_failed} failed, "
                 f"{run.cases_unscored} not fully scored, {run.cases_errored} errored, {run.cases_missing} missing, "
                 f"{run.cases_not_runnable} not runnable"]
        lines.extend("  " + line for line in notice_lines(run.notices))
        for name, stats in ((run.summary or {}).get("criteria") or {}).items():
            rate = stats.get("pass_rate")
            mean = stats.get("mean")
            lines.append(f"  {name}: pass rate {'-' if rate is None else f'{rate:.1%}'}, "
                         f"mean {'-' if mean is None else f'{mean:.3f}'}")
        if self.failures:
            lines.append(f"  cases that did not pass ({len(self.failures)} of {self.failure_count} shown):")
            for failure in self.failures:
                lines.extend("    " + line for line in failure.lines())
        if self.comparison is not None:
            lines.extend("  " + line for line in self.comparison.lines())
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.append(f"  run: {run.url}")
        return "\n".join(lines)

    def assert_passed(self) -> None:
        """Raise AssertionError with the summary if the run did not pass (for pytest)."""
        if not self.passed:
            raise AssertionError(self.summary())


# --- The client -----------------------------------------------------------------------------


RunRef = Run | int
EvalSetRef = EvalSet | int | str
Outputs = Sequence[Mapping[str, Any]] | str | Path | bytes


class Client:
    """evalsite's API at `server` (`https://evals.example.com`), with an API token (default:
    the EVALSITE_TOKEN environment variable). `timeout` bounds each HTTP request."""

    def __init__(self, server: str, token: str | None = None, *, timeout: float = 60.0):
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise ValueError(f"server {server!r}: give the server's http(s) URL, like https://evals.example.com")
        self.server = server.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout = timeout
        # A proxy from the environment must not sit between the client and a server on this
        # machine; elsewhere the environment's proxies apply as for any urllib client.
        handlers: list[Any] = []
        if parsed.hostname in {"127.0.0.1", "localhost", "::1"}:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    # -- HTTP --

    def url(self, path: str) -> str:
        """A site URL for a path the API returned or a page path (`/runs/3/`)."""
        return path if path.startswith(("http://", "https://")) else self.server + path

    def create(self, path: str, *, json_body: Any = None, body: bytes | None = None, content_type: str = "") -> Any:
        """POST something to create (a run, an upload) once: with an `Idempotency-Key` that stays
        the same across retries, sent again after a dropped connection or a 502/503/504
        (CREATE_RETRY_PAUSES); the server answers a retry of a request it did with the first answer."""
        key = secrets.token_hex(16)
        for pause in (*CREATE_RETRY_PAUSES, None):
            try:
                return self.request("POST", path, json_body=json_body, body=body, content_type=content_type,
                                    headers={"Idempotency-Key": key})
            except ClientError as exc:
                retriable = isinstance(exc, ServerUnreachable) or exc.status in {502, 503, 504}
                if pause is None or not retriable:
                    raise
                time.sleep(pause)
        raise AssertionError("unreachable")  # the loop returns or raises

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None,
                body: bytes | None = None, content_type: str = "", into: IO[bytes] | None = None,
                headers: Mapping[str, str] | None = None) -> Any:
        """Call the API (`path` relative to /api/v1/) and return its decoded JSON (or copy the
        body into `into`). Raises ClientError / ServerUnreachable."""
        url = self.server + API + path.lstrip("/")
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        if json_body is not None:
            body = json.dumps(json_body).encode()
            content_type = "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310 - http(s) only
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                if into is not None:
                    shutil.copyfileobj(response, into)
                    return None
                data = response.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, url) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerUnreachable(f"cannot reach {self.server}: {reason}", code="unreachable", url=url) from None
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise ClientError(f"{url} did not answer with JSON: is {self.server} an evalsite server?",
                              code="not_json", url=url) from None

    def _paged(self, path: str, params: Mapping[str, Any] | None = None, page_size: int = 200) -> Iterator[Any]:
        offset = 0
        while True:
            page = self.request("GET", path, params={**(params or {}), "limit": page_size, "offset": offset})
            results = page.get("results") or []
            yield from results
            offset += len(results)
            if not results or page.get("next") is None or offset >= page.get("count", 0):
                return

    # -- Eval sets --

    def upload_evalsets(self, path_or_files: str | Path | Sequence[str | Path] | Mapping[str, bytes], *,
                        project: str | None = None, format: str | None = None) -> list[EvalSet]:
        """Upload eval-set files (a file, a zip, a folder, several paths, or {name: bytes});
        each eval set in them becomes a version (the same content is the same version)."""
        files = _files(path_or_files)
        fields = {"project": project, "format": format}
        body, content_type = _multipart({k: v for k, v in fields.items() if v}, [("file", n, d) for n, d in files])
        answer = self.create("evalsets/", body=body, content_type=content_type)
        return [self._evalset(outcome["evalset"], outcome.get("version"), created=bool(outcome.get("created")),
                              case_count=outcome.get("case_count")) for outcome in answer["results"]]

    def upload_evalset(self, path_or_files: str | Path | Sequence[str | Path] | Mapping[str, bytes], *,
                       project: str | None = None, format: str | None = None) -> EvalSet:
        """`upload_evalsets` for an upload that holds one eval set."""
        found = self.upload_evalsets(path_or_files, project=project, format=format)
        if len(found) != 1:
            raise ValueError(f"the upload holds {len(found)} eval sets ({', '.join(e.eval_set_id for e in found)}): "
                             "use upload_evalsets")
        return found[0]

    def evalset(self, ref: EvalSetRef, *, project: str | None = None) -> EvalSet:
        """An eval set by its id, or by the `eval_set_id` inside its file (in `project`)."""
        if isinstance(ref, EvalSet):
            return ref
        if isinstance(ref, int) or (isinstance(ref, str) and _is_id(ref)):
            return self._evalset(self.request("GET", f"evalsets/{int(ref)}/"))
        matches = [e for e in self._paged("evalsets/", {"project": project}) if e["eval_set_id"] == ref]
        if not matches:
            raise ClientError(f"no eval set {ref!r}" + (f" in project {project!r}" if project else "")
                              + " that you can see", code="not_found", status=404)
        if len(matches) > 1:
            raise ClientError(f"eval set {ref!r} is in several projects ("
                              + ", ".join(m["project"] for m in matches) + "): say which one", code="ambiguous")
        return self._evalset(matches[0])

    def _evalset(self, data: Mapping[str, Any], version: Mapping[str, Any] | None = None, *, created: bool = False,
                 case_count: int | None = None) -> EvalSet:
        version = version or data.get("latest_version") or {}
        return EvalSet(id=int(data["id"]), eval_set_id=str(data["eval_set_id"]), project=str(data.get("project")),
                       version=version.get("number"), case_count=case_count or version.get("case_count"),
                       created=created, url=self.url(f"/evalsets/{data['id']}/"), raw=dict(data))

    # -- Runs --

    def push_outputs(self, evalset: EvalSetRef, outputs: Outputs, config: Mapping[str, Any] | None = None,
                     baseline: RunRef | str | None = None, *, project: str | None = None, version: int | None = None,
                     name: str = "", model: str = "", branch: str = "", git_commit: str = "",
                     tags: Sequence[str] = (), eval_ids: Sequence[str] | None = None,
                     input_overrides: Mapping[str, Any] | None = None, preset: int | None = None) -> Run:
        """Start a run of `evalset` on the agent's outputs: a list of outputs (docs/runs.md's
        outputs format), or a JSON / JSONL / ADK result file (path or bytes). `config` is an
        AgentFlow EvalConfig (default: the eval set's own). `baseline` (a run, its id, "pinned"
        or "default") is what `wait` compares the finished run with."""
        fields: dict[str, Any] = {"target_kind": "uploaded", "name": name, "model": model, "branch": branch,
                                  "git_commit": git_commit, "tags": list(tags)}
        upload: tuple[str, bytes] | None = None
        if isinstance(outputs, str | Path | bytes):
            data = outputs if isinstance(outputs, bytes) else Path(outputs).read_bytes()
            filename = "outputs.json" if isinstance(outputs, bytes) else Path(outputs).name
            listed = _outputs_list(data, filename)
            if listed is None:  # an ADK result file: the server reads it
                upload = (filename, data)
            else:
                fields["outputs"] = listed
        else:
            fields["outputs"] = list(outputs)
        return self._start(evalset, fields, config=config, baseline=baseline, project=project, version=version,
                           eval_ids=eval_ids, input_overrides=input_overrides, preset=preset, upload=upload)

    def start_run(self, evalset: EvalSetRef, *, target_kind: str, target: Mapping[str, Any],
                  config: Mapping[str, Any] | None = None, baseline: RunRef | str | None = None,
                  project: str | None = None, version: int | None = None, iterations: int = 1, warmups: int = 0,
                  name: str = "", model: str = "", branch: str = "", git_commit: str = "",
                  tags: Sequence[str] = (), eval_ids: Sequence[str] | None = None,
                  input_overrides: Mapping[str, Any] | None = None, preset: int | None = None) -> Run:
        """Start a run whose outputs the server obtains itself: `target_kind` "http" (target
        `{"url": ..., "headers": ...}`) or "python" (`{"callable": "module:function"}`)."""
        fields: dict[str, Any] = {"target_kind": target_kind, "target": dict(target), "iterations": iterations,
                                  "warmups": warmups, "name": name, "model": model, "branch": branch,
                                  "git_commit": git_commit, "tags": list(tags)}
        return self._start(evalset, fields, config=config, baseline=baseline, project=project, version=version,
                           eval_ids=eval_ids, input_overrides=input_overrides, preset=preset)

    def _start(self, evalset: EvalSetRef, fields: dict[str, Any], *, config: Mapping[str, Any] | None,
               baseline: RunRef | str | None, project: str | None, version: int | None,
               eval_ids: Sequence[str] | None, input_overrides: Mapping[str, Any] | None,
               preset: int | None, upload: tuple[str, bytes] | None = None) -> Run:
        found = self.evalset(evalset, project=project)
        body = {"evalset": found.id, **fields}
        for key, value in (("config", config), ("version", version), ("preset", preset),
                           ("eval_ids", list(eval_ids) if eval_ids else None),
                           ("input_overrides", dict(input_overrides) if input_overrides else None)):
            if value is not None:
                body[key] = dict(value) if isinstance(value, Mapping) else value
        if upload is None:
            answer = self.create("runs/", json_body=body)
        else:
            # A file part; the other fields as form fields, lists and objects as JSON text.
            form = {key: value if isinstance(value, str) else json.dumps(value) for key, value in body.items()
                    if value not in ("", [], None)}
            data, content_type = _multipart(form, [("outputs_file", upload[0], upload[1])])
            answer = self.create("runs/", body=data, content_type=content_type)
        run = self._run(answer)
        run.baseline = baseline.id if isinstance(baseline, Run) else baseline
        return run

    def run(self, run: RunRef) -> Run:
        """The run as it is now."""
        found = self._run(self.request("GET", f"runs/{_run_id(run)}/"))
        if isinstance(run, Run):
            found.baseline = run.baseline
        return found

    def _run(self, data: Mapping[str, Any]) -> Run:
        return Run(id=int(data["id"]), status=data["status"], evalset=int(data["evalset"]),
                   evalset_version=int(data["evalset_version"]), name=data.get("name") or "",
                   cases_total=data["cases_total"], cases_done=data["cases_done"], cases_failed=data["cases_failed"],
                   cases_errored=data["cases_errored"], cases_missing=data["cases_missing"],
                   cases_not_runnable=data["cases_not_runnable"], summary=data.get("summary"),
                   url=self.url(f"/runs/{data['id']}/"), raw=dict(data),
                   cases_unscored=int(data.get("cases_unscored") or 0))

    def wait(self, run: RunRef, timeout: float = 600.0, poll: float = 1.0,
             progress_callback: Callable[[Run], None] | None = None, *, max_failures: int = 20) -> RunResult:
        """Poll until the run finishes, then return its result (compared with the run's
        baseline, if `push_outputs` was given one). `progress_callback(run)` is called
        whenever the run's progress moved. Raises WaitTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        current = self.run(run)
        seen: tuple[Any, ...] | None = None
        while True:
            state = (current.status, current.settled, current.cases_failed, current.cases_errored)
            if progress_callback is not None and state != seen:
                progress_callback(current)
            seen = state
            if current.finished:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"run {current.id} is still {current.status} after {timeout:g} s "
                                  f"({current.settled}/{current.cases_total} settled): {current.url}",
                                  code="timeout", url=current.url)
            time.sleep(min(poll, left))
            current = self.run(current)
        return self.result(current, max_failures=max_failures)

    def result(self, run: RunRef, *, max_failures: int = 20) -> RunResult:
        """A finished run's result: its counts, the first `max_failures` cases that did not
        pass with their scores and justifications, and its comparison with the baseline."""
        current = run if isinstance(run, Run) and run.finished else self.run(run)
        failures: list[CaseFailure] = []
        for status in FAILED_STATUSES:
            if len(failures) >= max_failures:
                break
            page = self.request("GET", f"runs/{current.id}/results/",
                                params={"status": status, "limit": max_failures - len(failures)})
            failures.extend(CaseFailure.from_result(r, current.url) for r in page["results"])
        result = RunResult(run=current, failures=failures)
        if current.baseline is not None:
            try:
                result.comparison = self.compare(current.baseline, current)
            except ClientError as exc:
                if exc.code != "no_baseline":
                    raise
                result.notes.append(_problem_text(exc))
        return result

    def iter_results(self, run: RunRef, *, status: str | None = None, applies_to: str | None = None,
                     page_size: int = 200) -> Iterator[dict[str, Any]]:
        """Every result of the run (API shape: status, scores with justifications, output)."""
        yield from self._paged(f"runs/{_run_id(run)}/results/", {"status": status, "applies_to": applies_to},
                               page_size)

    def compare(self, base: RunRef | str | None, candidate: RunRef, *, alpha: float | None = None,
                limit: int = 100) -> Comparison:
        """`candidate` against `base`: a run, its id, "pinned" (the eval set's pinned run) or
        None (the compare page's default). With `alpha`, the regression gate only trips on
        a criterion whose pass -> fail flips are significant at that level."""
        params: dict[str, Any] = {"candidate": _run_id(candidate), "limit": limit, "alpha": alpha}
        if base is not None:
            params["baseline"] = base if isinstance(base, str) else _run_id(base)
        return Comparison(self.request("GET", "compare/", params=params))

    def download_report(self, run: RunRef, path: str | Path) -> Path:
        """The run's AgentFlow EvalReport JSON, written to `path`."""
        target = Path(path)
        with open(target, "wb") as fh:
            self.request("GET", f"runs/{_run_id(run)}/report/", into=fh)
        return target


def _run_id(run: RunRef) -> int:
    return run.id if isinstance(run, Run) else int(run)


def _problem_text(exc: ClientError) -> str:
    return "; ".join(str(p.get("message")) for p in exc.problems) or exc.message


def _http_error(exc: urllib.error.HTTPError, url: str) -> ClientError:
    raw = exc.read()
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return ClientError(str(body["message"]), status=exc.code, code=str(body.get("code") or "error"),
                           problems=body.get("problems") or [], url=url)
    text = _clip(raw.decode("utf-8", "replace"), 200) if raw else exc.reason
    return ClientError(f"{url}: {text}", status=exc.code, code=f"http_{exc.code}", url=url)


def _files(source: str | Path | Sequence[str | Path] | Mapping[str, bytes]) -> list[tuple[str, bytes]]:
    """(name, bytes) to upload. A folder travels as one zip, so its layout (UiPath's
    evaluators/ beside eval-sets/) survives: multipart file names carry no folders."""
    if isinstance(source, Mapping):
        return [(str(name), bytes(data)) for name, data in source.items()]
    paths = [source] if isinstance(source, str | Path) else list(source)
    out = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for child in sorted(path.rglob("*")):
                    rel = child.relative_to(path).as_posix()
                    if child.is_file() and not child.is_symlink() and not any(
                            part.startswith(".") for part in rel.split("/")):
                        archive.write(child, rel)
            out.append((path.name + ".zip", buffer.getvalue()))
        else:
            out.append((path.name, path.read_bytes()))
    return out


def _outputs_list(data: bytes, filename: str) -> list[Any] | None:
    """Outputs from a file's bytes: a JSON list, `{"results": [...]}`, one output object, or
    JSON lines. None for any other document (an ADK result file): the server reads those."""
    try:
        text = data.decode("utf-8-sig")
        doc = json.loads(text)
    except UnicodeDecodeError:
        return None  # a zip of result files, say
    except RecursionError:
        return None  # nested too deeply: the server refuses it and says so
    except ValueError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except (ValueError, RecursionError):
            return None  # the server says what is wrong, and where
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        return list(doc["results"])
    if isinstance(doc, dict) and "eval_id" in doc:
        return [doc]
    return doc if isinstance(doc, list) else None


_FILENAME_ESCAPES = str.maketrans({'"': "%22", "\r": "%0D", "\n": "%0A"})


def _multipart(fields: Mapping[str, str], files: Sequence[tuple[str, str, bytes]]) -> tuple[bytes, str]:
    boundary = "evalsite-" + secrets.token_hex(16)
    chunks: list[bytes] = []
    for name, value in fields.items():
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        chunks.append(str(value).encode() + b"\r\n")
    for name, filename, data in files:
        chunks.append((f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                       f'filename="{filename.translate(_FILENAME_ESCAPES)}"\r\n'
                       "Content-Type: application/octet-stream\r\n\r\n").encode())
        chunks.append(data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


# --- JUnit XML ------------------------------------------------------------------------------

# Characters XML 1.0 cannot hold at all, even escaped (control characters, lone surrogates).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: Any) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def junit_xml(results: Iterable[Mapping[str, Any]], *, suite: str, run_id: int, run_url: str = "",
              compare_url: str = "", iterations: int = 1, criteria: Sequence[str] = (),
              causes: Sequence[Mapping[str, Any]] = (), notices: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """JUnit XML of a run's results (the API's result shape, scores included): one test
    case per eval case and criterion, named after the criterion, in class `suite/eval_id`;
    the comparison's top `causes` are properties (`cause_1`, ...), and so are the run's
    `notices` (`notice_1`, ...: a criterion it could not score, why, on how many cases).
    A score below its threshold is a failure carrying the justification; a criterion that
    could not be scored (not runnable, or its evaluator errored) is skipped with the reason:
    the run's set-up, said once in the notices, not the agent's error. A case the agent errored
    on (or had no output for) has no scores: it is an error under each of the run's `criteria`;
    a case that needs a user simulator is skipped."""
    root = ET.Element("testsuites", name="evalsite")
    suite_el = ET.SubElement(root, "testsuite", name=_xml(suite))
    properties = ET.SubElement(suite_el, "properties")
    for key, value in (("run_id", run_id), ("run_url", run_url), ("compare_url", compare_url)):
        if value:
            ET.SubElement(properties, "property", name=key, value=_xml(value))
    for number, item in enumerate((c for c in causes if c.get("change") != "gone"), start=1):
        said = f"{item['signature']}: {item['cases']} case{'' if item['cases'] == 1 else 's'}"
        said += f" ({item['change']})" if item.get("change") in ("new", "grown", "shrunk") else ""
        ET.SubElement(properties, "property", name=f"cause_{number}", value=_xml(said))
    for number, notice in enumerate(notices, start=1):
        ET.SubElement(properties, "property", name=f"notice_{number}", value=_xml(notice_text(notice)))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(classname: str, name: str) -> ET.Element:
        counts["tests"] += 1
        return ET.SubElement(suite_el, "testcase", classname=_xml(classname), name=_xml(name))

    for result in results:
        classname = f"{suite}/{result['eval_id']}"
        suffix = f" [iteration {result.get('iteration', 0)}]" if iterations > 1 else ""
        link = f"{run_url}cases/{result['id']}/" if run_url else ""
        status = str(result.get("status"))
        checks = score_checks(result)
        if status in {"error", "missing", "not_runnable", "pending"}:
            for name in [c.criterion for c in checks] or list(criteria) or ["agent output"]:
                element = case(classname, name + suffix)
                if status in {"not_runnable", "pending"}:
                    counts["skipped"] += 1
                    ET.SubElement(element, "skipped", message=_xml(result.get("error") or status))
                else:
                    counts["errors"] += 1
                    message = f"{status}: {result.get('error') or 'no output'}"
                    error = ET.SubElement(element, "error", message=_xml(_clip(message, 500)), type=status)
                    error.text = _xml(message + (f"\n\n{link}" if link else ""))
            continue
        for check in checks:
            element = case(classname, check.criterion + suffix)
            if check.error:
                counts["skipped"] += 1
                ET.SubElement(element, "skipped", message=_xml(_clip(f"not scored: {check.error}", 500)))
            elif check.passed is False:
                counts["failures"] += 1
                limit = threshold_text(check.threshold)
                message = f"score {check.score_text}" + (f" vs threshold {limit}" if limit else "")
                body = [f"{check.criterion} failed for {result['eval_id']}: {message}", "",
                        "justification:", json.dumps(check.justification, indent=2, ensure_ascii=False, default=str)]
                for detail in check.details:
                    where = detail.get("node_name") or f"turn {detail.get('turn_index')}"
                    body += ["", f"{detail.get('applies_to')} {where}: score {detail.get('score')}",
                             json.dumps(detail.get("justification") or {}, indent=2, ensure_ascii=False, default=str)]
                if link:
                    body += ["", link]
                failure = ET.SubElement(element, "failure", message=_xml(message), type="threshold")
                failure.text = _xml("\n".join(body))
    for key, value in counts.items():
        suite_el.set(key, str(value))
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


# --- `eval`: the CI command -----------------------------------------------------------------
#
# `python -m evaluations.client eval ...`, `python client.py eval ...` (a copy of this file) and
# `python manage.py eval --server ...` all run `run_eval`: the options, the remote run, the
# summary, JUnit, and the exit codes live here, once. `manage.py eval` adds its local mode.

DEMO_TARGET = "evaluations.demo.agent:respond"
FAILURES_SHOWN = 10
REGRESSIONS_SHOWN = 20


class UsageError(Exception):
    """A bad option or input: exit code 2, nothing started."""


class Writer(Protocol):
    """Where the command writes: a text stream (or Django's OutputWrapper)."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


def _say(stream: Writer, text: str = "") -> None:
    stream.write(text + "\n")


@dataclass
class Outcome:
    """A finished run, whichever mode ran it, in the API's shapes."""

    run: dict[str, Any]  # the API's run shape
    suite: str  # the eval set's id: JUnit class names are `suite/eval_id`
    run_url: str
    results: Callable[[], Iterable[Mapping[str, Any]]]  # every result, scores included
    failures: list[CaseFailure]  # the first few that did not pass
    comparison: dict[str, Any] | None = None  # the comparison API's body
    notes: list[str] = field(default_factory=list)
    link_note: str = ""


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The `eval` command's options (`manage.py eval` has the same)."""
    parser.add_argument("evalset", metavar="EVALSET", help="eval-set file, zip or folder, or an eval set id")
    parser.add_argument("--evalset", dest="evalset_id", metavar="ID",
                        help="the eval set to evaluate when EVALSET (a folder or zip) holds several")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--outputs", metavar="FILE", help="agent outputs (JSON or JSONL, or ADK result files)")
    source.add_argument("--target", metavar="URL_OR_CALLABLE",
                        help="an HTTP endpoint, a Python `module:function`, or `demo`")
    parser.add_argument("--config", metavar="FILE", help="evaluation config (AgentFlow EvalConfig or ADK "
                        "test_config.json); default: the eval set's own, else evalsite's")
    parser.add_argument("--project", default=None,
                        help="project slug (local default: default; remote default: your only project)")
    parser.add_argument("--workers", type=int, default=1,
                        help="parallel workers (default: 1); remote: the HTTP target's concurrency")
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--warmups", type=int, default=0)
    parser.add_argument("--eval-ids", help="comma-separated eval ids to run (default: all)")
    parser.add_argument("--input-overrides", metavar="JSON",
                        help='per eval id, merged into the inputs: {"eval-1": {"city": "Oslo"}}')
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                        help="HTTP header for the target (repeatable)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per agent call")
    parser.add_argument("--output-file", metavar="FILE", help="write the AgentFlow EvalReport JSON here")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML: a test case per eval case and criterion")
    parser.add_argument("--baseline", metavar="RUN_ID|pinned|default",
                        help="compare the run with this run of the same eval set, with its pinned run, or with "
                             "the default baseline the pages use (pinned, else the latest completed run on the "
                             "same branch, model and eval-set version)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when the run regressed against the baseline (default baseline: pinned)")
    parser.add_argument("--significance", type=float, metavar="ALPHA",
                        help="with --fail-on-regression: fail only on a criterion whose pass->fail flips are "
                             "significant at ALPHA (exact McNemar test)")
    parser.add_argument("--regressions-only", action="store_true",
                        help="with --fail-on-regression: cases below their thresholds alone do not fail "
                             "(cases failing in the baseline too are known failures)")
    parser.add_argument("--model", default="")
    parser.add_argument("--branch", default="")
    parser.add_argument("--commit", default="")
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--name", default="")
    remote = parser.add_argument_group("remote mode")
    remote.add_argument("--server", metavar="URL", help="run on this evalsite server over its API")
    remote.add_argument("--token", help=f"API token (default: ${TOKEN_ENV})")
    remote.add_argument("--poll", type=float, default=1.0, help="seconds between progress checks (default: 1)")
    remote.add_argument("--wait-timeout", type=float, default=3600.0,
                        help="give up waiting after this many seconds (default: 3600; exit 2)")


def _is_id(text: str) -> bool:
    """A run or eval-set id as a user types it: ASCII digits that fit an id column ("³" passes
    str.isdigit() and not int(); this file stands alone, so not evaluations.converters)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def check_eval_options(options: dict[str, Any]) -> None:
    """Checks every option before anything is uploaded or started, and adds what they
    say: `target_spec` (kind, target) for --target, `config_doc` for --config."""
    if options["token"] and not options["server"]:
        raise UsageError("--token is for remote mode: give --server URL too")
    alpha = options["significance"]
    if alpha is not None and not 0 < alpha <= 0.5:
        raise UsageError(f"--significance {alpha:g}: give a level between 0 and 0.5, like 0.05")
    if options["regressions_only"] and not options["fail_on_regression"]:
        raise UsageError("--regressions-only goes with --fail-on-regression")
    baseline = options["baseline"]
    if baseline is not None and baseline not in ("pinned", "default") and not _is_id(baseline):
        raise UsageError(f"--baseline {baseline!r}: give a run id, `pinned` or `default`")
    if options["fail_on_regression"] and baseline is None:
        options["baseline"] = "pinned"
    if options["workers"] < 1:
        raise UsageError("--workers must be at least 1")
    input_overrides_option(options)
    options["target_spec"] = parse_target(options) if options["target"] else None
    options["config_doc"] = read_config(options["config"]) if options["config"] else None


def eval_ids_option(options: Mapping[str, Any]) -> list[str] | None:
    if not options["eval_ids"]:
        return None
    return [e.strip() for e in options["eval_ids"].split(",") if e.strip()] or None


def input_overrides_option(options: Mapping[str, Any]) -> dict[str, Any]:
    if not options["input_overrides"]:
        return {}
    try:
        overrides = json.loads(options["input_overrides"])
    except json.JSONDecodeError as exc:
        raise UsageError(f"--input-overrides is not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError("--input-overrides is nested too deeply") from None
    if not isinstance(overrides, dict):
        raise UsageError('--input-overrides: give an object of eval id -> inputs, like {"eval-1": {"city": "Oslo"}}')
    return overrides


T = TypeVar("T")

ADK_TEST_CONFIG = "test_config.json"


def with_test_config(ref: str) -> list[str]:
    """An eval-set file and, as ADK's AgentEvaluator reads it, the `test_config.json` beside
    it (the ADK reader makes it the eval set's default config; other formats ignore it)."""
    path = Path(ref)
    sibling = path.with_name(ADK_TEST_CONFIG)
    if path.is_file() and path.name != ADK_TEST_CONFIG and sibling.is_file():
        return [ref, str(sibling)]
    return [ref]


def choose_evalset(ref: str, found: Sequence[tuple[str, T]], chosen: str | None) -> T:
    """The eval set of an upload to evaluate: the one `--evalset` names, else the only one;
    a usage error that lists them otherwise."""
    ids = ", ".join(eval_set_id for eval_set_id, _ in found)
    if chosen:
        for eval_set_id, item in found:
            if eval_set_id == chosen:
                return item
        raise UsageError(f"--evalset {chosen}: {ref} holds no eval set {chosen!r}; it holds {ids}")
    if len(found) != 1:
        raise UsageError(f"{ref} holds {len(found)} eval sets ({ids}): choose one with --evalset ID")
    return found[0][1]


def read_config(path: str) -> dict[str, Any]:
    """An evaluation config file as an AgentFlow EvalConfig document (an ADK
    test_config.json, criterion name -> threshold, becomes one). Whoever runs the evaluation
    validates it: the server (a 400 with the problems), or `manage.py eval` locally."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    except RecursionError:
        raise UsageError(f"--config {path}: the JSON is nested too deeply") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--config {path} is not an evaluation config: give a JSON object with `criteria`")
    criteria = doc.get("criteria")
    if isinstance(criteria, dict):  # ADK's thresholds given as bare numbers, some or all
        doc = {**doc, "criteria": {name: {"threshold": float(v)} if isinstance(v, int | float)
                                   and not isinstance(v, bool) else v for name, v in criteria.items()}}
    return doc


def parse_target(options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """--target as the API's (target_kind, target)."""
    target: str = options["target"] or ""
    if target == "demo":
        target = DEMO_TARGET
    if target.startswith(("http://", "https://")):
        headers = {}
        for header in options["header"]:
            name, sep, value = header.partition(":")
            if not sep:
                raise UsageError(f"--header {header!r}: use NAME:VALUE")
            headers[name.strip()] = value.strip()
        return "http", {"url": target, "headers": headers, "timeout_seconds": options["timeout"],
                        "concurrency": max(1, options["workers"])}
    if ":" in target:
        return "python", {"callable": target, "timeout_seconds": options["timeout"]}
    raise UsageError(f"--target {target!r}: give an http(s) URL, a Python module:function, or `demo`")


def progress_line(settled: int, total: int, failed: int, errored: int) -> str:
    return f"  {settled}/{total} done, {failed} failed, {errored} errored"


def remote_outcome(options: dict[str, Any], out: Writer, err: Writer) -> Outcome:
    """Runs the evaluation on `options["server"]`: uploads or finds the eval set, pushes the
    outputs or starts the target run, waits (progress on `err`), compares, downloads."""
    token = options["token"] or os.environ.get(TOKEN_ENV)
    if not token:
        raise UsageError(f"remote mode needs an API token: --token T or ${TOKEN_ENV}")
    try:
        client = Client(options["server"], token)
    except ValueError as exc:
        raise UsageError(f"--server: {exc}") from None
    evalset = _remote_evalset(client, options, out)
    baseline_ref = options["baseline"]
    if baseline_ref and baseline_ref not in ("pinned", "default"):
        found = client.run(int(baseline_ref))  # a 404 here: nothing started
        if found.evalset != evalset.id:
            raise UsageError(f"--baseline {baseline_ref}: run {baseline_ref} is of another eval set "
                             f"(id {found.evalset}), not {evalset.eval_set_id!r} (id {evalset.id})")
    common: dict[str, Any] = {
        "config": options.get("config_doc"), "project": options["project"], "eval_ids": eval_ids_option(options),
        "input_overrides": input_overrides_option(options) or None, "name": options["name"],
        "model": options["model"], "branch": options["branch"], "git_commit": options["commit"],
        "tags": options["tag"]}
    if options["outputs"]:
        path = Path(options["outputs"])
        if not path.is_file():
            raise UsageError(f"--outputs {path}: no such file")
        run = client.push_outputs(evalset, path, **common)
    else:
        kind, target = options["target_spec"] or parse_target(options)
        run = client.start_run(evalset, target_kind=kind, target=target, iterations=options["iterations"],
                               warmups=options["warmups"], **common)
    _say(out, f"run {run.id}: {run.cases_total} results to evaluate "
              f"({evalset.eval_set_id} v{run.evalset_version}) on {client.server}")
    out.flush()

    def progress(current: Run) -> None:
        _say(err, progress_line(current.settled, current.cases_total, current.cases_failed, current.cases_errored))

    result = client.wait(run, timeout=options["wait_timeout"], poll=options["poll"], progress_callback=progress,
                         max_failures=FAILURES_SHOWN)
    finished = result.run
    outcome = Outcome(run=finished.raw, suite=evalset.eval_set_id, run_url=finished.url,
                      results=lambda: client.iter_results(finished, page_size=500), failures=result.failures)
    if baseline_ref:
        try:
            compared = client.compare(baseline_ref, finished, alpha=options["significance"], limit=REGRESSIONS_SHOWN)
        except ClientError as exc:
            if exc.code != "no_baseline":
                raise
            outcome.notes.append(f"{exc.message}: nothing to compare with yet (pin a run on its page)")
        else:
            outcome.comparison = compared.raw
    if options["output_file"]:
        client.download_report(finished, options["output_file"])
        _say(out, f"report written to {options['output_file']}")
    return outcome


def _remote_evalset(client: Client, options: Mapping[str, Any], out: Writer) -> EvalSet:
    ref = options["evalset"]
    if Path(ref).exists():
        uploaded = client.upload_evalsets(with_test_config(ref), project=options["project"])
        evalset = choose_evalset(ref, [(e.eval_set_id, e) for e in uploaded], options.get("evalset_id"))
        _say(out, f"eval set {evalset.eval_set_id} v{evalset.version} "
                  f"({'uploaded' if evalset.created else 'unchanged'}, {evalset.case_count} cases)")
        return evalset
    try:
        return client.evalset(ref, project=options["project"])
    except ClientError as exc:
        if exc.status == 404:
            raise UsageError(f"no file and no eval set {ref!r} on {client.server}") from None
        raise


def print_summary(outcome: Outcome, options: Mapping[str, Any], out: Writer) -> None:
    """The criteria table, the counts, the first failed cases, the comparison, the links."""
    run = outcome.run
    summary = run.get("summary") or {}

    def write(text: str = "") -> None:
        _say(out, text)

    write()
    write(f"{'criterion':<32} {'mean':>7} {'pass rate':>10} {'count':>6} {'errors':>7}")
    for name, stats in (summary.get("criteria") or {}).items():
        mean = "-" if stats.get("mean") is None else f"{stats['mean']:.3f}"
        shown = "-" if stats.get("pass_rate") is None else f"{stats['pass_rate']:.1%}"
        write(f"{name:<32} {mean:>7} {shown:>10} {stats['count']:>6} {stats['errors']:>7}")
    latency = summary.get("latency") or {}
    if latency.get("count"):
        write(f"latency p50 {latency['p50']:.3f} s, p95 {latency['p95']:.3f} s, max {latency['max']:.3f} s")
    rate = summary.get("pass_rate")
    unscored = int(run.get("cases_unscored") or 0)
    passed = run["cases_done"] - run["cases_failed"] - run["cases_errored"] - unscored
    write(f"{run['status']}: {run['cases_total']} results, {passed} passed, {run['cases_failed']} failed, "
          f"{unscored} not fully scored, {run['cases_errored']} errored, {run['cases_missing']} missing, "
          f"{run['cases_not_runnable']} not runnable"
          + (f" (pass rate {rate:.1%} of the {passed + run['cases_failed']} passed or failed)" if rate is not None
             else ""))
    compared = outcome.comparison
    notices = compared.get("notices") if compared is not None and "notices" in compared else summary.get("notices")
    for line in notice_lines(notices if isinstance(notices, list) else []):
        write(line)
    if outcome.failures:
        total = run["cases_failed"] + run["cases_errored"] + run["cases_missing"] + unscored
        write()
        write(f"cases that did not pass ({len(outcome.failures)} of {total} shown):")
        for failure in outcome.failures:
            for line in failure.lines():
                write("  " + line)
    if compared is not None:
        write()
        named = (compared.get("baseline_named") or {}).get("text") or f"vs baseline run {compared['baseline']['id']}"
        write(f"{named}: {compared['headline']}")
        for line in cause_lines(compared.get("causes")):
            write(line)
        write(f"{'cases':<16} {'baseline -> candidate':>22}")
        for key, count in compared["counts"].items():
            if count:
                write(f"  {key:<14} {count:>22}")
        for line in Comparison(compared).regression_lines():
            write(line)
        gate = compared["gate"]
        write(f"regression gate: {'FAILED' if gate['regressed'] else 'passed'} ({gate['reason']})"
              + ("" if options["fail_on_regression"] else ", not gating: no --fail-on-regression"))
    for note in outcome.notes:
        write(f"note: {note}")
    write()
    write(f"run page:     {outcome.run_url}")
    if compared is not None:
        write(f"compare page: {compared['compare_url']}")
    if outcome.link_note:
        write(f"  ({outcome.link_note})")


def write_junit(outcome: Outcome, path: str, out: Writer) -> None:
    run = outcome.run
    criteria = [name for name, c in ((run.get("config") or {}).get("criteria") or {}).items()
                if c.get("enabled", True)]
    compare_url = outcome.comparison["compare_url"] if outcome.comparison else ""
    causes = ((outcome.comparison or {}).get("causes") or {}).get("items") or []
    compared = outcome.comparison or {}
    notices = compared.get("notices") if "notices" in compared else (run.get("summary") or {}).get("notices")
    data = junit_xml(outcome.results(), suite=outcome.suite, run_id=run["id"], run_url=outcome.run_url,
                     compare_url=compare_url, iterations=run.get("iterations") or 1, criteria=criteria,
                     causes=causes[:CAUSES_SHOWN], notices=notices if isinstance(notices, list) else [])
    Path(path).write_bytes(data)
    _say(out, f"JUnit XML written to {path}")


def exit_code(outcome: Outcome, options: Mapping[str, Any]) -> int:
    run = outcome.run
    if run["status"] != "completed":
        return 1
    below_threshold = (run["cases_failed"] or run["cases_errored"] or run["cases_missing"]
                       or run.get("cases_unscored"))
    if below_threshold and not options["regressions_only"]:
        return 1
    compared = outcome.comparison
    if options["fail_on_regression"] and compared is not None and compared["gate"]["regressed"]:
        return 1
    return 0


def run_eval(options: dict[str, Any], *, out: Writer, err: Writer,
             local: Callable[[dict[str, Any]], Outcome] | None = None) -> int:
    """The `eval` command on parsed options: remote with --server, else `local(options)`
    (`manage.py eval`; without it --server is required). Returns the exit code."""
    try:
        check_eval_options(options)
        if options["server"]:
            outcome = remote_outcome(options, out, err)
        elif local is not None:
            outcome = local(options)
        else:
            raise UsageError("give --server URL (and --token T or $EVALSITE_TOKEN): this command runs the "
                             "evaluation on an evalsite server; `python manage.py eval` in an evalsite checkout "
                             "also runs it locally")
        print_summary(outcome, options, out)
        if options["junit"]:
            write_junit(outcome, options["junit"], out)
    except UsageError as exc:
        _say(err, f"error: {exc}")
        return 2
    except ClientError as exc:
        hint = ""
        if exc.status == 401:
            hint = f"\n  (check --token or ${TOKEN_ENV}: create a token on your account page)"
        _say(err, f"error: {exc}{hint}")
        return 2
    except OSError as exc:  # an unreadable input or an unwritable --junit / --output-file
        _say(err, f"error: {exc}")
        return 2
    return exit_code(outcome, options)


def main(argv: list[str] | None = None) -> int:
    """`python -m evaluations.client eval EVALSET --server URL ...` (or `python client.py
    eval ...`): `manage.py eval`'s remote mode, standard library only."""
    parser = argparse.ArgumentParser(
        description="evalsite's CI client: evaluate an agent on a team server, print a summary, and gate on "
                    "thresholds and regressions (exit 0 good, 1 failed or regressed, 2 usage or server error).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_eval_arguments(commands.add_parser(
        "eval", help="evaluate on an evalsite server (the same as `manage.py eval --server`)",
        description="Evaluate an agent (uploaded outputs or a target the server calls) on an eval set on an "
                    "evalsite server, print a summary table and the run and compare links, and exit 0 (good), "
                    "1 (thresholds failed, run not completed, or with --fail-on-regression a regression) or 2 "
                    "(usage, input or server error)."))
    try:
        options = vars(parser.parse_args(argv))
    except SystemExit as exc:  # --help, or argparse's usage error
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return run_eval(options, out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
