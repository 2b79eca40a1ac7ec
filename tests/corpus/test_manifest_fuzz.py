"""The manifest readers fuzzed (issue 31): any text, JSONL or CSV is a list of items or one
InputError, never another exception."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oasr.corpus.manifest import read_manifest
from oasr.errors import InputError

FUZZ_EXAMPLES = 150

values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=20), st.lists(st.integers(), max_size=2))
rows = st.dictionaries(st.sampled_from(["path", "language", "num_speakers", "voice", "other"]), values, max_size=5)


def _check(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            items = read_manifest(path)
        except InputError as e:
            assert "\n" not in str(e).strip()
            return
        assert items and all(isinstance(i.path, str) and isinstance(i.name, str) and isinstance(i.options, dict) for i in items)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(lines=st.lists(st.one_of(rows.map(json.dumps), st.text(max_size=30), st.binary(max_size=20).map(lambda b: b.decode("latin-1"))), max_size=6))
@example(lines=['{"path": "a.wav", "num_speakers": 1e999}', '{"path": ["x"]}'])
@example(lines=['{"path": "\\u0000a.wav"}'])
def test_fuzz_jsonl(lines):
    _check("rows.jsonl", "\n".join(lines).encode("utf-8", "surrogatepass"))


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(st.binary(max_size=300), st.lists(st.lists(st.text(",\"\n\r ab.wav/\x00", max_size=8), max_size=4), max_size=6).map(lambda rs: "\n".join(",".join(r) for r in [["path", "num_speakers", "language"], *rs]).encode())))
def test_fuzz_csv(data):
    _check("rows.csv", data)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=300))
@example(data=b"a.wav\x00b\n")
@example(data=b"\xff\xfe\n")
def test_fuzz_text(data):
    _check("list.txt", data)
