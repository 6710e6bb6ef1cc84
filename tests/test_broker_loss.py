"""A Redis broker that goes away or comes back empty (issue 40): a run's batch whose task the
broker refused waits, marked, and is sent as soon as the broker answers; the batches a
restarted Redis lost are queued again at the watchdog's next look, not a lease later. Against a
`redis-server` this test starts and stops on a free port of 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.utils import timezone

from evaluations.models import Project, Run, RunBatch
from evaluations.runs import services as runs
from tests.engine_helpers import import_demo, perfect_outputs

pytestmark = pytest.mark.django_db(transaction=True)


class OwnRedis:
    def __init__(self, data_dir: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.data_dir = data_dir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.data_dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # as a crash or an out-of-memory kill: what it held is gone
            self.proc.wait()
            self.proc = None

    def queued(self) -> list[tuple[Any, ...]]:
        """The run batches in the broker: (run, batch id)."""
        from django_q.brokers import get_broker
        from django_q.signing import SignedPackage

        tasks = [SignedPackage.loads(p) for p in redis.Redis.from_url(self.url).lrange(get_broker().list_key, 0, -1)]
        return [(t["args"][0], t["args"][3]) for t in tasks if t["func"] == "evaluations.tasks.run_batch"]


@pytest.fixture
def own_redis(tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[OwnRedis]:
    """The queue on a Redis of this test's own (settings and django-q2's own copy of them)."""
    from django_q.conf import Conf

    server = OwnRedis(tmp_path)
    settings.Q_CLUSTER = {**{k: v for k, v in settings.Q_CLUSTER.items() if k not in {"orm", "sync"}},
                          "redis": server.url}
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "REDIS", server.url)
    yield server
    server.stop()


def _run(project: Project, settings: Any) -> Run:
    settings.EVALSITE_BATCH_SIZE = 2
    settings.EVALSITE_RUN_WINDOW = 3
    version = import_demo(project)
    return runs.run_create(project=project, version=version, target_kind="uploaded", outputs=perfect_outputs_models())


def perfect_outputs_models() -> list[Any]:
    from evaluations.schemas.outputs import AgentOutput

    return [AgentOutput.model_validate(o) for o in perfect_outputs()]


def test_a_run_created_while_the_broker_is_away_starts_when_it_answers(acme: Project, own_redis: OwnRedis,
                                                                        settings: Any) -> None:
    run = _run(acme, settings)  # the broker is not there: the run is created all the same
    batches = RunBatch.objects.filter(run=run)
    assert Run.objects.get(pk=run.pk).status == "running"
    assert batches.count() >= 3 and not batches.filter(queued_at__isnull=False).exists()
    assert batches.filter(unsent=True).count() == 3  # its window's worth, refused
    with pytest.raises(redis.ConnectionError):
        runs.lost_work_resume()  # still away: the watchdog tries again next tick
    own_redis.start()
    assert runs.lost_work_resume() == [run.pk]
    assert len(own_redis.queued()) == 3
    assert batches.filter(queued_at__isnull=False).count() == 3 and not batches.filter(unsent=True).exists()
    assert runs.lost_work_resume() == []  # nothing twice


def test_batches_a_restarted_redis_lost_are_queued_again_at_the_next_look(acme: Project, own_redis: OwnRedis,
                                                                           settings: Any) -> None:
    own_redis.start()
    assert runs.lost_work_resume() == []  # the first look leaves its mark
    run = _run(acme, settings)
    assert len(own_redis.queued()) == 3
    RunBatch.objects.filter(run=run, queued_at__isnull=False).update(queued_at=timezone.now() - timedelta(seconds=10))
    claims = set(RunBatch.objects.filter(queued_at__isnull=False).values_list("queued_at", flat=True))
    assert runs.lost_work_resume() == []  # Redis still holds them: nothing to do
    own_redis.stop()
    own_redis.start()  # empty
    assert own_redis.queued() == []
    assert runs.lost_work_resume() == [run.pk]
    assert len(own_redis.queued()) == 3
    now = set(RunBatch.objects.filter(queued_at__isnull=False).values_list("queued_at", flat=True))
    assert len(now) == 3 and not now & claims  # sent under new claims: the old tasks, if any, do nothing
    assert runs.lost_work_resume() == []
