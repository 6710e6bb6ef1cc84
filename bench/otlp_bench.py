"""OTLP ingest benchmark: real OTLP/HTTP protobuf (`ExportTraceServiceRequest`, built with
opentelemetry-proto as an SDK exporter sends it) POSTed to `/v1/traces` of a `manage.py up`
server (gunicorn, 2 workers x 4 threads; SQLite on a fresh data directory unless
DATABASE_URL is set), by several keep-alive clients at once.

    python bench/otlp_bench.py [--requests 60] [--spans 512] [--clients 4] [--json]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_otlpbench python bench/otlp_bench.py

Prints spans stored per second and the p50/p99 latency of a request, next to two floors
measured in the same run: the same request bodies POSTed by the same clients to a trivial
endpoint (`bench/trivial_wsgi.py` under gunicorn with `up`'s workers and threads: it reads
the body and answers 200, so HTTP, gunicorn and the network stack alone), and the
receiver's own work without HTTP (decode + rows + the inserts, `evaluations.ingest.otlp`,
in this process, one thread). Targets (issue 19):
>= 2,000 spans/s on SQLite, >= 5,000 on PostgreSQL. The CPU is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from api_push_bench import free_port, make_token, start_server, stop  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402

SPANS_PER_TRACE = 8


def _kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def build_request(spans: int, seed: int) -> bytes:
    """One export of `spans` spans: traces of 8 (an AGENT root, an LLM call and TOOL calls
    with OpenInference attributes, as an instrumented agent sends them)."""
    out = []
    t0 = 1_700_000_000_000_000_000 + seed * 1_000_000_000
    for n in range(0, spans, SPANS_PER_TRACE):
        trace_id = os.urandom(16)
        root = os.urandom(8)
        count = min(SPANS_PER_TRACE, spans - n)
        for k in range(1, count):
            kind = "LLM" if k == 1 else "TOOL"
            attrs = [_kv("openinference.span.kind", kind)]
            if kind == "TOOL":
                attrs += [
                    _kv("tool.name", f"tool_{k}"),
                    _kv("input.value", json.dumps({"city": "Oslo", "k": k})),
                    _kv("output.value", '{"temp_c": 3, "condition": "snowy"}'),
                ]
            else:
                attrs += [
                    _kv("llm.model_name", "gpt-bench"),
                    _kv("llm.token_count.prompt", 120),
                    _kv("llm.token_count.completion", 30),
                ]
            out.append(
                Span(
                    trace_id=trace_id,
                    span_id=os.urandom(8),
                    parent_span_id=root,
                    name=f"{kind.lower()} {k}",
                    start_time_unix_nano=t0 + n * 1000 + k * 100,
                    end_time_unix_nano=t0 + n * 1000 + k * 100 + 50,
                    kind=Span.SPAN_KIND_INTERNAL,
                    attributes=attrs,
                )
            )
        out.append(
            Span(
                trace_id=trace_id,
                span_id=root,
                name="agent",
                start_time_unix_nano=t0 + n * 1000,
                end_time_unix_nano=t0 + n * 1000 + 900,
                kind=Span.SPAN_KIND_SERVER,
                attributes=[
                    _kv("openinference.span.kind", "AGENT"),
                    _kv("session.id", f"s{seed}-{n}"),
                    _kv("output.value", "It is 3 C and snowy in Oslo."),
                ],
            )
        )
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=out)])
    resource.resource.attributes.append(_kv("service.name", "bench-agent"))
    return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def send_all(
    port: int, bodies: list[bytes], clients: int, path: str, token: str, expect: int
) -> tuple[float, list[float]]:
    """POST every body, `clients` keep-alive connections at once; wall time and latencies."""
    latencies: list[float] = []
    lock = threading.Lock()
    work = list(enumerate(bodies))
    errors: list[str] = []

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not work:
                    break
                _, body = work.pop()
            began = time.perf_counter()
            while True:
                conn.request(
                    "POST",
                    path,
                    body=body,
                    headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"},
                )
                response = conn.getresponse()
                response.read()
                if response.status == 429:  # back-pressure: the exporter's retry, after Retry-After
                    time.sleep(float(response.getheader("Retry-After") or 1))
                    continue
                break
            elapsed = time.perf_counter() - began
            if response.status != expect:
                errors.append(f"{path}: HTTP {response.status}")
            with lock:
                latencies.append(elapsed)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return wall, latencies


def start_trivial(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "trivial_wsgi:app",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--access-logfile",
            "-",
            "--no-control-socket",
        ],
        cwd=REPO / "bench",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the trivial server did not start")


def in_process_floor(data_dir: Path, bodies: list[bytes]) -> float:
    """Seconds for the receiver's work on these bodies without HTTP: decode, rows, inserts."""
    os.environ["EVALSITE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from evaluations.ingest.otlp import traces_store
    from evaluations.interop.otel.otlp import parse_request, rows_of
    from evaluations.models import Project

    project, _ = Project.objects.get_or_create(slug="otlp-floor", defaults={"name": "floor"})
    started = time.perf_counter()
    for body in bodies:
        traces_store(project=project, batch=rows_of(parse_request(body, "application/x-protobuf")))
    return time.perf_counter() - started


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(requests: int, spans: int, clients: int, echo: bool = True) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="evalsite-otlpbench-"))
    port = free_port()
    bodies = [build_request(spans, seed) for seed in range(requests)]
    floor_bodies = [build_request(spans, seed) for seed in range(requests)]  # fresh ids: stored too
    server = start_server(data_dir, port)
    try:
        token = make_token(data_dir)
        send_all(
            port, [build_request(spans, 10_000 + i) for i in range(clients)], clients, "/v1/traces", token, 200
        )  # warm-up: every worker has its imports and connection
        wall, latencies = send_all(port, bodies, clients, "/v1/traces", token, 200)
    finally:
        stop(server)
    trivial = start_trivial(port)
    try:
        http_wall, http_latencies = send_all(port, bodies, clients, "/v1/traces", token, 200)
    finally:
        stop(trivial)
    work = in_process_floor(data_dir, floor_bodies)
    total = requests * spans
    result = {
        "database": "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite",
        "spans": total,
        "spans_per_second": total / wall,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": p(latencies, 0.99) * 1000,
        "http_floor_spans_per_second": total / http_wall,
        "http_floor_p99_ms": p(http_latencies, 0.99) * 1000,
        "work_floor_spans_per_second": total / work,
        "body_kb": sum(map(len, bodies)) / len(bodies) / 1024,
    }
    result["ratio"] = result["work_floor_spans_per_second"] / result["spans_per_second"]
    if echo:
        target = 5000 if result["database"] == "postgresql" else 2000
        print(
            f"{result['database']}: {requests} OTLP/HTTP protobuf exports of {spans} spans "
            f"({result['body_kb']:.0f} KB each), {clients} clients, on a `manage.py up` server"
        )
        print(
            f"  /v1/traces        {result['spans_per_second']:8.0f} spans/s   p50 {result['p50_ms']:6.1f} ms   "
            f"p99 {result['p99_ms']:6.1f} ms"
        )
        print(
            f"  floor, HTTP only  {result['http_floor_spans_per_second']:8.0f} spans/s   "
            f"p99 {result['http_floor_p99_ms']:6.1f} ms   (the same bodies to a trivial WSGI app)"
        )
        print(
            f"  floor, work only  {result['work_floor_spans_per_second']:8.0f} spans/s   "
            f"(decode + rows + inserts in-process, one thread)"
        )
        print(
            f"  ratio to the work floor {result['ratio']:.2f}x; target >= {target} spans/s: "
            f"{'OK' if result['spans_per_second'] >= target else 'UNDER TARGET'}"
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--spans", type=int, default=512, help="spans per export (the SDK's default batch)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    result = measure(args.requests, args.spans, args.clients)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
