"""WeNet U2 / U2++ on random weights against ESPnet's networks (WeNet's names mapped onto them),
with WeNet's own arithmetic where it differs (tests/support/wenet_refs.py lists each part).

Each case converts a WeNet experiment folder, loads the bundle and compares: the encoder output,
the CTC log-probabilities and the decoder logits within 1e-4; the CTC greedy, prefix-beam n-best
(ids and peak times), attention-rescoring choice and attention-beam ids exactly.
"""

from __future__ import annotations

import pytest
import torch

import oasr
from oasr.decoding.aed.search import attention_beam_search, attention_rescoring, ctc_prefix_beam_search
from oasr.decoding.ctc.search import greedy_ctc
from oasr.features.wenet_fbank import wenet_fbank
from tests.support import wenet_refs as wr

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = {
    "u2-conformer": dict(decoder="transformer"),
    "u2pp-conformer": dict(decoder="bitransformer"),
    "u2pp-causal-layernorm-chunk": dict(decoder="bitransformer", causal=True, norm="layer_norm", static_chunk=4),
    "u2-conformer-conv2d6": dict(decoder="transformer", input_layer="conv2d6"),
    "u2-conformer-conv2d8-dynamic": dict(decoder="transformer", input_layer="conv2d8", static_chunk=2, dynamic=True),
    "u2-conformer-linear": dict(decoder="transformer", input_layer="linear"),
    "transformer": dict(encoder="transformer", decoder="transformer"),
    "transformer-u2pp": dict(encoder="transformer", decoder="bitransformer"),
}


def _audio(seconds=1.2, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(16000 * seconds)) / 16000
    return (0.3 * torch.sin(2 * torch.pi * 220 * t) + 0.05 * torch.randn(len(t), generator=g)).float()


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    conf = wr.train_yaml(**CASES[request.param])
    tmp = tmp_path_factory.mktemp(request.param)
    ref = wr.write_folder(tmp / "exp", conf)
    oasr.convert([tmp / "exp"], tmp / "bundle")
    loaded = oasr.load_pretrained(str(tmp / "bundle"), device="cpu", dtype="float32")
    return request.param, ref, loaded


def test_networks_match_espnet(case):
    name, ref, loaded = case
    audio = _audio()
    feats = wenet_fbank(audio, loaded.feature_spec)  # [F, T]
    with torch.inference_mode():
        want = ref.encode(feats.T[None])
        got, lengths = loaded.model.encode(feats[None], torch.tensor([feats.shape[1]]))
        assert got.shape == want.shape and int(lengths[0]) == want.shape[1]
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(loaded.model.ctc_log_probs_of(got), ref.ctc_log_probs(want), atol=1e-4, rtol=1e-4)
        tokens = torch.tensor([[11, 2, 5, 7, 3], [11, 4, 4, 9, 11]])
        torch.testing.assert_close(loaded.model.decoder_log_probs(tokens, got), ref.decoder_logits(tokens, want).log_softmax(-1), atol=1e-4, rtol=1e-4)
        if "u2pp" in name:
            torch.testing.assert_close(
                loaded.model.decoder_log_probs(tokens, got, reverse=True), ref.decoder_logits(tokens, want, reverse=True).log_softmax(-1), atol=1e-4, rtol=1e-4
            )


def test_searches_match_wenet(case):
    name, ref, loaded = case
    with torch.inference_mode():
        for seed in range(2):
            feats = wenet_fbank(_audio(1.6 - 0.6 * seed, seed), loaded.feature_spec)
            want_enc = ref.encode(feats.T[None])
            enc, _ = loaded.model.encode(feats[None], torch.tensor([feats.shape[1]]))
            lp = loaded.model.ctc_log_probs_of(enc)[0]
            assert [t.id for t in greedy_ctc(lp, 0)] == wr.wenet_greedy(ref.ctc_log_probs(want_enc)[0])
            want = wr.wenet_prefix_beam(ref.ctc_log_probs(want_enc)[0], 4)
            nbest = ctc_prefix_beam_search(lp, 0, 4)
            assert [(h.tokens, list(h.times)) for h in nbest] == [(p, t) for p, _, t in want]
            for ctc_weight, reverse_weight in ((0.0, 0.0), (0.5, 0.3)):
                if reverse_weight and "u2pp" not in name:
                    continue
                chosen = attention_rescoring(loaded.model, enc, nbest, 11, 11, ctc_weight, reverse_weight)
                index, totals = wr.wenet_rescoring(ref, want_enc, want, 11, 11, ctc_weight, reverse_weight)
                assert chosen.index == index
                assert chosen.scores == pytest.approx(totals, abs=1e-4)
            if seed == 1:  # 10 frames: random weights seldom emit eos, so the beam runs to the last frame
                assert attention_beam_search(loaded.model, enc, 11, 11, 3) == wr.wenet_attention_beam(ref, want_enc, 11, 11, 3)
