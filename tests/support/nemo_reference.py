"""NeMo's own outputs for tiny random FastConformer models: run under the NeMo venv, not oasr's.

``.venv-nemo/bin/python tests/support/nemo_reference.py AUDIO OUT`` builds each model kind with NeMo's
classes (``EncDecCTCModelBPE``, a character ``EncDecCTCModel``, ``EncDecRNNTBPEModel``, the same
with a TDT loss and decoding, ``EncDecHybridRNNTCTCBPEModel``) from the toy configs in
``nemo_fixtures`` (NeMo's schema), draws seeded random weights, writes ``OUT/<kind>.nemo`` with
``save_to`` and ``OUT/<kind>.npz``: NeMo's features, encoder output and greedy token ids for
AUDIO (the hybrid's CTC head too), through NeMo's own decoding classes. oasr is not importable
here; the test (``test_nemo_toolkit_parity.py``) converts the archives and compares.

Weights are drawn wider than NeMo's init and the blank is biased, so the greedy outputs mix
blanks with several labels: all-blank output would make the comparison unable to fail.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import soundfile
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nemo_fixtures as nf  # noqa: E402 - the toy configs and the SentencePiece trainer, shared with the format tests

KINDS = ("ctc", "char_ctc", "rnnt", "tdt", "hybrid")
# Per kind: encoder variations beyond the fixtures' (dw_striding by 8, batch norm, full context),
# so the converter's reading of each is checked against NeMo's modules.
ENCODER_VARIANTS = {
    "char_ctc": {"subsampling": "striding", "subsampling_factor": 4, "conv_norm_type": "layer_norm"},
    "rnnt": {"subsampling_factor": 4},
    "hybrid": {"att_context_size": [24, 8]},
}
# Per kind: the weights' seed and the blank's logit bias, chosen so that each greedy output mixes
# blanks with several labels (and the transducers' label loops with several labels per frame).
SEEDS = {"ctc": 0, "char_ctc": 1, "rnnt": 2, "tdt": 3, "hybrid": 6}
BLANK_BIAS = {"ctc": 1.0, "char_ctc": 1.0, "rnnt": 4.0, "tdt": 1.0, "hybrid": 3.0}
MAX_SYMBOLS = 5


def _model_class(kind: str):
    from nemo.collections.asr.models import EncDecCTCModel, EncDecCTCModelBPE, EncDecHybridRNNTCTCBPEModel, EncDecRNNTBPEModel

    return {"ctc": EncDecCTCModelBPE, "char_ctc": EncDecCTCModel, "rnnt": EncDecRNNTBPEModel,
            "tdt": EncDecRNNTBPEModel, "hybrid": EncDecHybridRNNTCTCBPEModel}[kind]


def _config(kind: str, tokenizer_dir: Path, pieces: list[str]):
    from omegaconf import OmegaConf

    vocabulary = nf.CHAR_LABELS if kind == "char_ctc" else pieces
    cfg = nf.resolved(nf.nemo_config(kind, vocabulary, None))  # ${model.sample_rate} filled in
    cfg["encoder"].update(ENCODER_VARIANTS.get(kind, {}))
    if "tokenizer" in cfg:  # NeMo reads tokenizer.model, vocab.txt and tokenizer.vocab from dir
        cfg["tokenizer"] = {"dir": str(tokenizer_dir), "type": "bpe"}
    if "decoding" in cfg:
        cfg["decoding"]["greedy"]["max_symbols"] = MAX_SYMBOLS
    return OmegaConf.create(cfg)


@torch.no_grad()
def _randomize(model, kind: str, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        noise = torch.randn(p.shape, generator=g)
        if "norm" in name and p.dim() == 1:
            p.copy_(1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
        elif p.dim() == 1 or "pos_bias" in name:
            p.copy_(0.1 * noise)
        elif "embed" in name:
            p.copy_(noise)
        else:
            p.copy_(noise * 1.5 / p[0].numel() ** 0.5)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):  # inference uses the running statistics
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    if kind.endswith("ctc"):
        blank = model.decoder.num_classes_with_blank - 1
        model.decoder.decoder_layers[0].bias[blank] += BLANK_BIAS[kind]
        return
    # The joint: both inputs strong (the prediction network's especially, so an emitted label
    # changes what comes next), its output layer damped so the blank bias sets the blank rate.
    model.decoder.prediction["dec_rnn"].lstm.weight_ih_l0.mul_(3)
    embed = model.decoder.prediction["embed"]
    embed.weight[embed.padding_idx].zero_()  # blank_as_pad: the blank (start) row is zero, as trained
    model.joint.enc.weight.mul_(4)
    model.joint.pred.weight.mul_(16)
    out = model.joint.joint_net[2]
    out.weight.mul_(0.2)
    out.bias.mul_(0.2)
    blank = model.joint.num_classes_with_blank - 1 - model.joint.num_extra_outputs
    out.bias[blank] += BLANK_BIAS[kind]
    if kind == "tdt":  # duration logits that vary, favouring none and short advances
        out.weight[blank + 1 :] *= 0.2
        out.bias[blank + 1 :] = torch.tensor([1.5, 1.0, 0.5, 0.0, 0.0])
    if kind == "hybrid":
        model.ctc_decoder.decoder_layers[0].bias[blank] += 1.0


def _ints(values) -> np.ndarray:
    return np.array([int(i) for i in torch.as_tensor(values).tolist()], dtype=np.int64)


def _ctc(decoding, log_probs, lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NeMo's greedy CTC ids (its search, then its own folding: repeats merged, blanks dropped),
    each token's first frame, and the text. ``y_sequence`` holds the per-frame labels; the folded
    ids and the frames between token starts are kept by ``decode_hypothesis`` only when it
    computes timestamps."""
    (hyp,) = decoding.ctc_decoder_predictions_tensor(log_probs, lengths, return_hypotheses=True)
    (frames,) = decoding.decoding(decoder_output=log_probs.clone(), decoder_lengths=lengths)  # a plain copy: NeMo types the decoder output
    decoding.compute_timestamps = True
    try:
        (folded,) = decoding.decode_hypothesis(frames, fold_consecutive=True)
    finally:
        decoding.compute_timestamps = False
    ids, gaps = folded.text[0], folded.text[1]
    return _ints(ids), np.cumsum(_ints(gaps)), np.array(hyp.text)


@torch.no_grad()
def reference(kind: str, model, audio: np.ndarray) -> dict[str, np.ndarray]:
    """NeMo's features, encoder output and greedy decoding of ``audio`` (one utterance), each cut
    to its valid length (NeMo pads features and encoder frames past it)."""
    signal = torch.from_numpy(audio)[None]
    features, feat_len = model.preprocessor(input_signal=signal, length=torch.tensor([signal.shape[1]]))
    encoded, enc_len = model.encoder(audio_signal=features, length=feat_len)  # [1, C, T]
    frames = int(enc_len[0])
    out = {"features": features[0, :, : int(feat_len[0])].numpy(), "encoded": encoded[0, :, :frames].T.numpy()}
    if kind.endswith("ctc"):
        log_probs = model.decoder(encoder_output=encoded)
        out["log_probs"] = log_probs[0, :frames].numpy()
        out["ids"], out["frames"], out["text"] = _ctc(model.decoding, log_probs, enc_len)
        return out
    (hyp,) = model.decoding.rnnt_decoder_predictions_tensor(encoded, enc_len, return_hypotheses=True)
    out.update(ids=_ints(hyp.y_sequence), frames=_ints(hyp.timestamp), text=np.array(hyp.text))  # timestamp: each token's frame
    if kind == "hybrid":
        log_probs = model.ctc_decoder(encoder_output=encoded)
        out["ctc_log_probs"] = log_probs[0, :frames].numpy()
        out["ctc_ids"], out["ctc_frames"], out["ctc_text"] = _ctc(model.ctc_decoding, log_probs, enc_len)
    return out


def main(audio_path: str, out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    audio, rate = soundfile.read(audio_path, dtype="float32")
    assert rate == 16000 and audio.ndim == 1, (rate, audio.shape)
    tokenizer_dir = folder / "tokenizer"
    model_file = nf.train_sentencepiece(tokenizer_dir)  # writes tokenizer.model and tokenizer.vocab
    pieces = nf.pieces(model_file)
    (tokenizer_dir / "vocab.txt").write_text("".join(f"{p}\n" for p in pieces))
    summary = {}
    for kind in KINDS:
        seed = SEEDS[kind]
        torch.manual_seed(seed)
        model = _model_class(kind)(cfg=_config(kind, tokenizer_dir, pieces)).eval()
        _randomize(model, kind, seed)
        model.save_to(str(folder / f"{kind}.nemo"))
        result = reference(kind, model, audio)
        np.savez(folder / f"{kind}.npz", **result)
        summary[kind] = {"ids": len(result["ids"]), "distinct": len(set(result["ids"].tolist())), "text": str(result["text"])}
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(2)
    main(*sys.argv[1:])
