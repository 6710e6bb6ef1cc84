"""Judged criteria at speed (issue 42): a run of N cases x 3 DeepEval metrics
(`deepeval_answer_relevancy`, `deepeval_faithfulness`, `deepeval_bias`, without their reason
calls: 7 judge calls a case) on uploaded outputs, queued to a real `qcluster` with one worker,
against a scripted OpenAI-compatible judge on 127.0.0.1 that answers every call after 50 ms.

    python bench/judge_bench.py [--cases 1000] [--latency 0.05] [--concurrency 8] [--json]

The clock starts before the run is created and stops when it is completed. The floor, in the
same run: the ideal `calls x latency / concurrency` for the calls the judge actually answered
(counted by the server, and by the run's own `judge_calls`). Target: <= 1.2x the floor. Also
printed: the mean number of calls in flight as each arrived, and the same number of calls made
by `concurrency` bare threads against the same server right after (a quarter of them, scaled):
what a loaded machine adds to each call whatever evalsite does.
On SQLite in a scratch data directory (DATABASE_URL and REDIS_URL are ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CRITERIA = {
    "deepeval_answer_relevancy": {"threshold": 0.5, "options": {"include_reason": False}},
    "deepeval_faithfulness": {"threshold": 0.5, "options": {"include_reason": False}},
    "deepeval_bias": {"threshold": 0.5, "options": {"include_reason": False}},
}
REPLIES = {
    "Statements": {"statements": ["Paris is sunny.", "It is 21 degrees.", "Bring sunglasses."]},
    "Truths": {"truths": ["Paris is sunny today.", "The high is 21 degrees."]},
    "Claims": {"claims": ["Paris is sunny.", "It is 21 degrees."]},
    "Opinions": {"opinions": ["Sunglasses are a good idea."]},
    "Verdicts": {"verdicts": [{"verdict": "yes"}, {"verdict": "yes"}, {"verdict": "no", "reason": "aside"}]},
}


def generate(cases: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    eval_cases, outputs = [], []
    for i in range(cases):
        eval_cases.append({"eval_id": f"case_{i:05d}", "metadata": {"retrieval_context": [
            f"Forecast {i}: Paris is sunny today.", "The high is 21 degrees."]}, "conversation": [{
                "invocation_id": "t1", "user_content": {"role": "user", "content": f"Weather in Paris, day {i}?"},
                "expected_final_response": {"role": "assistant", "content": "Sunny, 21 degrees."}}]})
        outputs.append({"eval_id": f"case_{i:05d}", "turns": [{
            "invocation_id": "t1", "final_response": "Paris is sunny and 21 degrees; bring sunglasses."}]})
    return {"eval_set_id": "bench_judge", "name": "Judge benchmark", "eval_cases": eval_cases}, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    args = parser.parse_args()
    result = run_bench(args.cases, args.latency, args.concurrency)
    if args.json:
        print(json.dumps(result))


def run_bench(cases: int, latency: float, concurrency: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-judge-bench-"))
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["EVALSITE_DATA_DIR"] = str(tmp)
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    sys.path.insert(0, str(REPO / "bench"))
    import scratch
    from django.conf import settings

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import Run
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig
    from tests.llm_server import Behaviour, FakeLLM

    scratch.migrate()
    evalset, raw_outputs = generate(cases)
    project = project_get_or_create_default()
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(evalset).encode())])
    answered = 0
    in_flight: list[int] = []  # at each call's arrival, the calls being answered (itself included)

    def respond(body: dict[str, Any]) -> Behaviour:
        nonlocal answered
        answered += 1
        in_flight.append(judge.in_flight)
        name = body["response_format"]["json_schema"]["name"]
        return Behaviour(content=json.dumps(REPLIES[name]), delay=latency,
                         usage={"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340})

    with FakeLLM() as judge:
        judge.responder = respond
        env = {**os.environ, "EVALSITE_WORKERS": "1", "SECRET_KEY": settings.SECRET_KEY,
               "EVALSITE_LLM_BASE_URL": judge.url, "EVALSITE_LLM_MODEL": "gpt-4o-mini", "EVALSITE_LLM_API_KEY": "k",
               "EVALSITE_JUDGE_CONCURRENCY": str(concurrency)}
        log = open(tmp / "qcluster.log", "w")  # noqa: SIM115 - closed below
        cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        time.sleep(2.0)  # the cluster's worker up before the clock starts
        try:
            started = time.perf_counter()
            run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded",
                                  outputs=read_outputs([SourceFile("outputs.json", json.dumps(raw_outputs).encode())]),
                                  config=EvalConfig.model_validate({"criteria": CRITERIA}))
            while Run.objects.filter(pk=run.pk).values_list("status", flat=True).get() not in {"completed", "failed"}:
                time.sleep(0.05)
            total = time.perf_counter() - started
        finally:
            cluster.send_signal(signal.SIGTERM)
            cluster.wait(timeout=60)
            log.close()
        made = answered  # the run's calls (the floor's below are not the run's)
        # The floor this machine allows now: the same number of calls, made by `concurrency` bare
        # threads (no evalsite), each sending its share one after another; a quarter, scaled.
        from concurrent.futures import ThreadPoolExecutor

        from evaluations.evaluators.deepeval_judged import schemas
        from evaluations.evaluators.llm import ChatClient

        client = ChatClient(base_url=judge.url, model="gpt-4o-mini", api_key="k")
        share = max(1, made // 4 // concurrency)

        def calls(_: int) -> None:
            for _ in range(share):
                client.structured_text([{"role": "user", "content": "x"}], schemas.Statements)

        began = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(calls, range(concurrency)))
        measured = (time.perf_counter() - began) * made / (share * concurrency)
        client.close()
    run.refresh_from_db()
    answered = made
    ideal = answered * latency / concurrency
    print(f"{cases} cases x {len(CRITERIA)} judged metrics, {answered} judge calls at {latency * 1000:.0f} ms, "
          f"{concurrency} in flight: {total:.2f} s end to end (status {run.status}; the run counted "
          f"{run.judge_calls} calls, {run.judge_prompt_tokens + run.judge_completion_tokens} tokens, "
          f"${run.judge_cost_usd or 0:.4f}; estimated beforehand {run.judge_estimate})")
    mean = sum(in_flight) / max(1, len(in_flight))
    print(f"calls in flight when one arrived: mean {mean:.2f} of {concurrency}")
    print(f"floor (the ideal: calls x latency / concurrency): {ideal:.2f} s; ratio {total / ideal:.3f}x "
          f"(target <= 1.2x): {'OK' if total / ideal <= 1.2 else 'OVER TARGET'}")
    print(f"the same calls from {concurrency} bare threads, measured now (a quarter, scaled): {measured:.2f} s "
          f"({measured / ideal:.2f}x the ideal: this machine's own overhead); ratio to it {total / measured:.3f}x")
    return {"seconds": total, "floor_seconds": ideal, "ratio": total / ideal, "calls": answered, "mean_in_flight": mean,
            "measured_floor_seconds": measured, "measured_ratio": total / measured,
            "run_calls": run.judge_calls, "cases": cases, "status": run.status}


if __name__ == "__main__":
    main()
