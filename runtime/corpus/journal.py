"""OUTDIR/batch.jsonl: one line per input (status, outputs, duration, timing, the models'
provenance), and what makes a batch resumable.

While a batch runs, each finished input's record is appended and flushed, so a run that is
killed keeps what it did; at the end (or on Ctrl-C) the file is rewritten atomically with one line
per input, the latest, in manifest order (inputs of earlier manifests kept after them). A torn
last line of a killed run is ignored.

An input is up to date, and skipped, when its latest record says done with the same key (the
models' sha256, the task and its options, the formats) and each output it lists is there with
the bytes it had.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from ..io.files import atomic_write_text, sha256_file

log = logging.getLogger("oasr")

JOURNAL_NAME = "batch.jsonl"
COMPLETE = ("done", "skipped")


class Journal:
    def __init__(self, outdir: Path):
        self.path = Path(outdir) / JOURNAL_NAME
        self.records: dict[str, dict[str, Any]] = {}  # input name -> its latest record
        self._file = None
        self._read()

    def _read(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for n, line in enumerate(text.splitlines(), start=1):
            try:
                record = json.loads(line)
                self.records[record["name"]] = record
            except (ValueError, KeyError, TypeError):
                log.warning("%s:%d: not a record, ignored (a run killed while writing it?)", self.path, n)

    def up_to_date(self, name: str, key: str) -> dict[str, Any] | None:
        """The earlier record of ``name`` when its outputs are current for ``key``, else None."""
        record = self.records.get(name)
        if not record or record.get("status") not in COMPLETE or record.get("key") != key:
            return None
        sums = record.get("output_sha256") or {}
        for output in record.get("outputs") or ():
            if not os.path.isfile(output) or output not in sums:
                return None
            if sha256_file(Path(output)) != sums[output]:
                log.info("%s changed since it was written; redoing it", output)
                return None
        return record if record.get("outputs") else None

    def append(self, record: dict[str, Any]) -> None:
        self.records[record["name"]] = record
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

    def compact(self, order: Iterable[str]) -> None:
        """Rewrite the journal with one line per input: ``order``'s first, then the others."""
        self.close()
        if not self.records:
            return
        names = list(dict.fromkeys([*(n for n in order if n in self.records), *self.records]))
        atomic_write_text(self.path, "".join(json.dumps(self.records[n], allow_nan=False) + "\n" for n in names))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
