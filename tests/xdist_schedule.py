"""How `pytest -n 4` hands the tests to its workers: in collection order (tests/conftest.py's
`heavy_modules_first`), a module's run of tests at a time, and never more than a few ahead.

pytest-xdist's own load scheduler keeps up to a sixteenth of what is left queued on each
worker, counted in tests, not seconds. A worker that asked while the queue's front was a row
of browser tests took 50-70 of them, and at the end of the suite it ran them alone for 80-130 s
while the other three had finished and the two cores stood half idle (measured on the 2-core
CI machine: the README's command took 537-547 s, 90 s of it on one or two busy workers).

Here a worker is given work when fewer than `LOW` of its tests are waiting, and what it is given
is the front of the queue up to the end of the front test's module, at most `CHUNK` tests: a
module's tests stay on one worker where they can, so its module-scoped fixtures (a Chromium, a
`manage.py up` server) start once, and no worker ever holds more than a few tests' worth of
the queue. Each worker still receives its tests in collection order, which pytest-django's
order needs (every rolled-back test before any test that commits and flushes, per worker).

Only `--dist load` (the default for `-n`) is replaced; any other `--dist` is xdist's own.
`--maxschedchunk N` sets the most tests given at once (`CHUNK` by default).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScheduling

# A worker asks for more when fewer than LOW of its tests are left (the one running included):
# it needs the test after the running one before it can finish it.
LOW = 3
# At most this many tests at once: a slow module (a server, a browser) has 2-10 tests.
CHUNK = 8


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class ModuleChunkScheduling(LoadScheduling):
    """xdist's load scheduling with short queues cut at module boundaries."""

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        self.pending[:] = range(len(self.collection))
        for node in self.nodes:
            self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()  # the worker finishes what it holds, then stops
            return
        while self.pending and len(self.node2pending[node]) < LOW:
            self._send_tests(node, self._next_chunk())

    def _next_chunk(self) -> int:
        """How many tests from the front of the queue go together: the front test's module's,
        at least two (a worker holds its last test until it knows the next) and at most CHUNK
        (or --maxschedchunk)."""
        assert self.collection is not None
        module = _module(self.collection[self.pending[0]])
        most = max(2, self.maxschedchunk or CHUNK)
        size = 1
        while (size < min(most, len(self.pending))
               and (size < 2 or _module(self.collection[self.pending[size]]) == module)):
            size += 1
        return size


def make_scheduler(config: Any, log: Any) -> LoadScheduling | None:
    if config.getvalue("dist") != "load":
        return None
    return ModuleChunkScheduling(config, log)
