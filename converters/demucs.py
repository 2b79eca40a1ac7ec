"""demucs model packages (``.th``) and bags (``.yaml``) -> HTDemucs bundles, without running their pickles.

A ``.th`` file is ``torch.save`` of ``{"klass": <class>, "args": (), "kwargs": {...}, "state":
{name: tensor}, "training_args": {...}}``: the class is pickled by reference (which is why
``torch.load(weights_only=True)`` refuses demucs files) and ``kwargs`` holds the network's
configuration, ``segment`` as a ``fractions.Fraction``. It is read with the closed unpickler of
``oasr.io.closed_pickle``: the known demucs model classes become their dotted names, a Fraction is
rebuilt from its string, containers and tensors are read; any other global is refused by name
and nothing is built or run. A diffq-quantized state (``__quantized``) is refused: its integer
codes need diffq's decoder.

A bag is a yaml naming member signatures (``models: [f7e0c4bc, ...]``), optionally per-source
``weights`` (one row per member) and a ``segment`` override; each member is the ``<sig>.th`` or
``<sig>-<sha256 prefix>.th`` beside it (demucs' own layout). It becomes one bundle: the members'
tensors under ``models.<m>.`` and the weight matrix in the config. A single ``.th`` is a bag of one.

The runtime model keeps demucs' module names, so the tensor table is the identity under each
member's ``models.<m>.`` prefix; completeness is checked as for every converter (exact key set,
shapes).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.errors import ConversionError, UnsafeCheckpointError
from oasr.specs import DecodingDefaults, FeatureSpec, TokenizerSpec

if TYPE_CHECKING:
    from oasr.io.closed_pickle import ClosedUnpickler
    from oasr.models.demucs.htdemucs import HTDemucsConfig, HTDemucsNetConfig
    from torch import Tensor

log = logging.getLogger("oasr")

WHAT = "demucs checkpoint"
HTDEMUCS = "demucs.htdemucs.HTDemucs"
# The model classes a demucs package may name; only HTDemucs is converted.
KNOWN_CLASSES = {
    HTDEMUCS: "HTDemucs (demucs v4)",
    "demucs.hdemucs.HDemucs": "Hybrid Demucs (v3)",
    "demucs.demucs.Demucs": "Demucs (v1/v2, waveform only)",
    "demucs.wdemucs.WDemucs": "Demucs (v2 wave)",
    "demucs.tasnet.ConvTasNet": "Conv-TasNet",
}
SIG = re.compile(r"^[0-9a-f]{8}$")

# Arguments that shape only training or initialisation: read and left out.
_TRAINING_ONLY = frozenset({
    "wiener_residual", "end_iters", "dconv_init", "rescale", "emb_smooth", "t_dropout", "t_weight_decay",
    "t_lr", "t_max_positions", "t_cape_mean_normalize", "t_cape_augment", "t_cape_glob_loc_scale",
    "t_mask_type", "t_mask_random_seed", "t_sparse_attn_window", "t_global_window", "t_sparsity",
    "t_auto_sparsity", "multi_freqs_depth",
})
# Arguments oasr implements one value of: name -> (the value, what another value would need).
_REQUIRED_VALUES = {
    "cac": (True, "Wiener-filtered masks instead of complex-as-channels"),
    "wiener_iters": (0, "Wiener filtering"),
    "t_emb": ("sin", "a CAPE or learnt positional embedding"),
    "t_sparse_self_attn": (False, "sparse attention"),
    "t_sparse_cross_attn": (False, "sparse attention"),
    "t_sin_random_shift": (0, "a random position shift"),
    "use_train_segment": (True, "segments other than the training one"),
    "multi_freqs": (None, "MultiWrap frequency bands"),
}
_FALSY_AS_NONE = {"multi_freqs"}  # [] and None both mean no bands


def _fraction(*args) -> Fraction:
    """fractions.Fraction as pickled: (numerator, denominator) or its string; built from ints or a string only."""
    plain = all(isinstance(a, int) and not isinstance(a, bool) for a in args)
    if not (len(args) == 2 and plain or len(args) == 1 and (plain or isinstance(args[0], str))):
        raise ConversionError(f"a Fraction in the {WHAT} is built from {args!r:.60}, not integers or a string")
    try:
        return Fraction(*args)
    except (ValueError, ZeroDivisionError) as e:
        raise ConversionError(f"a Fraction in the {WHAT} is malformed ({args!r:.40})") from e


def _unpickler(data, members, prefix) -> ClosedUnpickler:
    from oasr.io.closed_pickle import ClassName, ClosedUnpickler

    extra = {tuple(name.rsplit(".", 1)): ClassName(name) for name in KNOWN_CLASSES}
    extra[("fractions", "Fraction")] = _fraction
    return ClosedUnpickler(data, members, prefix, what=WHAT, extra=extra)


def read_package(path: Path) -> dict:
    """The package dict of a demucs ``.th``, classes as names, nothing run."""
    from oasr.io.closed_pickle import read_archive_pickle

    package = read_archive_pickle(path, _unpickler, WHAT)
    if not isinstance(package, dict) or not {"klass", "kwargs", "state"} <= set(package):
        raise ConversionError(f"{path} is not a demucs model package (a dict with klass, kwargs and state)")
    return package


def net_config(package: dict, where: Path, segment_override=None) -> tuple[HTDemucsNetConfig, list[str]]:
    """HTDemucsNetConfig from a package's klass, args and kwargs; and notes on what was left out."""
    from oasr.io.closed_pickle import ClassName
    from oasr.models.demucs.htdemucs import HTDemucsNetConfig

    klass = package["klass"]
    if not isinstance(klass, ClassName):
        raise ConversionError(f"{where}: its klass is {type(klass).__name__}, not a class name")
    if klass != HTDEMUCS:
        raise ConversionError(f"{where} holds a {KNOWN_CLASSES[klass]} model ({klass}); oasr converts {HTDEMUCS} only")
    args, kwargs = package.get("args", ()), package["kwargs"]
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ConversionError(f"{where}: its kwargs are not a dict of named arguments")
    kwargs = dict(kwargs)
    if args:
        if not isinstance(args, (list, tuple)) or len(args) != 1 or "sources" in kwargs:
            raise ConversionError(f"{where}: positional arguments beyond `sources` are not understood ({args!r:.80})")
        kwargs["sources"] = args[0]
    for name, (value, needs) in _REQUIRED_VALUES.items():
        given = kwargs.get(name, value)
        if name in _FALSY_AS_NONE and not given:
            given = None
        if given != value:
            raise ConversionError(f"{where}: {name}={given!r:.60} asks for {needs}, which oasr does not implement")
    sources = kwargs.get("sources")
    if not isinstance(sources, (list, tuple)) or not all(isinstance(s, str) for s in sources):
        raise ConversionError(f"{where}: sources is {sources!r:.80}, not a list of names")
    samplerate = kwargs.get("samplerate", 44100)
    segment = kwargs.get("segment", 10) if segment_override is None else segment_override
    if not isinstance(segment, (int, float, Fraction)) or isinstance(segment, bool) or not segment > 0:
        raise ConversionError(f"{where}: segment {segment!r:.40} is not a positive number of seconds")
    # demucs keyword arguments oasr reads into HTDemucsNetConfig under the same name (the rest of
    # HTDemucsNetConfig: segment_samples from `segment` and `samplerate`, channels_time None -> 0).
    same_name = frozenset(f.name for f in dataclasses.fields(HTDemucsNetConfig)) - {"segment_samples", "sources", "samplerate"}
    fields = {k: kwargs[k] for k in same_name if k in kwargs}
    fields["channels_time"] = kwargs.get("channels_time") or 0
    for name in ("t_norm_in_group", "t_group_norm", "t_norm_out"):
        if name in fields:
            fields[name] = int(fields[name])  # demucs passes bools or group counts
    ignored = sorted(set(kwargs) - same_name - _TRAINING_ONLY - set(_REQUIRED_VALUES) - {"sources", "samplerate", "segment"})
    notes = [f"{where.name}: demucs argument(s) {', '.join(ignored)} not used (demucs drops them too)"] if ignored else []
    try:
        config = HTDemucsNetConfig(
            sources=tuple(sources), samplerate=samplerate, segment_samples=int(segment * samplerate), **fields
        )
    except (TypeError, ValueError) as e:
        raise ConversionError(f"{where}: its kwargs do not make an HTDemucs configuration ({e})") from e
    return config, notes


def _state(package: dict, where: Path) -> dict[str, Tensor]:
    from torch import Tensor

    state = package["state"]
    if not isinstance(state, dict):
        raise ConversionError(f"{where}: its state is {type(state).__name__}, not a dict of tensors")
    if state.get("__quantized"):
        raise UnsafeCheckpointError(
            f"{where} holds a diffq-quantized state: its integer codes need diffq's decoder, which oasr does "
            "not run; convert the unquantized model instead (htdemucs, htdemucs_ft, htdemucs_6s are not quantized)"
        )
    bad = [k for k, v in state.items() if not (isinstance(k, str) and isinstance(v, Tensor))]
    if bad:
        raise ConversionError(f"{where}: its state holds non-tensor entries ({', '.join(map(str, bad[:3]))})")
    return state


class DemucsConverter(CheckpointConverter):
    name = "demucs"
    architecture = "htdemucs"
    markers = "a demucs model package (.th, an HTDemucs), a bag yaml naming member signatures beside their .th files, or a folder holding one"
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = None  # the identity: the runtime keeps demucs' names under models.<m>.

    @classmethod
    def detect(cls, path: Path) -> str | None:
        try:
            kind, file = cls._entry(Path(path))
        except ConversionError:
            return None
        if kind == "bag":
            return f"{file.name} (a demucs bag naming its members)"
        return f"{file.name} (a demucs model package)" if _names_demucs(file) else None

    @staticmethod
    def _entry(path: Path) -> tuple[str, Path]:
        if path.is_file():
            if path.suffix == ".th":
                return "package", path
            if path.suffix in (".yaml", ".yml") and _bag_yaml(path) is not None:
                return "bag", path
        elif path.is_dir():
            bags = [p for p in sorted(path.glob("*.y*ml")) if _bag_yaml(p) is not None]
            if len(bags) == 1:
                return "bag", bags[0]
            packages = sorted(path.glob("*.th"))
            if not bags and len(packages) == 1:
                return "package", packages[0]
        raise ConversionError(f"{path}: expected {DemucsConverter.markers}")

    @functools.cached_property
    def _plan(self) -> tuple[list[Path], list[list[float]], object, Path | None]:
        """(member files, weights, segment override, the bag yaml or None)."""
        kind, file = self._entry(self.path)
        if kind == "package":
            return [file], [], None, None
        bag = _bag_yaml(file)
        sigs, weights, segment = bag["models"], bag.get("weights"), bag.get("segment")
        files = [_member_file(file.parent, sig, file) for sig in sigs]
        if weights is not None:
            if not (isinstance(weights, list) and len(weights) == len(sigs)
                    and all(isinstance(r, list) and all(isinstance(w, (int, float)) for w in r) for r in weights)):
                raise ConversionError(f"{file}: weights must be one list of numbers per model ({len(sigs)})")
        return files, weights or [], segment, file

    @functools.cached_property
    def _members(self) -> list[tuple[HTDemucsNetConfig, dict[str, Tensor], list[str]]]:
        files, _, segment, _ = self._plan
        out = []
        for f in files:
            package = read_package(f)
            config, notes = net_config(package, f, segment)
            out.append((config, _state(package, f), notes))
        return out

    def source_files(self) -> list[Path]:
        files, _, _, bag = self._plan
        return ([bag] if bag else []) + files

    def build_config(self) -> HTDemucsConfig:
        from oasr.models.demucs.htdemucs import HTDemucsConfig

        members = [m[0] for m in self._members]
        weights = self._plan[1] or [[1.0] * len(members[0].sources) for _ in members]
        try:
            return HTDemucsConfig(members=tuple(members), weights=tuple(tuple(r) for r in weights))
        except Exception as e:  # BundleError: a bag whose members or weights do not fit together
            raise ConversionError(f"{self.path}: {e}") from e

    def load_state_dict(self) -> dict[str, Tensor]:
        return {f"models.{m}.{k}": t for m, (_, state, _) in enumerate(self._members) for k, t in state.items()}

    def notes(self) -> list[str]:
        return [n for _, _, notes in self._members for n in notes]

    def build_specs(self, config: HTDemucsConfig):
        first = config.members[0]
        features = FeatureSpec(
            kind="raw_audio", sample_rate=config.samplerate, n_mels=0, n_fft=first.nfft, hop_length=first.nfft // 4,
            chunk_seconds=first.segment_samples / config.samplerate,
        )
        decoding = DecodingDefaults(family="separate", options={"sources": list(config.sources)})
        return TokenizerSpec(kind="none"), {}, features, decoding


def _names_demucs(file: Path) -> bool:
    """Whether the package's pickle names a demucs class: its data.pkl (size-checked, never
    unpickled here) holds the module name and the ``klass`` key."""
    import zipfile

    from oasr.io.closed_pickle import MAX_PICKLE, ZIP_ERRORS, Members, archive_prefix

    try:
        with zipfile.ZipFile(file) as archive:
            prefix = archive_prefix(archive, WHAT)
            data = Members(archive, str(file), file.stat().st_size).read(f"{prefix}data.pkl", limit=MAX_PICKLE)
    except (*ZIP_ERRORS, ConversionError):
        return False
    return b"klass" in data and b"demucs." in data


def _bag_yaml(path: Path) -> dict | None:
    import yaml

    try:
        if path.stat().st_size > 1 << 16:
            return None
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list) or not data["models"]:
        return None
    if not all(isinstance(s, str) and SIG.match(s) for s in data["models"]):
        return None
    return data


def _member_file(folder: Path, sig: str, bag: Path) -> Path:
    found = [p for p in sorted(folder.glob(f"{sig}*.th")) if p.stem == sig or p.stem.startswith(sig + "-")]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise ConversionError(f"{bag} names model {sig}, and {folder} holds {what} {sig}.th or {sig}-<hash>.th file(s)")
    return found[0]
