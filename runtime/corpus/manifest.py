"""MANIFEST -> the inputs of a batch: a folder (with a glob), a text file of paths, or JSONL/CSV
with a ``path`` column and optional per-row options.

Each input keeps the path as written (relative entries of a manifest file are taken from the
manifest's folder) and its name relative to the corpus root, which is where its outputs go under
OUTDIR: the manifest folder, or the deepest folder all listed inputs share. Inputs of trees that
share no folder but the file system's root are named by their shortest trailing paths that are
still distinct (``/srv/a/hi.wav`` and ``/data/b/hi.wav``: ``a/hi.wav`` and ``b/hi.wav``), so no
absolute path is mirrored under OUTDIR. Two inputs of one folder that differ only in their
extension (``jfk.wav``, ``jfk.mp3``) would write the same outputs: each of them keeps its
extension in its outputs' names (``jfk.wav.srt``, ``jfk.mp3.srt``); other inputs are named as
the single-file command names them (``talk.srt``).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

# Per-row options a manifest may carry; each task says which of them it takes.
ROW_OPTIONS = ("language", "num_speakers", "voice")
PATH_COLUMN = "path"
MAX_MANIFEST_BYTES = 256 << 20  # a list of paths larger than this is no manifest


@dataclass(frozen=True)
class Item:
    """One input of a batch."""

    path: str  # as the manifest gives it (joined to the manifest's folder when relative)
    name: str  # relative to the corpus root, with "/" separators: where its outputs go
    options: dict[str, Any] = field(default_factory=dict)  # per-row options (ROW_OPTIONS)
    stem: str = ""  # its outputs' base name; "": the name's stem (jfk.wav -> jfk)

    @property
    def output_stem(self) -> str:
        return self.stem or Path(self.name).stem


def read_manifest(manifest: str | Path, *, glob: str | None = None, folders: bool = False) -> list[Item]:
    """The inputs ``manifest`` names, in its order (a folder: sorted by name).

    ``glob``: which files of a folder (default ``*``, recursive with ``**/``). ``folders``: the
    inputs are folders (checkpoints for convert/quantize): a folder manifest lists its
    sub-folders, not its files.
    """
    path = Path(manifest).expanduser()
    if not path.exists():
        raise InputError(f"no such manifest: {path}")
    if path.is_dir():
        return _from_folder(path, glob, folders)
    if glob is not None:
        raise InputError(f"--glob selects files of a folder; {path} is a file (a list of inputs)")
    rows = _rows(path)
    if not rows:
        raise InputError(f"{path} lists no inputs")
    base = path.parent
    paths = [str(Path(p) if Path(p).is_absolute() else base / p) for p, _ in rows]
    return _distinct_stems([Item(p, name, opts) for p, name, (_, opts) in zip(paths, _names(paths), rows)])


def _from_folder(folder: Path, glob: str | None, folders: bool) -> list[Item]:
    pattern = glob or "*"
    found = sorted(p for p in folder.glob(pattern) if (p.is_dir() if folders else p.is_file()) and not _hidden(p, folder))
    if not found:
        kind = "folders" if folders else "files"
        raise InputError(f"no {kind} in {folder} match {pattern!r}" + ("" if glob else "; pass --glob PATTERN"))
    items = [Item(str(p), p.relative_to(folder).as_posix()) for p in found]
    return items if folders else _distinct_stems(items)


def _hidden(path: Path, root: Path) -> bool:
    """Dot files and the batch's own outputs (temporaries, batch.jsonl folders) are no inputs."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(path, per-row options) for each row of a text, JSONL or CSV manifest."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise InputError(f"{path} is larger than {MAX_MANIFEST_BYTES >> 20} MB; is it a manifest?")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not UTF-8 text (a manifest lists paths, one a line, or JSONL/CSV rows)") from e
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return [_row(_json_line(line, path, n), path, n) for n, line in _lines(text)]
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if PATH_COLUMN not in (reader.fieldnames or ()):
            raise InputError(f"{path}: a CSV manifest needs a {PATH_COLUMN!r} column; its header is {reader.fieldnames}")
        return [_row(row, path, n) for n, row in enumerate(reader, start=2)]
    return [(line.strip(), {}) for _, line in _lines(text) if not line.lstrip().startswith("#")]


def _lines(text: str):
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _json_line(line: str, path: Path, n: int) -> dict:
    try:
        row = json.loads(line)
    except ValueError as e:
        raise InputError(f"{path}:{n}: not a JSON object: {e}") from e
    if not isinstance(row, dict):
        raise InputError(f"{path}:{n}: a JSONL manifest row is an object with a {PATH_COLUMN!r} field")
    return row


def _row(row: dict, path: Path, n: int) -> tuple[str, dict[str, Any]]:
    """The path and the per-row options of one row; other columns are the corpus's own data."""
    value = row.get(PATH_COLUMN)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}:{n}: no {PATH_COLUMN!r}")
    options = {k: _value(k, row[k], path, n) for k in ROW_OPTIONS if row.get(k) not in (None, "")}
    return value.strip(), options


def _value(name: str, value: Any, path: Path, n: int) -> Any:
    if name == "num_speakers":
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 in JSON is infinity
            raise InputError(f"{path}:{n}: num_speakers must be a whole number, not {value!r}") from None
        if isinstance(value, float) and value != number:
            raise InputError(f"{path}:{n}: num_speakers must be a whole number, not {value!r}")
        return number
    if not isinstance(value, str):
        raise InputError(f"{path}:{n}: {name} must be text, not {value!r}")
    return value.strip()


def _names(paths: list[str]) -> list[str]:
    """Each path relative to the deepest folder all share; when that is the file system's root,
    the shortest trailing parts that tell them apart."""
    absolute = [os.path.abspath(p) for p in paths]
    root = os.path.commonpath([os.path.dirname(p) for p in absolute])
    if os.path.dirname(root) != root:
        return [Path(os.path.relpath(p, root)).as_posix() for p in absolute]
    parts = [Path(p).parts[1:] for p in absolute]  # the root itself left out
    for depth in range(1, max(len(x) for x in parts) + 1):
        names = ["/".join(x[-depth:]) for x in parts]
        if len(set(names)) == len(set(absolute)):
            return names
    return ["/".join(x) for x in parts]


def _distinct_stems(items: list[Item]) -> list[Item]:
    """Inputs of one folder whose names differ only in the extension keep it in their outputs' names."""
    by_stem: dict[tuple[str, str], set[str]] = {}
    for item in items:
        name = Path(item.name)
        by_stem.setdefault((name.parent.as_posix(), name.stem), set()).add(item.name)
    clash = {n for names in by_stem.values() if len(names) > 1 for n in names}
    return [Item(i.path, i.name, i.options, stem=Path(i.name).name) if i.name in clash else i for i in items]
