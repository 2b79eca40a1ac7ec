"""FastConformer against NeMo's toolkit itself: tiny random models saved by NeMo's ``save_to``.

``tests/support/nemo_reference.py`` runs under the test-only venv ``.venv-nemo`` (``make install-nemo``,
NeMo 3.0.0 beside the CPU torch; oasr's own venv never imports NeMo): it builds a BPE CTC, a
character CTC, an RNN-T, a TDT and a hybrid RNNT+CTC model with NeMo's classes, saves each as a
``.nemo`` and writes NeMo's features, encoder output and greedy token ids for jfk.wav. Here each
archive goes through ``oasr convert`` and oasr's model and decoders must give the same: the front
end and the encoder within 1e-4 in fp32, the CTC log-probabilities too, and greedy ids (both heads
of the hybrid) identical, also through the whole ``oasr.transcribe`` call.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
NEMO_PYTHON = ROOT / ".venv-nemo" / "bin" / "python"
KINDS = ("ctc", "char_ctc", "rnnt", "tdt", "hybrid")
CLASSES = {
    "ctc": "EncDecCTCModelBPE", "char_ctc": "EncDecCTCModel", "rnnt": "EncDecRNNTBPEModel",
    "tdt": "EncDecRNNTBPEModel", "hybrid": "EncDecHybridRNNTCTCBPEModel",
}
FAMILIES = {"ctc": "ctc", "char_ctc": "ctc", "rnnt": "rnnt", "tdt": "tdt", "hybrid": "rnnt"}
TOL = 1e-4

pytestmark = pytest.mark.slow  # NeMo's import and five models: about 30 s of CPU


@pytest.fixture(scope="module")
def nemo_dir(jfk_wav, tmp_path_factory) -> Path:
    """The .nemo archives and NeMo's outputs (``<kind>.nemo``, ``<kind>.npz``), made once."""
    if not NEMO_PYTHON.is_file():
        pytest.skip(f"the NeMo reference venv is absent ({NEMO_PYTHON.parent.parent.name}: make install-nemo)")
    out = tmp_path_factory.mktemp("nemo-toolkit")
    run = subprocess.run(
        [str(NEMO_PYTHON), str(ROOT / "tests" / "support" / "nemo_reference.py"), str(jfk_wav), str(out)],
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def bundles(nemo_dir, tmp_path_factory) -> Path:
    """Every archive through ``oasr convert`` (one call, a folder of bundles named by the sources)."""
    from oasr_cli.main import main

    dst = tmp_path_factory.mktemp("nemo-bundles")
    assert main(["convert", *(str(nemo_dir / f"{k}.nemo") for k in KINDS), str(dst)]) == 0
    return dst


@pytest.fixture(scope="module")
def audio(jfk_wav) -> np.ndarray:
    import soundfile as sf

    samples, rate = sf.read(jfk_wav, dtype="float32")
    assert rate == 16000
    return samples


def _load(bundles: Path, kind: str):
    import oasr

    return oasr.load_pretrained(str(bundles / kind), device="cpu", dtype="float32")


def _reference(nemo_dir: Path, kind: str) -> dict[str, np.ndarray]:
    with np.load(nemo_dir / f"{kind}.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module", params=KINDS)
def case(request, nemo_dir, bundles, audio):
    """(kind, NeMo's outputs, the loaded bundle, oasr's features of jfk.wav [F, T])."""
    from oasr.features import feature_extractor

    kind = request.param
    loaded = _load(bundles, kind)
    features = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio), loaded.feature_spec)
    return kind, _reference(nemo_dir, kind), loaded, features


def test_converted_as_nemo_saved_it(case, bundles):
    kind, ref, loaded, _ = case
    config = json.loads((bundles / kind / "oasr_config.json").read_text())
    provenance = config["provenance"]
    assert provenance["source_format"] == "nemo"
    assert provenance["options"]["source_class"].rsplit(".", 1)[-1] == CLASSES[kind]
    assert sorted(provenance["dropped"]) == ["preprocessor.featurizer.fb", "preprocessor.featurizer.window"]
    assert config["decoding"]["family"] == FAMILIES[kind]
    assert loaded.decoding.options.get("ctc_head", False) == (kind == "hybrid")
    assert loaded.tokenizer() is not None


def test_front_end_matches_nemo(case):
    _, ref, _, features = case
    want = torch.from_numpy(ref["features"])
    assert features.shape == want.shape
    assert (features - want).abs().max() < TOL


def test_encoder_matches_nemo(case):
    """On NeMo's own features (the encoder alone) and on oasr's (the whole chain from audio)."""
    _, ref, loaded, features = case
    model = loaded.model
    want = torch.from_numpy(ref["encoded"])
    with torch.no_grad():
        for x in (torch.from_numpy(ref["features"]), features):
            encoded, lengths = model.encode(x[None], torch.tensor([x.shape[-1]]))
            assert lengths.tolist() == [want.shape[0]] and encoded[0].shape == want.shape
            assert (encoded[0] - want).abs().max() < TOL


def _oasr_tokens(loaded, features: torch.Tensor, head: str) -> tuple[list[int], list[int]]:
    """oasr's greedy ids and each token's (first) frame, from its own features; ``head`` "ctc" or
    "transducer"."""
    from oasr.decoding.ctc.search import greedy_ctc
    from oasr.decoding.transducer.search import greedy_transducer

    model, decoding = loaded.model, loaded.decoding
    with torch.no_grad():
        encoded, lengths = model.encode(features[None], torch.tensor([features.shape[-1]]))
        if head == "ctc":
            tokens = greedy_ctc(model.ctc_logits(encoded)[0].log_softmax(-1), decoding.blank_id)
            return [t.id for t in tokens], [t.first_frame for t in tokens]
        (tokens,) = greedy_transducer(
            model, encoded, lengths, blank_id=decoding.blank_id, durations=decoding.options.get("durations", ()),
            max_symbols=decoding.options["max_symbols_per_step"],
        )
    return [t.id for t in tokens], [t.frame for t in tokens]


def _ctc_log_probs(loaded, features: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        encoded, _ = loaded.model.encode(features[None], torch.tensor([features.shape[-1]]))
        return loaded.model.ctc_logits(encoded)[0].log_softmax(-1)


def test_greedy_tokens_match_nemo(case):
    """Greedy ids and their frames (CTC: where a token's run starts; transducers: the emitting
    frame, which TDT durations move) identical to NeMo's decoding; a hybrid's CTC head too."""
    kind, ref, loaded, features = case
    heads = [("", "ctc" if kind in ("ctc", "char_ctc") else "transducer")] + ([("ctc_", "ctc")] if kind == "hybrid" else [])
    for prefix, head in heads:
        if head == "ctc":
            assert (_ctc_log_probs(loaded, features) - torch.from_numpy(ref[f"{prefix}log_probs"])).abs().max() < TOL
        want = ref[f"{prefix}ids"].tolist()
        assert len(want) >= 20 and len(set(want)) >= 5, "NeMo's output must mix several labels"
        ids, frames = _oasr_tokens(loaded, features, head)
        assert ids == want, head
        assert frames == ref[f"{prefix}frames"].tolist(), head


def _transcribe(loaded, audio: np.ndarray, decoding=None) -> str:
    import oasr

    options = oasr.TranscribeOptions(chunk_length=30.0, decoding=decoding)  # jfk.wav (11 s) in one chunk
    return oasr.transcribe(audio, loaded, options).text


def test_text_matches_nemo(case, audio):
    """NeMo's text for its greedy ids (its tokenizer's ``ids_to_text``): oasr's tokenizer gives it
    exactly; the whole ``oasr.transcribe`` call gives it up to runs of spaces, which its words
    rebuild one per boundary (SentencePiece keeps two where a lone "▁" precedes the unknown
    piece's " ⁇ ", which these random models emit)."""
    from oasr.decoding.transducer.options import TransducerDecoding

    kind, ref, loaded, _ = case
    tokenizer = loaded.tokenizer()
    heads = [("", None)] + ([("ctc_", TransducerDecoding(decoder="ctc"))] if kind == "hybrid" else [])
    for prefix, decoding in heads:
        want = str(ref[f"{prefix}text"])
        assert tokenizer.decode(ref[f"{prefix}ids"].tolist()) == want
        assert _transcribe(loaded, audio, decoding).split() == want.split()
