"""The suite's own xdist scheduler (tests/xdist_schedule.py), driven as xdist's controller drives
it: workers report their collections, then each finished test is marked complete in turn.
The workers are stand-ins that record what they are sent; the scheduler is the real one."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.xdist_schedule import CHUNK, LOW, ModuleChunkScheduling, make_scheduler


class _Config:
    def __init__(self, workers: int, dist: str = "load", maxschedchunk: int | None = None) -> None:
        self.values = {"tx": [f"{workers}*popen"], "dist": dist, "maxschedchunk": maxschedchunk}

    def getvalue(self, name: str) -> Any:
        return self.values[name]

    getoption = getvalue


@dataclass
class _Gateway:
    id: str


@dataclass(eq=False)
class _Worker:
    gateway: _Gateway
    shutting_down: bool = False
    received: list[list[int]] = field(default_factory=list)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.received.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def _collection(sizes: dict[str, int]) -> list[str]:
    return [f"tests/{module}.py::test_{n}" for module, size in sizes.items() for n in range(size)]


def _run(collection: list[str], workers: int, seed: int,
         maxschedchunk: int | None = None) -> tuple[ModuleChunkScheduling, list[_Worker], int]:
    """Runs a whole session: each step, a random worker that holds tests finishes its oldest.
    Returns the scheduler, the workers and the most tests any worker held at once."""
    scheduler = ModuleChunkScheduling(_Config(workers, maxschedchunk=maxschedchunk))  # type: ignore[arg-type]
    nodes = [_Worker(_Gateway(f"gw{n}")) for n in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    rng = random.Random(seed)
    most = 0
    while True:
        holding = [node for node in nodes if scheduler.node2pending[node]]  # type: ignore[index]
        if not holding:
            break
        most = max(most, *(len(scheduler.node2pending[node]) for node in nodes))  # type: ignore[index]
        node = rng.choice(holding)
        scheduler.mark_test_complete(node, scheduler.node2pending[node][0])  # type: ignore[arg-type, index]
    return scheduler, nodes, most


SIZES = {"test_browser_a": 5, "test_slow_server": 8, "test_matrix": 40, "test_one": 1, "test_two": 2,
         "test_light_b": 17, "test_light_c": 3, "test_last": 1}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_test_runs_once_and_each_worker_gets_its_tests_in_collection_order(seed: int) -> None:
    collection = _collection(SIZES)
    scheduler, nodes, _ = _run(collection, 4, seed)
    sent = [[index for chunk in node.received for index in chunk] for node in nodes]
    assert sorted(index for indices in sent for index in indices) == list(range(len(collection)))
    for indices in sent:  # pytest-django's order: rolled-back tests before committing ones, per worker
        assert indices == sorted(indices)
    assert all(node.shutting_down for node in nodes) and scheduler.tests_finished


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunks_end_at_a_module_boundary_and_no_worker_holds_more_than_a_few(seed: int) -> None:
    collection = _collection(SIZES)
    _, nodes, most = _run(collection, 4, seed)
    assert most <= LOW - 1 + CHUNK  # xdist's own scheduler held up to a sixteenth of the suite
    chunks = [chunk for node in nodes for chunk in node.received]
    for chunk in chunks:
        modules = [collection[index].split("::")[0] for index in chunk]
        assert 1 <= len(chunk) <= CHUNK
        # One module, except a module's last test paired with the next one's first.
        assert len(set(modules)) == 1 or (len(chunk) == 2 and modules[0] != modules[1]), modules
    # A slow module of 8 tests that reaches the front of the queue whole goes to one worker whole.
    server_chunks = [chunk for chunk in chunks if "test_slow_server" in collection[chunk[0]]]
    assert [len(chunk) for chunk in server_chunks] == [8]


def test_a_module_longer_than_a_chunk_is_cut_into_chunks_and_spread() -> None:
    collection = _collection({"test_matrix": 5 * CHUNK})
    _, nodes, _ = _run(collection, 4, seed=7)
    assert sorted(len(chunk) for node in nodes for chunk in node.received) == [CHUNK] * 5
    assert sum(1 for node in nodes if node.received) >= 2


def test_maxschedchunk_sets_the_most_given_at_once() -> None:
    collection = _collection({"test_matrix": 12, "test_slow_server": 8})
    _, nodes, _ = _run(collection, 2, seed=3, maxschedchunk=3)
    chunks = [chunk for node in nodes for chunk in node.received]
    assert max(len(chunk) for chunk in chunks) == 3
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(collection)))


def test_a_single_test_suite_and_more_workers_than_tests_still_finish() -> None:
    for sizes in ({"test_one": 1}, {"test_one": 1, "test_two": 2}):
        collection = _collection(sizes)
        _, nodes, _ = _run(collection, 4, seed=1)
        assert sorted(i for node in nodes for chunk in node.received for i in chunk) == list(range(len(collection)))
        assert all(node.shutting_down for node in nodes)


def test_only_the_load_distribution_is_replaced() -> None:
    assert isinstance(make_scheduler(_Config(4, "load"), None), ModuleChunkScheduling)
    for dist in ("loadscope", "loadfile", "worksteal", "each"):
        assert make_scheduler(_Config(4, dist), None) is None
