"""An Inspect AI `.eval` log read as results (`interop/inspect/results.py`), time and peak memory,
beside the floor measured in the same run: the same zip's sample members only inflated (zstd, as
inspect_ai 0.3.1xx and later write them) and parsed by `json.loads`, nothing kept. Each runs in a
fresh child process, so its peak is its own.

    python bench/inspect_log_bench.py [--samples 2000] [--json]

The log is synthetic but shaped as inspect_ai writes it: a header, and per sample a member with
its input, messages (a tool call and its result), four scores (C/I, a number, a dict) and the
events that make real samples large (about 30 KB each inflated). What the reader must show: its
peak grows with what it keeps of each sample (the case's output and scores), not with the
inflated log, which is never in memory whole.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import zstandard

REPO = Path(__file__).resolve().parent.parent
ZSTD = 93


def _sample(n: int) -> dict[str, object]:
    call = {"id": f"call_{n}", "function": "get_weather", "arguments": {"city": f"City {n}"}, "type": "function"}
    messages = [
        {"id": f"u{n}", "content": f"What is the weather in city {n}?", "source": "input", "role": "user"},
        {"id": f"a{n}", "content": "", "source": "generate", "role": "assistant", "tool_calls": [call]},
        {"id": f"t{n}", "content": f"sunny in City {n}", "role": "tool", "tool_call_id": f"call_{n}",
         "function": "get_weather"},
        {"id": f"b{n}", "content": f"It is sunny in City {n}.", "source": "generate", "role": "assistant"},
    ]
    events = [{"span_id": f"{n:08x}{i:024x}", "timestamp": "2026-11-26T20:10:11.000000+00:00",
               "working_start": i * 0.001, "event": "model", "model": "mockllm/model",
               "input": messages[:2], "output": {"completion": messages[-1]["content"]},
               "call": {"request": {"messages": [{"role": "user", "content": "x" * 200}]}}} for i in range(30)]
    return {"id": n, "epoch": 1, "input": messages[0]["content"], "target": "sunny", "messages": messages,
            "output": {"model": "mockllm/model", "completion": messages[-1]["content"]},
            "scores": {"match": {"value": "C" if n % 3 else "I", "answer": "sunny"},
                       "includes": {"value": "C", "answer": "sunny", "explanation": "found"},
                       "length": {"value": 20 + n % 7},
                       "shape": {"value": {"words": 5, "shouted": False}, "explanation": "5 words"}},
            "metadata": {"n": n}, "store": {}, "events": events,
            "model_usage": {"mockllm/model": {"input_tokens": 30, "output_tokens": 6, "total_tokens": 36}},
            "total_time": 0.2, "working_time": 0.1, "uuid": f"uuid{n}", "attachments": {}}


def write_log(path: Path, samples: int) -> int:
    """A zstd `.eval` zip of `samples` samples; returns the inflated size of its members."""
    header = {"version": 2, "status": "success",
              "eval": {"task": "bench", "model": "mockllm/model", "dataset": {"samples": samples,
                                                                              "sample_ids": list(range(samples))}},
              "stats": {"model_usage": {"mockllm/model": {"input_tokens": 30 * samples, "output_tokens": 6 * samples,
                                                          "total_tokens": 36 * samples}}}}
    members = [("header.json", json.dumps(header).encode())]
    members += [(f"samples/{n}_epoch_1.json", json.dumps(_sample(n)).encode()) for n in range(samples)]
    compressor = zstandard.ZstdCompressor(level=3)
    central, inflated = [], 0
    with path.open("wb") as out:
        for name, data in members:
            packed, crc, raw_name = compressor.compress(data), zlib.crc32(data), name.encode()
            offset = out.tell()
            out.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 63, 0, ZSTD, 0, 0x21, crc, len(packed), len(data),
                                  len(raw_name), 0) + raw_name + packed)
            central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 63, 63, 0, ZSTD, 0, 0x21, crc, len(packed),
                                       len(data), len(raw_name), 0, 0, 0, 0, 0, offset) + raw_name)
            inflated += len(data)
        start = out.tell()
        out.write(b"".join(central))
        size = out.tell() - start
        out.write(struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(members), len(members), size, start, 0))
    return inflated


CHILD = r"""
import json, os, resource, sys, time, zipfile
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django; django.setup()
import zstandard
from evaluations.interop.base import SourceFile
from evaluations.interop.inspect.log import member_bytes
from evaluations.interop.results import read_results
path, mode = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if mode == "reader":
    parsed = read_results(SourceFile("bench.eval", data))
    count = len(parsed.cases)
else:  # the floor: every sample member inflated and parsed, nothing kept
    zf = zipfile.ZipFile(path)
    count = 0
    for info in zf.infolist():
        if info.filename.startswith("samples/"):
            json.loads(member_bytes(data, zf, info, path))
            count += 1
seconds = time.perf_counter() - started
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"seconds": seconds, "peak_growth_mb": grown, "samples": count}))
"""


def _child(path: Path, mode: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], cwd=REPO, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"inspect_log_bench failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(samples: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="evalsite-inspect-") as tmp:
        path = Path(tmp) / "bench.eval"
        inflated = write_log(path, samples)
        reader = _child(path, "reader")
        floor = _child(path, "floor")
        size = path.stat().st_size
    assert reader["samples"] == floor["samples"] == samples
    return {"samples": samples, "zip_mb": size / 2**20, "inflated_mb": inflated / 2**20,
            "seconds": reader["seconds"], "floor_seconds": floor["seconds"],
            "ratio": reader["seconds"] / floor["seconds"], "peak_growth_mb": reader["peak_growth_mb"],
            "floor_peak_growth_mb": floor["peak_growth_mb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = measure(args.samples)
    print(f"Inspect .eval log, {found['samples']:,} samples: {found['zip_mb']:.1f} MB zipped, "
          f"{found['inflated_mb']:.0f} MB inflated")
    print(f"  read as results: {found['seconds']:.2f} s, peak RSS growth {found['peak_growth_mb']:.0f} MB")
    print(f"  floor (inflate + json.loads each sample, nothing kept): {found['floor_seconds']:.2f} s, "
          f"peak RSS growth {found['floor_peak_growth_mb']:.0f} MB")
    print(f"  ratio to the floor: {found['ratio']:.2f}x")
    if args.json:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
