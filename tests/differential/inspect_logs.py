"""Eval logs written by `inspect_ai` itself, for evalsite's Inspect reader: run by the interpreter
of the venv that has inspect-ai (.differential/inspect, requirements-differential-inspect.txt),
never by evalsite's.

    .differential/inspect/bin/python tests/differential/inspect_logs.py OUT_DIR [--epochs N] [--name STEM]
    .differential/inspect/bin/python tests/differential/inspect_logs.py --read-dataset FILE.jsonl

A local task with `mockllm/model` (no network): a plain-string sample, a chat-message sample with
a system prompt and a list target, a sample whose scripted model calls a tool and answers from its
result, and one that fails; scored by `match()`, `includes()`, a custom scorer whose value is a
dict with an explanation and metadata, and one whose value is "C"/"I". The eval is written twice,
as `.eval` (zip) and as `.json`; then each log is read back with inspect's own `read_eval_log`,
and what inspect reads (every sample's id, epoch, scores, model usage) is printed as one JSON
document on stdout, for tests/differential/test_inspect.py to compare with evalsite's import.
`--read-dataset` reads a JSONL dataset (one evalsite exported) with inspect's `json_dataset()`
and prints its samples as inspect sees them.

With `--name`, the logs are renamed `STEM.eval` and `STEM.json`: that is how the plain suite's
fixtures in tests/data/inspect/ were written (see its README.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("INSPECT_DISPLAY", "none")
os.environ.setdefault("INSPECT_LOG_LEVEL", "error")
os.environ.setdefault("INSPECT_PY_LOGGER_LEVEL", "error")


def build_task() -> Any:
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, includes, match, mean, scorer
    from inspect_ai.solver import TaskState, generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def get_weather() -> Any:
        async def execute(city: str, unit: str = "celsius") -> str:
            """The weather in a city.

            Args:
                city: The city.
                unit: celsius or fahrenheit.
            """
            return f"sunny, 22 degrees {unit} in {city}"

        return execute

    @scorer(metrics={"length": [mean()], "words": [mean()], "shouted": [mean()]})
    def shape() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            answer = state.output.completion
            return Score(value={"length": len(answer), "words": len(answer.split()), "shouted": answer.isupper()},
                         answer=answer, explanation=f"{len(answer)} characters, {len(answer.split())} words",
                         metadata={"target": target.text})

        return score

    @scorer(metrics=[accuracy()])
    def mentions_target() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            found = any(t.lower() in state.output.completion.lower() for t in target.target)
            return Score(value=CORRECT if found else INCORRECT, answer=state.output.completion,
                         explanation="the answer names the target" if found else "the target is not named")

        return score

    @task
    def evalsite_fixture() -> Task:
        samples = [
            Sample(id=1, input="What is 2 + 2? Answer with the number.", target="4"),
            Sample(id="capital", input=[ChatMessageSystem(content="Answer briefly."),
                                        ChatMessageUser(content="What is the capital of France?")],
                   target=["Paris", "paris"], metadata={"topic": "geography", "level": 1}),
            Sample(id="weather", input="What is the weather in Tokyo?", target="sunny",
                   metadata={"needs_tool": True}),
            Sample(id="東京", input="Name the capital of Japan in Japanese.", target="東京"),
        ]
        return Task(dataset=samples, solver=[use_tools([get_weather()]), generate()],
                    scorer=[match(), includes(), shape(), mentions_target()])

    return evalsite_fixture()


def scripted(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> Any:
    """The mock model's answer to a conversation: a tool call for the weather, then its result."""
    from inspect_ai.model import ModelOutput

    last = messages[-1]
    text = last.text if hasattr(last, "text") else str(last.content)
    if last.role == "tool":
        output = ModelOutput.from_content("mockllm/model", f"It is {last.text.split(',')[0]} in Tokyo.")
    elif "weather" in text:
        output = ModelOutput.for_tool_call("mockllm/model", "get_weather", {"city": "Tokyo", "unit": "celsius"},
                                           tool_call_id="call_weather_1")
    elif "2 + 2" in text:
        output = ModelOutput.from_content("mockllm/model", "4")
    elif "France" in text:
        output = ModelOutput.from_content("mockllm/model", "The capital of France is Paris.")
    else:
        output = ModelOutput.from_content("mockllm/model", "TOKYO")
    from inspect_ai.model import ModelUsage

    output.usage = ModelUsage(input_tokens=10 * len(messages), output_tokens=len(output.completion.split()) + 1,
                              total_tokens=10 * len(messages) + len(output.completion.split()) + 1)
    return output


def write_logs(out: Path, epochs: int) -> list[Path]:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    written = []
    for fmt in ("eval", "json"):
        model = get_model("mockllm/model", custom_outputs=scripted)
        [log] = inspect_eval(build_task(), model=model, log_dir=str(out), log_format=fmt, epochs=epochs,
                             display="none", log_level="error")
        assert log.status == "success", log.error
        written.append(Path(log.location))
    return written


def as_read(path: Path) -> dict[str, Any]:
    """What inspect reads back from a log: the figures evalsite must keep, as plain JSON."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    samples = []
    for sample in log.samples or []:
        scores = {name: {"value": s.value, "answer": s.answer, "explanation": s.explanation,
                         "metadata": s.metadata} for name, s in (sample.scores or {}).items()}
        usage = {model: u.model_dump(mode="json", exclude_none=True) for model, u in sample.model_usage.items()}
        calls = [{"function": c.function, "arguments": c.arguments, "id": c.id}
                 for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        results = [m.text for m in sample.messages if m.role == "tool"]
        samples.append({"id": sample.id, "epoch": sample.epoch, "scores": scores, "usage": usage,
                        "target": sample.target, "completion": sample.output.completion,
                        "tool_calls": calls, "tool_results": results})
    return {"file": path.name, "format": path.suffix.lstrip("."), "model": log.eval.model,
            "status": log.status, "samples": samples}


def read_dataset(path: str) -> dict[str, Any]:
    from inspect_ai.dataset import json_dataset

    samples = []
    for sample in json_dataset(path):
        given = sample.input if isinstance(sample.input, str) else [
            m.model_dump(mode="json", exclude_none=True, exclude={"id"}) for m in sample.input]
        samples.append({"id": sample.id, "input": given, "target": sample.target, "choices": sample.choices,
                        "metadata": sample.metadata})
    return {"samples": samples}


def main() -> None:
    if sys.argv[1] == "--read-dataset":
        print(json.dumps(read_dataset(sys.argv[2]), ensure_ascii=False))
        return
    out = Path(sys.argv[1])
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 1
    out.mkdir(parents=True, exist_ok=True)
    stdout = sys.stdout
    sys.stdout = sys.stderr  # what inspect prints must not reach the reply
    logs = write_logs(out, epochs)
    if "--name" in sys.argv:
        stem = sys.argv[sys.argv.index("--name") + 1]
        logs = [log.rename(out / f"{stem}{log.suffix}") for log in logs]
    stdout.write(json.dumps({"logs": [as_read(p) for p in logs]}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
