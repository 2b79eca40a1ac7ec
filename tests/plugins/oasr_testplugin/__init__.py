"""A test-only hub source kind and output format, shipped the way a third-party package ships them.

Everything comes through entry points (``../oasr_testplugin-0.1.dist-info``): the source kind
``folder`` (``oasr.sources``) and the transcript format ``shout`` (``oasr.formats.transcript``);
no file of the runtime or the CLI names either.

``folder``: a catalog source ``{folder: {path: /a/folder}}`` whose files are copied into the
oasr cache's staging folder and converted, as a remote store's would be downloaded. ``shout``:
the transcript's text in capitals, one line, in ``.shout`` files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oasr.formats import Format
from oasr.hub import cache
from oasr.hub.fields import Fields
from oasr.hub.kinds import SourceKind
from oasr.hub.sources import ChainSource, Run, convert_into_cache, digest, licence_fields


@dataclass(frozen=True)
class FolderSource:
    path: str

    kind = "folder"

    def describe(self) -> str:
        return f"folder:{self.path}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "folder", "path": self.path}

    def key(self) -> str:
        return f"folder-{digest({'path': self.path})[:12]}"


def parse(raw: Any, label: str) -> FolderSource:
    fields = Fields(raw, label)
    path = fields.string("path")
    fields.done()
    return FolderSource(path)


class FolderCopy(ChainSource):
    step = "folder copy"

    def __init__(self, source: FolderSource):
        self.source = source
        self.where = source.describe()

    def probe(self, run: Run):
        files = sorted(p.name for p in Path(self.source.path).iterdir())
        return self.attempt("would try", f"copy {', '.join(files)}")

    def fetch(self, run: Run) -> Path:
        with cache.staging(run.root) as stage:
            src = stage / "src"
            shutil.copytree(self.source.path, src)
            record = cache.CacheRecord(
                name=run.target.name, key=self.source.key(), source="folder", origin=self.source.describe(), **licence_fields(run)
            )
            return convert_into_cache(run, src, stage, record).bundle


def cached(root: Path, target, source: FolderSource):
    return cache.lookup(root, target.name, source.key())


def revision(record: dict[str, Any]) -> str:
    return "copied-" + record.get("key", "")


KIND = SourceKind(name="folder", parse=parse, chain=lambda sources: list(map(FolderCopy, sources)), cached=cached, revision=revision)


def write_shout(transcript, options) -> str:
    return transcript.text.strip().upper() + "\n"


SHOUT = Format(write_shout, extension="shout")
