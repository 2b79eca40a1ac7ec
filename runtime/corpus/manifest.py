"""MANIFEST -> the inputs of a batch: a folder (with a glob), a text file of paths, or JSONL/CSV
with a ``path`` column and optional per-row options.

Each input keeps the path as written (relative entries of a manifest file are taken from the
manifest's folder) and its name relative to the corpus root, which is where its outputs go under
OUTDIR: the manifest folder, or the deepest folder all listed inputs share.
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
    root = _common_root(paths)
    return [Item(p, _relative(p, root), opts) for p, (_, opts) in zip(paths, rows)]


def _from_folder(folder: Path, glob: str | None, folders: bool) -> list[Item]:
    pattern = glob or "*"
    found = sorted(p for p in folder.glob(pattern) if (p.is_dir() if folders else p.is_file()) and not _hidden(p, folder))
    if not found:
        kind = "folders" if folders else "files"
        raise InputError(f"no {kind} in {folder} match {pattern!r}" + ("" if glob else "; pass --glob PATTERN"))
    return [Item(str(p), p.relative_to(folder).as_posix()) for p in found]


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
        except (TypeError, ValueError):
            raise InputError(f"{path}:{n}: num_speakers must be a whole number, not {value!r}") from None
        if isinstance(value, float) and value != number:
            raise InputError(f"{path}:{n}: num_speakers must be a whole number, not {value!r}")
        return number
    if not isinstance(value, str):
        raise InputError(f"{path}:{n}: {name} must be text, not {value!r}")
    return value.strip()


def _common_root(paths: list[str]) -> str:
    parents = [os.path.dirname(os.path.abspath(p)) for p in paths]
    return os.path.commonpath(parents)


def _relative(path: str, root: str) -> str:
    return Path(os.path.relpath(os.path.abspath(path), root)).as_posix()
