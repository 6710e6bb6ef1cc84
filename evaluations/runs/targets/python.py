"""The Python target: a `module:function` callable run in the worker, as Upsonic measures it.

The callable gets each turn's `TurnRequest` as a dict and returns a `TurnReply`-shaped dict,
a plain string (the final response), or a pydantic model of either; a coroutine function
works too. Cases run one after another (so that neither the clock nor tracemalloc measures
two cases at once), turn by turn through the shared driver (`evaluations.runs.targets.http`).

Measurement follows Upsonic's `PerformanceRunResult`:

- `warmups` unrecorded runs of a case come before its first measured run;
- the measured run of one (case, iteration), all its turns, is timed with `perf_counter`
  (`AgentOutput.latency_seconds`; each turn's call in `TurnOutput.latency_seconds`) and
  traced with tracemalloc: `memory_increase_bytes` is the net change in traced memory from
  the start of the run to its end (negative when the run freed more than it kept), and
  `memory_peak_bytes` the highest traced memory during the run relative to its start.

Failures are recorded, never raised: an exception in the callable becomes the turn's and the
case's error; a callable that runs past `timeout_seconds` is abandoned (a thread cannot be
stopped: it finishes in the background) and the case's remaining turns are not sent. A
callable that cannot be imported fails every output with the reason.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
import tracemalloc
from collections.abc import Callable
from time import perf_counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evaluations.runs.targets.http import ReplyError, SimulateUser, TurnResult, drive_case, reply_from_value
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput

AgentCallable = Callable[[dict[str, Any]], Any]


class PythonTargetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")  # "package.module:function"
    warmups: int = Field(default=0, ge=0, le=100)
    timeout_seconds: float | None = Field(default=60.0, gt=0)  # None: call in the worker's own thread
    metadata: dict[str, Any] = Field(default_factory=dict)  # sent in every TurnRequest's metadata


def load_callable(path: str) -> AgentCallable:
    """The object `module:attr.attr` names; raises ValueError (or the import's error)."""
    module_name, _, attr_path = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        target = getattr(target, attr, None)
        if target is None:
            raise ValueError(f"{module_name} has no {attr_path}")
    if not callable(target):
        raise ValueError(f"{path} is not callable")
    return target


def _invoke(func: AgentCallable, request: dict[str, Any]) -> Any:
    value = func(request)
    if inspect.iscoroutine(value):
        value = asyncio.run(value)
    return value


class PythonTarget:
    def __init__(self, spec: PythonTargetSpec, *, simulate_user: SimulateUser | None = None,
                 max_simulated_turns: int = 50):
        self.spec = spec
        self.simulate_user = simulate_user
        self.max_simulated_turns = max_simulated_turns

    def run_many(self, work: list[tuple[EvalCase, int]], *,
                 input_overrides: dict[str, dict[str, Any]] | None = None) -> list[AgentOutput]:
        """One output per (case, iteration), in the order given; never raises."""
        try:
            func = load_callable(self.spec.callable)
        except Exception as exc:  # whatever the import raises is the user's to see
            reason = f"cannot load {self.spec.callable}: {type(exc).__name__}: {exc}"
            return [AgentOutput(eval_id=case.eval_id, iteration=iteration, error=reason) for case, iteration in work]
        overrides = input_overrides or {}
        warmed: set[str] = set()
        outputs = []
        for case, iteration in work:
            case_overrides = overrides.get(case.eval_id)
            if case.eval_id not in warmed:
                warmed.add(case.eval_id)
                for _ in range(self.spec.warmups):
                    self._drive(func, case, iteration, case_overrides, warmup=True)
            outputs.append(self._measured(func, case, iteration, case_overrides))
        return outputs

    def _measured(self, func: AgentCallable, case: EvalCase, iteration: int,
                  overrides: dict[str, Any] | None) -> AgentOutput:
        started_here = not tracemalloc.is_tracing()
        if started_here:
            tracemalloc.start()
        tracemalloc.reset_peak()
        baseline, _ = tracemalloc.get_traced_memory()
        start = perf_counter()
        try:
            output = self._drive(func, case, iteration, overrides, warmup=False)
        finally:
            elapsed = perf_counter() - start
            current, peak = tracemalloc.get_traced_memory()
            if started_here:
                tracemalloc.stop()
        output.latency_seconds = elapsed
        output.memory_increase_bytes = current - baseline
        output.memory_peak_bytes = max(0, peak - baseline)
        return output

    def _drive(self, func: AgentCallable, case: EvalCase, iteration: int, overrides: dict[str, Any] | None, *,
               warmup: bool) -> AgentOutput:
        metadata = {**self.spec.metadata, "warmup": True} if warmup else self.spec.metadata
        try:
            return drive_case(case, iteration, lambda request: self._call(func, request), overrides=overrides,
                              metadata=metadata, simulate_user=self.simulate_user,
                              max_simulated_turns=self.max_simulated_turns)
        except Exception as exc:  # a bug must cost one case, not the whole batch
            return AgentOutput(eval_id=case.eval_id, iteration=iteration,
                               error=f"internal error: {type(exc).__name__}: {exc}")

    def _call(self, func: AgentCallable, request: dict[str, Any]) -> TurnResult:
        timeout = self.spec.timeout_seconds
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = _invoke(func, request)
            except (Exception, SystemExit) as exc:  # sys.exit() in an agent must not end the worker
                box["error"] = exc

        start = perf_counter()
        if timeout is None:
            call()
        else:
            thread = threading.Thread(target=call, daemon=True, name="evalsite-python-target")
            thread.start()
            thread.join(timeout)
            if thread.is_alive():
                return TurnResult(error=f"timed out after {timeout:g}s", latency_seconds=perf_counter() - start)
        latency = perf_counter() - start
        if "error" in box:
            exc = box["error"]
            return TurnResult(error=f"{type(exc).__name__}: {exc}", latency_seconds=latency)
        try:
            reply = reply_from_value(box.get("value"))
        except ReplyError as exc:
            return TurnResult(error=str(exc), latency_seconds=latency)
        return TurnResult(reply=reply, latency_seconds=latency)
