"""FunASR 1.4.16 as the Paraformer reference, installed without its dependencies.

What its Paraformer, WavFrontend and CharTokenizer modules import beyond torch, numpy and yaml
gets a stand-in here, before ``funasr`` is imported:

- ``rapidfuzz``, ``six`` (``funasr.metrics.common``: edit distances for training metrics) and
  ``kaldiio`` (``funasr.utils.load_utils``: Kaldi archives; the tests pass features or samples),
  never called at inference: modules whose attributes are errors when touched;
- ``torchaudio``: FunASR's fbank is ``torchaudio.compliance.kaldi.fbank``; PyPI's torchaudio does
  not load beside this CPU torch, but ``compliance/kaldi.py`` is pure Python over torch, so it is
  read out of the wheel ``make install-test`` downloads into ``.weights/reference`` (never
  installed), as the WeSpeaker tests do.

``funasr`` imports every one of its submodules when imported; the ones needing packages that are
absent (torch_complex, ...) record an import error and are skipped, which it allows.

``write_folder`` builds FunASR's own ``Paraformer`` from a ``config.yaml`` mapping, draws seeded
weights and writes the folder as FunASR's hub download lays it out (``config.yaml``,
``model.pt``, ``am.mvn``, ``tokens.json``, ``seg_dict``); ``run_funasr`` decodes with FunASR's
``inference`` as ``AutoModel`` calls it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path(os.environ.get("OASR_REFERENCE_WHEELS", ROOT / ".weights" / "reference"))
VERSION = "1.4.16"


def _kaldi_module() -> types.ModuleType:
    wheels = sorted(WHEELS.glob("torchaudio-*.whl"))
    if not wheels:
        pytest.skip(f"no torchaudio wheel in {WHEELS} (make install-test downloads it)")
    with zipfile.ZipFile(wheels[-1]) as z:
        source = z.read("torchaudio/compliance/kaldi.py").decode()
    module = types.ModuleType("torchaudio.compliance.kaldi")
    module.__file__ = f"{wheels[-1].name}/torchaudio/compliance/kaldi.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


class _Absent(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"{self.__name__}.{name} is a stand-in (not needed by the Paraformer's inference)")


def _install_stand_ins() -> None:
    if "torchaudio.compliance.kaldi" not in sys.modules:
        audio = sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
        kaldi = _kaldi_module()
        compliance = types.ModuleType("torchaudio.compliance")
        compliance.kaldi = kaldi
        audio.compliance = compliance
        sys.modules["torchaudio.compliance"] = compliance
        sys.modules["torchaudio.compliance.kaldi"] = kaldi
    for name in ("rapidfuzz", "rapidfuzz.distance", "six", "kaldiio"):
        sys.modules.setdefault(name, _Absent(name))
    sys.modules["rapidfuzz"].distance = sys.modules["rapidfuzz.distance"]
    sys.modules["rapidfuzz.distance"].Levenshtein = _Absent("rapidfuzz.distance.Levenshtein")


def funasr():
    """The ``funasr`` package (1.4.16), or a skip naming what is missing.

    Its ``__init__`` imports all of its several hundred submodules (a minute here); the package
    is entered as a bare module over its folder instead, and only the Paraformer's modules are
    imported (each registers its classes in ``funasr.register.tables`` as it loads)."""
    if "funasr" not in sys.modules:
        spec = importlib.util.find_spec("funasr")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip(f"funasr=={VERSION} is not installed (make install-test installs it)")
        folder = Path(list(spec.submodule_search_locations)[0])
        package = types.ModuleType("funasr")
        package.__path__ = [str(folder)]
        package.__file__ = str(folder / "__init__.py")
        package.__version__ = (folder / "version.txt").read_text().strip()
        sys.modules["funasr"] = package
    package = sys.modules["funasr"]
    if package.__version__ != VERSION:
        pytest.skip(f"funasr {package.__version__} installed; the reference is {VERSION}")
    _install_stand_ins()
    with contextlib.redirect_stdout(io.StringIO()):  # its modules print notes on absent extras
        for module in ("funasr.models.sanm.encoder", "funasr.models.paraformer.cif_predictor", "funasr.models.paraformer.decoder",
                       "funasr.models.paraformer.model", "funasr.frontends.wav_frontend", "funasr.tokenizer.char_tokenizer"):
            importlib.import_module(module)
    return package


# -- tiny configurations in FunASR's schema -------------------------------------------------------


def config(*, d_model=32, encoder_layers=3, decoder_layers=3, att_layers=2, predictor="CifPredictorV2", lfr=(7, 6), **predictor_conf):
    """A config.yaml mapping shaped like FunASR's paraformer template, at tiny dimensions."""
    return {
        "model": "Paraformer",
        "model_conf": {"ctc_weight": 0.0, "lsm_weight": 0.1, "length_normalized_loss": True, "predictor_weight": 1.0, "predictor_bias": 1},
        "encoder": "SANMEncoder",
        "encoder_conf": {
            "output_size": d_model, "attention_heads": 4, "linear_units": 2 * d_model, "num_blocks": encoder_layers,
            "dropout_rate": 0.1, "positional_dropout_rate": 0.1, "attention_dropout_rate": 0.1, "input_layer": "pe",
            "pos_enc_class": "SinusoidalPositionEncoder", "normalize_before": True, "kernel_size": 11, "sanm_shfit": 0,
            "selfattention_layer_type": "sanm",
        },
        "decoder": "ParaformerSANMDecoder",
        "decoder_conf": {
            "attention_heads": 4, "linear_units": 2 * d_model, "num_blocks": decoder_layers, "dropout_rate": 0.1,
            "positional_dropout_rate": 0.1, "self_attention_dropout_rate": 0.1, "src_attention_dropout_rate": 0.1,
            "att_layer_num": att_layers, "kernel_size": 11, "sanm_shfit": 0,
        },
        "predictor": predictor,
        "predictor_conf": {"idim": d_model, "threshold": 1.0, "l_order": 1, "r_order": 1, "tail_threshold": 0.45, **predictor_conf},
        "frontend": "WavFrontend",
        "frontend_conf": {"fs": 16000, "window": "hamming", "n_mels": 80, "frame_length": 25, "frame_shift": 10, "lfr_m": lfr[0], "lfr_n": lfr[1], "dither": 0.0},
        "tokenizer": "CharTokenizer",
        "tokenizer_conf": {"unk_symbol": "<unk>", "split_with_space": True},
    }


SPECIALS = ["<blank>", "<s>", "</s>"]
CHINESE = list("你好世界我们今天气很不错的是一个")
ENGLISH_PIECES = ["he@@", "llo", "wor@@", "ld", "a", "b", "c", "it's", "the", "s@@", "ay", "i"]


def vocabulary(kind: str) -> list[str]:
    """``zh``: characters with a few English pieces, as paraformer-zh's list mixes them; ``en``: BPE pieces."""
    body = CHINESE + ENGLISH_PIECES[:6] if kind == "zh" else ENGLISH_PIECES + ["go", "od", "mor@@", "ning"]
    return SPECIALS + body + ["<unk>"]


def write_cmvn(path: Path, dim: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An am.mvn in Kaldi nnet text, as FunASR's models carry (random statistics)."""
    shift = rng.normal(-8.0, 2.0, dim).astype(np.float32)
    scale = rng.uniform(0.2, 0.5, dim).astype(np.float32)
    row = lambda v: " ".join(f"{x:.6f}" for x in v)  # noqa: E731
    path.write_text(
        f"<Nnet>\n<Splice> {dim} {dim}\n[ 0 ]\n<AddShift> {dim} {dim}\n<LearnRateCoef> 0 [ {row(shift)} ]\n"
        f"<Rescale> {dim} {dim}\n<LearnRateCoef> 0 [ {row(scale)} ]\n</Nnet>\n",
        encoding="utf-8",
    )
    return shift, scale


def build_model(conf: dict, vocab_size: int, seed: int):
    """FunASR's Paraformer from ``conf``, seeded weights a little wider than its init (so the
    decoder's choices vary), in eval mode."""
    funasr()
    from funasr.models.paraformer.model import Paraformer

    torch.manual_seed(seed)
    kwargs = {k: v for k, v in conf.items() if k not in ("model", "model_conf", "frontend", "frontend_conf", "tokenizer", "tokenizer_conf")}
    lfr = conf["frontend_conf"]
    model = Paraformer(**kwargs, **conf["model_conf"], input_size=lfr["n_mels"] * lfr["lfr_m"], vocab_size=vocab_size)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1 and "cif" not in name:
                p.mul_(2.0)
            if name.startswith("decoder.output_layer."):  # labels that change from token to token
                p.mul_(6.0 if p.dim() > 1 else 0.0)
    return model.eval()


def write_folder(folder: Path, conf: dict, kind: str, seed: int = 0, *, wrap: str | None = "state_dict") -> Path:
    """A FunASR model folder (config.yaml, model.pt, am.mvn, tokens.json, seg_dict for ``en``)."""
    folder.mkdir(parents=True, exist_ok=True)
    tokens = vocabulary(kind)
    model = build_model(conf, len(tokens), seed)
    lfr = conf["frontend_conf"]
    write_cmvn(folder / "am.mvn", lfr["n_mels"] * lfr["lfr_m"], np.random.default_rng(seed))
    (folder / "config.yaml").write_text(yaml.safe_dump(conf, allow_unicode=True), encoding="utf-8")
    (folder / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
    if kind == "en":
        (folder / "seg_dict").write_text("hello he@@ llo\nworld wor@@ ld\nsay s@@ ay\nmorning mor@@ ning\n", encoding="utf-8")
    state = model.state_dict()
    torch.save({wrap: state} if wrap else state, folder / "model.pt")
    return folder


def funasr_parts(folder: Path):
    """FunASR's model (weights from the folder, as AutoModel loads them), front end and tokenizer."""
    funasr()
    from funasr.frontends.wav_frontend import WavFrontend
    from funasr.tokenizer.char_tokenizer import CharTokenizer

    conf = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    tokens = json.loads((folder / "tokens.json").read_text(encoding="utf-8"))
    model = build_model(conf, len(tokens), 0)
    state = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(state.get("state_dict", state), strict=True)
    frontend = WavFrontend(cmvn_file=str(folder / "am.mvn"), **conf["frontend_conf"]).eval()
    seg = folder / "seg_dict"
    tokenizer = CharTokenizer(token_list=tokens, seg_dict=str(seg) if seg.is_file() else None, **conf["tokenizer_conf"])
    return model, frontend, tokenizer


def run_funasr(folder: Path, samples: np.ndarray, timestamps: bool = True) -> dict:
    """FunASR's ``inference`` on one utterance, with the intermediate tensors it computes."""
    model, frontend, tokenizer = funasr_parts(folder)
    with torch.no_grad():
        audio = torch.from_numpy(samples.astype(np.float32))
        feats, lengths = frontend(audio[None], torch.tensor([len(samples)]))
        encoded, enc_lengths = model.encode(feats, lengths)
        embeds, token_num, alphas, peaks = model.calc_predictor(encoded, enc_lengths)
        count = token_num.round().long()
        logits = model.cal_decoder_with_predictor(encoded, enc_lengths, embeds, count)[0] if int(count.max()) > 0 else None
        with contextlib.redirect_stdout(io.StringIO()):
            results, _ = model.inference(feats, lengths[:, None], key=["utt"], tokenizer=tokenizer, frontend=frontend,
                                         data_type="fbank", device="cpu", output_timestamp=timestamps)
            plain, _ = model.inference(feats, lengths[:, None], key=["utt"], tokenizer=tokenizer, frontend=frontend,
                                       data_type="fbank", device="cpu", output_timestamp=False)
            ids, _ = model.inference(feats, lengths[:, None], key=["utt"], tokenizer=None, frontend=frontend, data_type="fbank", device="cpu")
    return {
        "features": feats[0], "encoded": encoded[0], "alphas": alphas[0], "fires": peaks[0], "token_num": float(token_num[0]),
        "log_probs": None if logits is None else logits[0], "count": int(count[0]),
        "text": plain[0]["text"] if plain else "", "timestamp": results[0].get("timestamp", []) if results else [],
        "token_ids": ids[0]["token_int"] if ids else [],
    }
