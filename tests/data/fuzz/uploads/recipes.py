"""Hostile uploads too large (or too binary) to commit: each recipe writes its file when a test
asks for it. The shapes are those issue 38 found: small files that stand for much more once
their members are inflated, their attachments put back or their aliases followed, and files
that make evalsite copy a value into every case. What each must be answered with is in
`expected.json`, beside the small files committed as they are.

A member is compressed a chunk at a time, so no recipe holds what its file inflates to.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from io import BytesIO

import zstandard

MB = 1 << 20
ZSTD = 93  # the zip method number inspect_ai writes its `.eval` members with

HEADER = {"version": 2, "status": "success",
          "eval": {"task": "fuzz", "model": "mockllm/model", "dataset": {"samples": 1, "sample_ids": [1]}},
          "results": {"total_samples": 1, "completed_samples": 1}, "stats": {}}


def _sample(**fields: object) -> dict[str, object]:
    return {"id": 1, "epoch": 1, "input": "What is 2 + 2?", "target": "4",
            "messages": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}],
            "output": {"model": "mockllm/model", "completion": "4"},
            "scores": {"match": {"value": "C", "answer": "4"}}, **fields}


def _repeat(block: bytes, size: int) -> Iterator[bytes]:
    """`size` bytes of `block` repeated, a chunk at a time."""
    chunk = block * max(1, MB // len(block))
    left = size
    while left > 0:
        yield chunk[:left]
        left -= len(chunk[:left])


def _padded_sample(size: int) -> Iterator[bytes]:
    """A sample member of exactly `size` bytes: valid JSON whose `input` is `size` bytes long, nearly."""
    head, tail = b'{"id": 1, "epoch": 1, "target": "4", "input": "', b'"}'
    yield head
    yield from _repeat(b"x", size - len(head) - len(tail))
    yield tail


def zstd_zip(members: Iterable[tuple[str, Callable[[], Iterable[bytes]]]]) -> bytes:
    """A zip whose members are zstd-compressed (method 93), as inspect_ai 0.3.1xx and later
    write `.eval` logs; each member's bytes come from its callable, a chunk at a time."""
    out = BytesIO()
    central = []
    for name, chunks in members:
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
        packed = BytesIO()
        crc = size = 0
        for chunk in chunks():
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
            packed.write(compressor.compress(chunk))
        packed.write(compressor.flush())
        data, raw_name, offset = packed.getvalue(), name.encode(), out.tell()
        out.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 63, 0, ZSTD, 0, 0x21, crc, len(data), size,
                              len(raw_name), 0) + raw_name + data)
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 63, 63, 0, ZSTD, 0, 0x21, crc, len(data), size,
                                   len(raw_name), 0, 0, 0, 0, 0, offset) + raw_name)
    start = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return out.getvalue()


def deflate_zip(members: Iterable[tuple[str, Callable[[], Iterable[bytes]]]]) -> bytes:
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, chunks in members:
            with zf.open(name, "w", force_zip64=True) as entry:
                for chunk in chunks():
                    entry.write(chunk)
    return out.getvalue()


def _json(value: object) -> Callable[[], Iterable[bytes]]:
    return lambda: [json.dumps(value).encode()]


# --- The recipes -------------------------------------------------------------------------------


def attachments_eval() -> bytes:
    """A `.eval` log of well under 1 KB whose one sample names a 4 MB attachment 100 times (400 MB
    once they are put back): it grew a web worker by 1.6 GB before."""
    attachment = "x" * (4 * MB)
    sample = _sample(messages=[{"role": "user", "content": "attachment://big"}] * 100,
                     attachments={"big": attachment})
    return zstd_zip([("header.json", _json(HEADER)), ("samples/1_epoch_1.json", _json(sample))])


def attachments_log_json() -> bytes:
    """The same sample in a `.json` log (4 MB: the attachment is stored once, uncompressed)."""
    sample = _sample(messages=[{"role": "user", "content": "attachment://big"}] * 100,
                     attachments={"big": "x" * (4 * MB)})
    return json.dumps({**HEADER, "samples": [sample]}).encode()


def members_zstd_eval() -> bytes:
    """Three 60 MB zstd sample members in a file of a few KB: each within the upload limit,
    180 MB together."""
    return zstd_zip([("header.json", _json({**HEADER, "eval": {**HEADER["eval"], "dataset": {"samples": 3}}})),
                     *((f"samples/{n}_epoch_1.json", lambda: _padded_sample(60 * MB)) for n in (1, 2, 3))])


def members_deflate_eval() -> bytes:
    """The same with deflate, as inspect_ai wrote `.eval` logs before zstd."""
    return deflate_zip([("header.json", _json(HEADER)),
                        *((f"samples/{n}_epoch_1.json", lambda: _padded_sample(60 * MB)) for n in (1, 2, 3))])


def members_deflate_zip() -> bytes:
    """A zip of three ADK eval sets, 60 MB of spaces each (a zip bomb within the upload limit
    one file at a time)."""
    case = json.dumps({"eval_set_id": "bomb", "eval_cases": []}).encode()
    return deflate_zip([(f"bomb{n}.evalset.json", lambda: [*_repeat(b" ", 60 * MB), case]) for n in (1, 2, 3)])


def aliases_yaml() -> bytes:
    """A promptfoo config whose anchor on a 30 KB string is aliased by 10,000 tests (~11k nodes,
    under the node cap; 300 MB once followed): it grew a worker by 1.7 GB before."""
    text = "x" * 30_000
    tests = "".join("  - vars: {q: *big}\n" for _ in range(10_000))
    return (f"prompts: ['{{{{q}}}}']\nproviders: [echo]\ndefaults: &big {text}\ntests:\n{tests}").encode()


def template_repeats_yaml() -> bytes:
    """A prompt naming a 30 KB var 10,000 times (300 MB rendered in one case)."""
    prompt = "{{q}}" * 10_000
    return (f"prompts: ['{prompt}']\nproviders: [echo]\ntests:\n  - vars: {{q: {'x' * 30_000}}}\n").encode()


def default_test_yaml() -> bytes:
    """A 1 MB defaultTest var merged into 20,000 one-line tests (20 GB of cases)."""
    tests = "".join(f"  - vars: {{n: {n}}}\n" for n in range(20_000))
    return (f"prompts: ['{{{{n}}}} {{{{q}}}}']\nproviders: [echo]\ndefaultTest:\n  vars:\n    q: {'x' * MB}\n"
            f"tests:\n{tests}").encode()


def tests_file_repeats_zip() -> bytes:
    """A config naming its 1 MB tests file 20,000 times (`tests: [file://t.yaml, ...]`), zipped."""
    config = "prompts: ['{{q}}']\nproviders: [echo]\ntests:\n" + "  - file://t.yaml\n" * 20_000
    tests = f"- vars: {{q: {'x' * MB}}}\n"
    return deflate_zip([("promptfooconfig.yaml", lambda: [config.encode()]), ("t.yaml", lambda: [tests.encode()])])


def bigint_eval() -> bytes:
    """A `.eval` log whose sample holds an integer of 5,000 digits."""
    sample = json.dumps(_sample(metadata={"n": "BIG"})).replace('"BIG"', "7" * 5000).encode()
    return zstd_zip([("header.json", _json(HEADER)), ("samples/1_epoch_1.json", lambda: [sample])])


RECIPES: dict[str, Callable[[], bytes]] = {
    "attachments.eval": attachments_eval,
    "attachments-log.json": attachments_log_json,
    "members-zstd.eval": members_zstd_eval,
    "members-deflate.eval": members_deflate_eval,
    "members-deflate.zip": members_deflate_zip,
    "aliases.promptfooconfig.yaml": aliases_yaml,
    "template-repeats.promptfooconfig.yaml": template_repeats_yaml,
    "default-test.promptfooconfig.yaml": default_test_yaml,
    "tests-file-repeats.zip": tests_file_repeats_zip,
    "bigint.eval": bigint_eval,
}
