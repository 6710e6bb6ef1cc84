"""OTLP refusal benchmark: how long `POST /v1/traces` takes to refuse an export of a million
spans (issue 27: parsed in full, 9.8 s, before its 429, and the refused spans were charged to
the token), through Django's test client in this process on a fresh SQLite database.

    python bench/otlp_refusal_bench.py [--spans 1000000] [--json]

The body is binary protobuf, gzipped, with the size limits raised for it. Figures: the time
to the refusal, next to its floor measured in the same run (decoding the body alone:
gzip + protobuf's decoder, which the receiver must do to count the spans); and whether a
small export sent right after it is still taken (the refusal cost the token nothing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalsite-otlp-refusal-") as tmp:
        figures = measure(args.spans, Path(tmp))
    if args.json:
        print(json.dumps(figures))
    return figures


def _body(spans: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    scope = message.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope.spans.add()
        span.trace_id = (i // 100 + 1).to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.name = "s"
        span.start_time_unix_nano = 1
    return gzip.compress(message.SerializeToString(), compresslevel=1)


def measure(spans: int, tmp: Path) -> dict[str, Any]:
    os.environ["EVALSITE_DATA_DIR"] = str(tmp)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import scratch
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from evaluations.accounts.tokens import token_create
    from evaluations.models import Membership, Project

    scratch.migrate()
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.EVALSITE_OTLP_MAX_BODY_BYTES = 256 * 1024 * 1024
    settings.EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
    settings.EVALSITE_OTLP_SPANS_PER_MINUTE = 600_000
    project = Project.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-pass-123456")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    token = token_create(user=user, name="bench").secret
    body = _body(spans)
    headers: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_CONTENT_ENCODING": "gzip"}
    client = Client()

    began = time.perf_counter()
    floor_message = ExportTraceServiceRequest()
    floor_message.ParseFromString(gzip.decompress(body))
    floor = time.perf_counter() - began
    del floor_message

    # The first request imports every view (URL resolving): not the receiver's cost.
    warm = client.generic("POST", "/v1/traces", _body(10), content_type="application/x-protobuf", **headers)
    assert warm.status_code == 200, warm.content
    began = time.perf_counter()
    refused = client.generic("POST", "/v1/traces", body, content_type="application/x-protobuf", **headers)
    seconds = time.perf_counter() - began
    small = client.generic("POST", "/v1/traces", _body(10), content_type="application/x-protobuf", **headers)
    print(f"{spans} spans ({len(body) / 1e6:.1f} MB gzipped): refused with {refused.status_code} in {seconds:.2f} s; "
          f"floor (gzip + protobuf decode alone, same run) {floor:.2f} s, ratio {seconds / floor:.2f}x; "
          f"a 10-span export right after it: {small.status_code}")
    return {"spans": spans, "status": refused.status_code, "seconds": seconds, "floor_seconds": floor,
            "ratio": seconds / floor, "after": small.status_code}


if __name__ == "__main__":
    main()
