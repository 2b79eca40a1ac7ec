"""icefall's weight files and where its model folders keep them.

- ``pretrained.pt`` (``export.py``): ``{"model": state_dict}``;
- ``epoch-N.pt`` / ``checkpoint-N.pt`` (``train.py``'s ``save_checkpoint``): ``model``, optimizer,
  scheduler, grad scaler, sampler states, and the training ``params`` spread over the top level
  (an ``AttributeDict``, paths as ``PosixPath``). Read by the closed unpickler: the dict subclass
  becomes a dict, a path its text; every tensor outside ``model`` (optimizer, sampler) is left
  unread; any other global is refused by name, nothing is run;
- ``cpu_jit.pt`` / ``jit_script.pt`` (``export.py --jit``): TorchScript, its tensors read as data,
  the wrapped ``encoder.encoder_embed.*`` / ``encoder.encoder.*`` named back.

Weights are looked for in the folder, then its ``exp/``: a named file first
(``pretrained.pt``, ``model.pt``, ``checkpoint.pt``, ``cpu_jit.pt``, ``jit_script.pt``), then the
highest ``epoch-N.pt``, then a lone ``*.pt``; several other ``.pt`` files are refused, not picked
by name. Tokens (``tokens.txt``, ``bpe.model``) beside the weights, in the folder, or in
``data/lang_bpe_<N>/`` / ``data/lang_char/`` beside ``exp/``.
"""

from __future__ import annotations

import functools
import pathlib
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.errors import ConversionError, OasrError

if TYPE_CHECKING:
    from torch import Tensor

NAMED = ("pretrained.pt", "model.pt", "checkpoint.pt", "cpu_jit.pt", "jit_script.pt")
EPOCH = re.compile(r"^epoch-(\d+)\.pt$")
TOKEN_FILES = ("tokens.txt", "bpe.model")
WHAT = "icefall checkpoint"


def weight_file(path: Path) -> Path:
    """The weight file of an icefall folder (or the file itself), by the rules above."""
    path = Path(path)
    if path.is_file():
        return path
    for folder in (path, path / "exp"):
        if not folder.is_dir():
            continue
        for name in NAMED:
            if (folder / name).is_file():
                return folder / name
        epochs = sorted((int(m.group(1)), p) for p in folder.glob("epoch-*.pt") if (m := EPOCH.match(p.name)))
        if epochs:
            return epochs[-1][1]
        others = sorted(p.name for p in folder.glob("*.pt"))
        if len(others) == 1:
            return folder / others[0]
        if others:
            raise ConversionError(
                f"{folder} holds several weight files ({', '.join(others)}) and none icefall names "
                f"({', '.join(NAMED)}, epoch-<N>.pt); point at the one to convert"
            )
    raise ConversionError(f"{path} holds no icefall weights ({', '.join(NAMED)}, epoch-<N>.pt or one *.pt, here or in exp/)")


def has_weights(folder: Path) -> str | None:
    """The name of an icefall weight file in ``folder`` or its exp/ (pretrained.pt, epoch-N.pt), or None."""
    for where in (folder, folder / "exp"):
        if (where / "pretrained.pt").is_file():
            return str((where / "pretrained.pt").relative_to(folder))
        epoch = next((p for p in sorted(where.glob("epoch-*.pt")) if EPOCH.match(p.name)), None) if where.is_dir() else None
        if epoch is not None:
            return str(epoch.relative_to(folder))
    return None


def token_files(root: Path, weights: Path) -> dict[str, Path]:
    """tokens.txt / bpe.model: beside the weights, in the folder, else in data/lang_*/ beside exp/."""
    root = Path(root) if Path(root).is_dir() else Path(root).parent
    places = [weights.parent, root]
    for base in {root, weights.parent.parent if weights.parent.name == "exp" else root}:
        data = base / "data"
        if data.is_dir():
            places += sorted(p for p in data.iterdir() if p.is_dir() and (p.name.startswith("lang_bpe_") or p.name == "lang_char"))
    for place in places:
        found = {name: place / name for name in TOKEN_FILES if (place / name).is_file()}
        if found:
            return found
    return {}


def _path(*parts) -> str:  # pathlib.PosixPath in params: its text, nothing built
    return str(pathlib.PurePosixPath(*[str(p) for p in parts]))


class _StateDict(dict):
    """A state dict's OrderedDict: torch pickles its ``_metadata`` (module versions) as state, unused here."""

    def __setstate__(self, state):
        pass


class _Lazy:
    """A storage or tensor named by the pickle, read only if it ends up under ``model``."""

    __slots__ = ("load",)

    def __init__(self, load):
        self.load = load


@functools.cache
def _checkpoint_unpickler() -> type:
    """The unpickler of icefall checkpoints, defined on first use: its base imports torch."""
    from oasr.io.closed_pickle import ClosedUnpickler

    class CheckpointUnpickler(ClosedUnpickler):
        def __init__(self, data, members, prefix):
            extra = {
                ("icefall.utils", "AttributeDict"): dict,
                ("zipformer.utils.utils", "AttributeDict"): dict,
                ("pathlib", "PosixPath"): _path,
                ("pathlib", "PurePosixPath"): _path,
                ("builtins", "set"): set,
                ("collections", "OrderedDict"): _StateDict,
            }
            super().__init__(data, members, prefix, what=WHAT, extra=extra)

        def persistent_load(self, pid):
            parent = super().persistent_load
            return _Lazy(lambda: parent(pid))

        def rebuild_tensor(self, storage, offset, size, stride, *flags):
            parent = super().rebuild_tensor
            if not isinstance(storage, _Lazy):
                raise ConversionError(f"{self.where}: a tensor is rebuilt from {type(storage).__name__}, not a storage")
            return _Lazy(lambda: parent(storage.load(), offset, size, stride, *flags))

    return CheckpointUnpickler


def read_weights(file: Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """(the model's state dict, the training params when the file carries them)."""
    from oasr.io.torchscript import read_torchscript_tensors, torchscript_code_paths

    from oasr.io.checkpoint import load_torch_file
    from oasr.io.closed_pickle import MAX_PICKLE, PICKLE_ERRORS, ZIP_ERRORS, Members, archive_prefix, first_line

    if torchscript_code_paths(file):
        state = read_torchscript_tensors(file)
        renamed = {}
        for name, tensor in state.items():
            for old, new in (("encoder.encoder_embed.", "encoder_embed."), ("encoder.encoder.", "encoder.")):
                if name.startswith(old):
                    name = new + name[len(old) :]
                    break
            if not name.endswith("encoder_pos.pe"):  # the position table a scripted model keeps; rebuilt
                renamed[name] = tensor
        return renamed, {}
    if not zipfile.is_zipfile(file):  # a legacy (non-zip) torch file: torch's weights-only reader
        return _split(file, load_torch_file(file), lambda v: v)
    try:
        with zipfile.ZipFile(file) as archive:  # open while the model's tensors are read
            prefix = archive_prefix(archive, WHAT)
            members = Members(archive, str(file), Path(file).stat().st_size)
            root = _checkpoint_unpickler()(members.read(f"{prefix}data.pkl", limit=MAX_PICKLE), members, prefix).load()
            return _split(file, root, lambda v: v.load() if isinstance(v, _Lazy) else v)
    except OasrError:
        raise
    except (*ZIP_ERRORS, *PICKLE_ERRORS) as e:
        raise ConversionError(f"{file} is not a readable {WHAT}: {first_line(e)}") from e


def _split(file: Path, root, load) -> tuple[dict[str, Tensor], dict[str, Any]]:
    from torch import Tensor

    if not isinstance(root, dict) or not isinstance(root.get("model"), dict):
        raise ConversionError(f"{file}: expected an icefall checkpoint, a dict with a 'model' state dict")
    state = {}
    for name, value in root["model"].items():
        tensor = load(value)
        if not isinstance(name, str) or not isinstance(tensor, Tensor):
            raise ConversionError(f"{file}: model entry {name!r:.60} is not a named tensor")
        state[name[len("module.") :] if name.startswith("module.") else name] = tensor  # saved from DDP
    params = {k: v for k, v in root.items() if isinstance(k, str) and isinstance(v, (int, float, str, bool))}
    return state, params

