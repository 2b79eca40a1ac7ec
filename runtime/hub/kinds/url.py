"""The source kind ``url``: files at plain https URLs, each checked against its sha256 (or the
prefix a release file's name carries) as it streams in, plus small text files written beside them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .. import cache as _cache
from ..fields import CatalogError, Fields
from ..sources import Attempt, ChainSource, Run, Skip, Target, convert_into_cache, digest, licence_fields
from ...io.files import name_problem
from . import SourceKind


@dataclass(frozen=True)
class URLFile:
    url: str  # https:// only
    name: str  # the file's name in the source folder the converter reads
    sha256: str = ""  # 64 hex digits, or
    sha256_prefix: str = ""  # the first hex digits of it (torch.hub's check_hash: the prefix in a release file's name)


@dataclass(frozen=True)
class URLSource:
    """Files at plain URLs, each checked against its sha256 (or its prefix), plus small text files
    written beside them (a demucs bag's yaml)."""

    files: tuple[URLFile, ...]
    texts: tuple[tuple[str, str], ...] = ()  # (name, content)

    kind = "url"

    def outputs(self) -> dict[str, str]:
        return {f.name: f.sha256 or f.sha256_prefix for f in self.files} | {n: t for n, t in self.texts}

    def describe(self) -> str:
        return "url:" + "+".join(f.url.rsplit("/", 1)[-1] for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "url",
            "files": [{k: v for k, v in f.__dict__.items() if v} for f in self.files],
            "texts": [{"name": n, "text": t} for n, t in self.texts],
        }


def parse(raw: Any, label: str) -> URLSource:
    f = Fields(raw, label)
    files = []
    for j, item in enumerate(f.list("files")):
        ff = Fields(item, f"{label}: files[{j}]")
        url = ff.string("url", re.compile(r"https://[A-Za-z0-9.-]+/[A-Za-z0-9._~/%+-]+\Z"), what="an https URL")
        name = ff.string("name")
        if name_problem(name, nested=False):
            raise ff.fail("name", f"{name!r} is not a plain file name")
        sha256 = ff.sha256("sha256", default="")
        prefix = ff.string("sha256_prefix", re.compile(r"[0-9a-f]{8,63}\Z"), default="", what="8 or more lowercase hex digits")
        if bool(sha256) == bool(prefix):
            raise ff.fail("sha256", "give the sha256 or its sha256_prefix (one of them)")
        ff.done()
        files.append(URLFile(url=url, name=name, sha256=sha256, sha256_prefix=prefix))
    texts = []
    for j, item in enumerate(f.list("texts", default=[], allow_empty=True)):
        tf = Fields(item, f"{label}: texts[{j}]")
        name, text = tf.string("name"), tf.string("text")
        if name_problem(name, nested=False):
            raise tf.fail("name", f"{name!r} is not a plain file name")
        tf.done()
        texts.append((name, text))
    f.done()
    names = [x.name for x in files] + [n for n, _ in texts]
    if len(set(names)) != len(names):
        raise CatalogError(f"{label}: two files share one name")
    return URLSource(files=tuple(files), texts=tuple(texts))


def url_key(source: URLSource) -> str:
    return f"url-{digest(source.outputs())[:12]}"


def cached(root: Path, target: Target, source: URLSource) -> _cache.CacheRecord | None:
    return _cache.lookup(root, target.name, url_key(source))


class URLDownload(ChainSource):
    """Files at plain https URLs, each checked against its sha256 (or the prefix a release file's
    name carries) as it streams in, then converted; unless offline."""

    step = "url download"
    CHUNK = 1 << 20

    def __init__(self, source: URLSource):
        self.source = source
        self.where = source.describe()

    def probe(self, run: Run) -> Attempt:
        off, why = run.offline_state
        if off:
            return self.attempt("skipped", f"offline ({why})")
        return self.attempt("would try", f"download {len(self.source.files)} file(s), verify their sha256")

    def fetch(self, run: Run) -> Path:
        off, why = run.offline_state
        if off:
            raise Skip(self.attempt("skipped", f"offline ({why})"))
        from ...io.files import atomic_write_text

        with _cache.staging(run.root) as stage:
            src = stage / "src"
            src.mkdir()
            hashes = {}
            for f in self.source.files:
                run.say("download", f"downloading {f.url}")
                hashes[f.name] = self._download(f, src / f.name)
            for name, text in self.source.texts:
                atomic_write_text(src / name, text)
            record = _cache.CacheRecord(
                name=run.target.name, key=url_key(self.source), source="url", origin=self.source.describe(),
                source_files=hashes, **licence_fields(run),
            )
            return convert_into_cache(run, src, stage, record).bundle

    def _download(self, f, dest: Path) -> str:
        """Stream ``f.url`` into ``dest``; its sha256, checked. Failures: Skip with the reason."""
        import urllib.error
        import urllib.request

        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(f.url, timeout=30) as response, open(dest, "wb") as out:
                while block := response.read(self.CHUNK):
                    h.update(block)
                    out.write(block)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise Skip(self.attempt("unreachable", f"{f.url}: {getattr(e, 'reason', None) or e}")) from e
        got = h.hexdigest()
        if not got.startswith(f.sha256 or f.sha256_prefix):
            from ...errors import IntegrityError

            raise IntegrityError(f"{f.url}: sha256 {got} does not match the registry's {f.sha256 or f.sha256_prefix + '...'}")
        return got


def chain(sources: Sequence[URLSource]) -> list[ChainSource]:
    return list(map(URLDownload, sources))


KIND = SourceKind(name="url", parse=parse, chain=chain, cached=cached, rank=30)
