"""Paraformer against FunASR 1.4.16 on tiny random weights: front end, encoder, CIF, decoder,
token ids, text and timestamps, for a Chinese-character and an English-BPE vocabulary."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest
import soundfile as sf
import torch

import funasr_reference as ref

TOL = 1e-4
CASES = [
    ("zh", "CifPredictorV2", 0),
    ("en", "CifPredictorV2", 4),
    ("zh", "CifPredictor", 0),  # its BPE piece "wor@@" joins an "a" fourteen characters on
]


@pytest.fixture(scope="module")
def audio(jfk_wav_module):
    samples, _ = sf.read(jfk_wav_module, dtype="float32")
    return samples[: 16000 * 3]


@pytest.fixture(scope="module")
def jfk_wav_module():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "data" / "asr" / "jfk.wav"


@pytest.mark.parametrize("kind,predictor,seed", CASES)
def test_matches_funasr(tmp_path, audio, kind, predictor, seed):
    import oasr
    from oasr.conversion.run import convert
    from oasr.features import feature_extractor

    ref.funasr()
    folder = ref.write_folder(tmp_path / "funasr", ref.config(predictor=predictor), kind, seed)
    want = ref.run_funasr(folder, audio)
    tokens = [ref.vocabulary(kind)[i] for i in want["token_ids"]]
    assert len(set(tokens)) >= 3  # a varied output, so the comparison can fail

    convert([folder], tmp_path / "bundle")
    loaded = oasr.load_pretrained(str(tmp_path / "bundle"), task="transcribe", device="cpu", dtype="float32", cache=False)
    model, spec = loaded.model, loaded.feature_spec
    feats = feature_extractor(spec)(torch.from_numpy(audio), spec)
    with torch.no_grad():
        assert torch.allclose(model.normalise(feats[None])[0], want["features"], atol=TOL, rtol=0)  # LFR + CMVN vs WavFrontend
        out = model.recognise(feats[None], torch.tensor([feats.shape[1]]))
    assert torch.allclose(out.encoded[0], want["encoded"], atol=TOL, rtol=0)
    assert torch.allclose(out.cif.alphas[0], want["alphas"], atol=TOL, rtol=0)
    assert torch.allclose(out.cif.fires[0], want["fires"], atol=TOL, rtol=0)
    assert int(out.token_lengths[0]) == want["count"]
    assert torch.allclose(out.log_probs[0], want["log_probs"], atol=TOL, rtol=0)

    t = oasr.transcribe(audio, loaded, oasr.TranscribeOptions(word_timestamps=True))
    from oasr.decoding.cif.search import best_tokens

    decoded = [c.id for c in best_tokens(out.log_probs[0], int(out.token_lengths[0]), (0, 1, 2))]
    assert decoded == want["token_ids"]
    # The segments hold each word's ids in word order. FunASR joins a piece ending in @@ with the
    # next alphabetic piece, CJK characters between them or not ("wor@@", "不", "a" -> "不", "wora"),
    # and a piece ending in @@ with none after it makes no word: the ids are FunASR's, less those.
    kept = [i for s in t.segments for i in s.tokens]
    assert not collections.Counter(kept) - collections.Counter(want["token_ids"])
    assert len(want["token_ids"]) - len(kept) <= sum(tokens[k].endswith("@@") for k in range(len(tokens)))
    assert t.text.strip() == want["text"]
    words = [w for s in t.segments for w in s.words]
    end = round(len(audio) / 16)  # oasr keeps times inside the recording; FunASR's last end may pass it
    assert [[round(w.start * 1000), round(w.end * 1000)] for w in words] == [[max(0, min(a, end)), min(b, end)] for a, b in want["timestamp"]]


def test_am_mvn_as_funasr_reads_it(tmp_path):
    ref.funasr()
    from funasr.frontends.wav_frontend import load_cmvn
    from oasr_converters.funasr import read_cmvn

    shift, scale = ref.write_cmvn(tmp_path / "am.mvn", 560, np.random.default_rng(3))
    ours = torch.tensor(read_cmvn(tmp_path / "am.mvn"), dtype=torch.float32)
    assert torch.equal(ours, load_cmvn(str(tmp_path / "am.mvn")))


@pytest.mark.parametrize("frames", [1, 2, 5, 6, 7, 11, 12, 13, 50])
@pytest.mark.parametrize("m,n", [(7, 6), (5, 3), (1, 1)])
def test_lfr_as_funasr_stacks(frames, m, n):
    ref.funasr()
    from funasr.frontends.wav_frontend import apply_lfr as funasr_lfr
    from oasr.features.funasr_fbank import apply_lfr

    x = torch.randn(frames, 4)
    assert torch.equal(apply_lfr(x, m, n), funasr_lfr(x.clone(), m, n))


def test_text_rules_as_funasr(tmp_path):
    ref.funasr()
    from funasr.utils.postprocess_utils import sentence_postprocess
    from oasr.tokenizers.funasr_char import join

    rng = np.random.default_rng(0)
    pool = ref.CHINESE[:6] + ref.ENGLISH_PIECES + ["<unk>", "</s>"]
    for n in range(300):
        tokens = list(rng.choice(pool, size=int(rng.integers(1, 9))))
        if n % 3 == 0:
            tokens = [t for t in tokens if t not in ref.CHINESE] or ["a"]
        times = [[10 * i, 10 * i + 10] for i in range(len(tokens))]
        words, _, spans = join(tokens, times)
        try:
            text, ts, _ = sentence_postprocess(list(tokens), [list(t) for t in times])
        except IndexError:  # FunASR's own failure on some mixtures
            continue
        plain, _ = sentence_postprocess(list(tokens))
        assert "".join(join(tokens)[0]).strip() == plain
        assert [list(s) for s in spans] == ts


def test_funasr_folder_claimed_and_hostile_pickle_refused(tmp_path, audio):
    from oasr.conversion.detect import pick_converter
    from oasr.conversion.run import convert
    from oasr.errors import OasrError

    folder = ref.write_folder(tmp_path / "f", ref.config(), "zh")
    converter, _ = pick_converter(folder)
    assert converter.name == "funasr-paraformer"  # not openai-whisper's one-.pt claim

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (folder / "model.pt").write_bytes(pickle.dumps({"state_dict": Evil()}))
    with pytest.raises(OasrError):
        convert([folder], tmp_path / "out")
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_other_variants_refused_by_name(tmp_path):
    import yaml
    from oasr.conversion.run import convert
    from oasr.errors import OasrError

    folder = ref.write_folder(tmp_path / "f", ref.config(), "zh")
    conf = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    conf["model"] = "SeacoParaformer"
    (folder / "config.yaml").write_text(yaml.safe_dump(conf, allow_unicode=True), encoding="utf-8")
    with pytest.raises(OasrError, match="SeacoParaformer"):
        convert([folder], tmp_path / "out")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_runs_in_a_lower_precision_asked_for(tmp_path, audio, dtype):
    """``--dtype bfloat16`` / ``float16``: the predictor's layers take the encoder's output in
    their own dtype (they raised a dtype mismatch), and the CIF weights stay close to float32's."""
    import oasr
    from oasr.conversion.run import convert
    from oasr.features import feature_extractor

    folder = ref.write_folder(tmp_path / "funasr", ref.config(), "zh", 0)
    convert([folder], tmp_path / "bundle")
    outs = {}
    for asked in ("float32", dtype):
        loaded = oasr.load_pretrained(str(tmp_path / "bundle"), task="transcribe", device="cpu", dtype=asked, cache=False)
        spec = loaded.feature_spec
        feats = feature_extractor(spec)(torch.from_numpy(audio), spec)
        with torch.no_grad():
            outs[asked] = loaded.model.recognise(feats[None].to(getattr(torch, asked)), torch.tensor([feats.shape[1]]))
        assert oasr.transcribe(audio, loaded).text.strip()
    low, full = outs[dtype].cif.alphas, outs["float32"].cif.alphas
    assert low.dtype == torch.float32 and torch.allclose(low, full, atol=0.05, rtol=0)
