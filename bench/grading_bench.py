"""Grading benchmark: one run of 10,000 cases scored by the deterministic criteria and by a
real LLM judge (`llm_judge`, against the fake chat-completions server the tests use, on
127.0.0.1), 500 of its results graded by two people; the grading queue and the calibration
page through the Django test client.

    python bench/grading_bench.py [--cases 10000] [--graded 500] [--repeat 9]   # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_grading python bench/grading_bench.py

Printed: the queue page cold (the stratified sample's cache emptied before each request: the
window-function query runs) and warm (the sample from the cache; the disagreements and the
page's rows are always read), the calibration page (its one GROUP BY), and the floor, a
logged-in page that renders the site's frame only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def _timed(call: Any, repeat: int, before: Any = None) -> list[float]:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return times


def _line(label: str, times: list[float]) -> str:
    return f"{label:<28} median {statistics.median(times):8.1f} ms  (min {min(times):.1f}, max {max(times):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--graded", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-grading-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per judge call otherwise
    import engine_bench
    import scratch
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import CaseResult, Membership
    from evaluations.review import grades
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig
    from tests.llm_server import FakeLLM, reply_json

    setup_test_environment()
    scratch.migrate()
    project = project_get_or_create_default()
    people = []
    for name in ("bench", "second"):
        user = get_user_model().objects.create_user(name, f"{name}@example.com", f"{name}-pass-123")
        Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
        people.append(user)

    evalset, outputs = engine_bench.generate(args.cases)
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(evalset).encode())])
    criteria = {**engine_bench.CRITERIA, "llm_judge": {"threshold": 0.5, "judge_model": "bench-judge"}}
    config = EvalConfig.model_validate({"criteria": criteria})
    number = re.compile(r"\d+")
    with FakeLLM() as llm:
        os.environ["EVALSITE_LLM_BASE_URL"] = llm.url
        os.environ["EVALSITE_LLM_API_KEY"] = "bench"

        def respond(body: dict[str, Any]) -> Any:  # a judge that fails roughly a third of the answers
            digits = number.findall(str(body.get("messages", [])[-1].get("content", "")))
            return reply_json(
                {
                    "reasoning": "r",
                    "score": 2 if sum(map(int, digits[:3])) % 3 == 0 else 9,
                    "is_met": True,
                    "critique": "none",
                }
            )

        llm.responder = respond
        started = time.perf_counter()
        run = runs.run_create(
            project=project,
            version=outcome.version,
            target_kind="uploaded",
            config=config,
            outputs=read_outputs([SourceFile("outputs.json", json.dumps(outputs).encode())]),
            name="judged",
            enqueue=False,
        )
        run = runs.run_execute_here(run.pk, workers=2)
    print(f"{connection.vendor}: one run of {args.cases:,} cases with a judge in {time.perf_counter() - started:.1f} s")

    results = list(
        CaseResult.objects.filter(run=run).select_related("case", "run__project").order_by("pk")[: args.graded]
    )
    for index, result in enumerate(results):
        for person, flip in zip(people, (3, 7), strict=True):
            grades.grade_save(result=result, criterion="llm_judge", grader=person, passed=index % flip != 0)

    client = Client()
    client.force_login(people[0])

    def get(path: str) -> int:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        return len(response.content)

    get("/grading/")  # warm the session, templates and the sample's cache
    floor = _timed(lambda: get("/account/"), args.repeat)
    cold = _timed(lambda: get("/grading/"), args.repeat, before=cache.clear)
    warm = _timed(lambda: get("/grading/"), args.repeat)
    page2 = _timed(lambda: get("/grading/?page=3"), args.repeat)
    calibration = _timed(lambda: get("/calibration/"), args.repeat)
    disagreements = grades.disagreement_keys(grades.QueueScope(project=project))
    print(f"{args.graded} results graded by two people, {len(disagreements)} disagreements")
    print(_line("floor: the account page", floor))
    print(_line("grading queue, cold", cold))
    print(_line("grading queue, sample cached", warm))
    print(_line("grading queue, page 3", page2))
    print(_line("judge calibration", calibration))


if __name__ == "__main__":
    main()
