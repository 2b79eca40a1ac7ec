"""icefall's attention decoder (``AttentionDecoderModel``) beside a Zipformer CTC head, on random weights.

The reference is the ``zipformer`` package (icefall's own modules): its decoder's per-token
``nll`` and logits, against the shared Transformer decoder the bundle builds; and the
transcription: WeNet's CTC prefix beam n-best (``wenet_refs``) of the package's CTC
log-probabilities, each hypothesis scored by the package's decoder (sum of log p with ``<eos>``)
plus ``ctc_weight`` of its CTC score, the best one's text against ``oasr.transcribe``'s;
WeNet's attention beam search run on the package's decoder likewise. Then the conversions: kept
beside the CTC head, dropped with a warning by the transducer, heads and ``<sos/eos>`` from params.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
sf = pytest.importorskip("soundfile")

import oasr  # noqa: E402
from oasr.conversion.run import convert  # noqa: E402
from oasr.decoding.aed.options import AedDecoding  # noqa: E402
from oasr.decoding.aed.search import _padded, attention_rescoring, ctc_prefix_beam_search  # noqa: E402
from oasr.decoding.aed.verify import aed_outputs  # noqa: E402
from oasr.features import feature_extractor  # noqa: E402
from oasr.io.bundle import read_config as read_bundle_config  # noqa: E402

from icefall_folders import ATTENTION_DECODER, SMALL, export_folder, reference_model, write_tokens  # noqa: E402
from wenet_refs import wenet_attention_beam, wenet_prefix_beam  # noqa: E402

TOLERANCE = 1e-4
SECONDS = 11.0  # jfk.wav, one chunk
HYPS = [[3, 4, 5], [7], [], [9, 10, 11, 12, 13, 3, 6]]


@pytest.fixture(scope="module")
def aed(tmp_path_factory, jfk_wav):
    """(reference model, its source folder, the loaded bundle, encoder output [1, T, C], its lengths)."""
    folder = tmp_path_factory.mktemp("zipformer-aed")
    reference = reference_model(SMALL, ctc=True, transducer=False, blank_bias=1.5, extra=ATTENTION_DECODER)
    source = export_folder(folder / "src", reference)
    convert([source], folder / "bundle")
    loaded = oasr.load_pretrained(str(folder / "bundle"), task="transcribe", device="cpu", dtype="float32", cache=False)
    audio, rate = sf.read(jfk_wav, dtype="float32")
    feats = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio[: int(SECONDS * rate)]), loaded.feature_spec)
    with torch.no_grad():
        encoded, lengths = reference.forward_encoder(feats.T[None], torch.tensor([feats.shape[1]]))
    return reference, source, loaded, encoded, lengths


def test_bundle_keeps_the_decoder_and_decodes_by_aed(aed):
    _, source, loaded, _, _ = aed
    d = loaded.decoding
    assert (d.family, d.bos_id, d.eos_id, d.blank_id, d.options["decoder"]) == ("aed", 1, 1, 0, "transformer")
    assert "ctc_aed_rescoring" in loaded.capabilities
    config = loaded.model.config
    assert (config.attention_decoder_dim, config.attention_decoder_layers, config.attention_decoder_attention_dim) == (40, 2, 32)
    assert (config.attention_decoder_heads, config.attention_decoder_ff_dim) == (8, 56)
    assert not any(name.startswith("attention_decoder") for name in read_bundle_config(source.parent / "bundle").provenance.dropped)


def test_decoder_scores_match_the_package(aed):
    reference, _, loaded, encoded, lengths = aed
    n = len(HYPS)
    with torch.no_grad():
        want_nll = reference.attention_decoder.nll(encoded.expand(n, -1, -1), lengths.expand(n), HYPS)  # [N, L + 1]
        tokens = _padded([tuple(h) for h in HYPS], 1, 1, encoded.device)
        got = loaded.model.decoder_log_probs(tokens, encoded)  # [N, L + 1, V]
        want = reference.attention_decoder.decoder(tokens, torch.tensor([len(h) + 1 for h in HYPS]), encoded.expand(n, -1, -1), lengths.expand(n))
    for i, h in enumerate(HYPS):
        steps = torch.arange(len(h) + 1)
        assert (got[i, steps] - want[i, steps].log_softmax(-1)).abs().max() < TOLERANCE
        got_nll = -got[i, steps, torch.tensor(h + [1])]
        assert (got_nll - want_nll[i, : len(h) + 1]).abs().max() < TOLERANCE


def _reference_choice(reference, encoded, lengths, beam, ctc_weight):
    """The n-best (WeNet's prefix beam on the package's CTC), every hypothesis' total by the
    package's decoder, and the index it picks."""
    lp = reference.ctc_output(encoded)[0].log_softmax(-1)
    nbest = wenet_prefix_beam(lp, beam)
    hyps = [list(p) for p, _, _ in nbest]
    n = len(hyps)
    nll = reference.attention_decoder.nll(encoded.expand(n, -1, -1), lengths.expand(n), hyps)
    scores = [-float(nll[i].sum()) + ctc_weight * s for i, (_, s, _) in enumerate(nbest)]
    return hyps, scores, max(range(n), key=scores.__getitem__)


def _text(ids, tokens_file):
    pieces = dict(line.rsplit(maxsplit=1)[::-1] for line in tokens_file.read_text(encoding="utf-8").splitlines())
    specials = [p for p in pieces.values() if p.startswith("<") and p.endswith(">")]  # no text (the random CTC emits them)
    return "".join(pieces[str(i)] for i in ids if pieces[str(i)] not in specials).replace("\u2581", " ").strip()


@pytest.mark.parametrize("beam, ctc_weight", [(10, 0.0), (4, 0.5)])
def test_attention_rescoring_picks_the_packages_choice(aed, jfk_wav, beam, ctc_weight):
    reference, source, loaded, encoded, lengths = aed
    with torch.no_grad():
        hyps, scores, best = _reference_choice(reference, encoded, lengths, beam, ctc_weight)
        # oasr's search and decoder on the package's encoder output: the same n-best, the same totals
        nbest = ctc_prefix_beam_search(reference.ctc_output(encoded)[0].log_softmax(-1), 0, beam)
        chosen = attention_rescoring(loaded.model, encoded, nbest, 1, 1, ctc_weight)
    assert [list(h.tokens) for h in nbest] == hyps and chosen.index == best
    assert max(abs(a - b) / (1 + len(h)) for a, b, h in zip(chosen.scores, scores, hyps)) < TOLERANCE
    tokens = source / "data" / "lang_bpe_500" / "tokens.txt"
    assert _text(hyps[best], tokens) != _text(hyps[0], tokens), "the decoder keeps the CTC best: the test would prove nothing"
    for mode, want in (("auto", hyps[best]), ("ctc_prefix_beam_search", hyps[0])):
        options = oasr.TranscribeOptions(decoding=AedDecoding(mode=mode, beam_size=beam, ctc_weight=ctc_weight))
        assert oasr.transcribe(str(jfk_wav), loaded, options).text.strip() == _text(want, tokens)


class _PackageDecoder:
    """The package's decoder behind the interface WeNet's reference searches call."""

    def __init__(self, reference):
        self.decoder = reference.attention_decoder.decoder

    def decoder_logits(self, tokens, enc):
        n = tokens.shape[0]
        lengths = torch.full((n,), tokens.shape[1])
        return self.decoder(tokens, lengths, enc.expand(n, -1, -1), torch.full((n,), enc.shape[1]))


def test_attention_beam_search_is_wenets_on_the_package(aed, jfk_wav):
    reference, source, loaded, _, _ = aed
    audio, rate = sf.read(jfk_wav, dtype="float32")
    audio = audio[: 3 * rate]
    feats = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio), loaded.feature_spec)
    with torch.no_grad():
        encoded, _ = reference.forward_encoder(feats.T[None], torch.tensor([feats.shape[1]]))
        want = wenet_attention_beam(_PackageDecoder(reference), encoded, 1, 1, 4)
    assert want, "the random decoder emits nothing: the test would prove nothing"
    options = oasr.TranscribeOptions(decoding=AedDecoding(mode="attention", beam_size=4))
    got = oasr.transcribe(audio, loaded, options).text.strip()
    assert got == _text(want, source / "data" / "lang_bpe_500" / "tokens.txt")


def test_quantize_verify_reads_the_zipformer(aed, jfk_wav):
    _, _, loaded, _, _ = aed
    audio, rate = sf.read(jfk_wav, dtype="float32")
    encoded, logits, decoded, tokens = aed_outputs(loaded, audio[: 4 * rate])
    assert logits.shape[0] == encoded.shape[0] and tokens and decoded is not None


def test_transducer_drops_it_and_a_folder_without_it_is_ctc(tmp_path, caplog):
    hybrid = reference_model(SMALL, ctc=True, transducer=True, seed=4, extra=ATTENTION_DECODER)
    source = export_folder(tmp_path / "src", hybrid)
    convert([source], tmp_path / "rnnt", architecture="transducer")
    assert "the attention decoder rescores the CTC head's n-best only" in caplog.text
    assert read_bundle_config(tmp_path / "rnnt").decoding.family == "rnnt"
    state = {k: v for k, v in hybrid.state_dict().items() if not k.startswith(("attention_decoder.", "decoder.", "joiner."))}
    folder = tmp_path / "plain"
    write_tokens(folder / "exp")
    torch.save({"model": state}, folder / "exp" / "pretrained.pt")
    convert([folder], tmp_path / "ctc")
    config = read_bundle_config(tmp_path / "ctc")
    assert config.decoding.family == "ctc" and config.model["attention_decoder_dim"] == 0
    assert "ctc_aed_rescoring" not in config.capabilities


def test_heads_and_sos_eos_come_from_the_params(tmp_path):
    model = reference_model(SMALL, ctc=True, transducer=False, seed=5, extra={**ATTENTION_DECODER, "attention_decoder_num_heads": 2})
    folder = tmp_path / "m"
    write_tokens(folder / "exp")
    params = {"attention_decoder_num_heads": 2, "sos_id": 1, "eos_id": 2}
    torch.save({"model": model.state_dict(), **params}, folder / "exp" / "epoch-3.pt")
    convert([folder], tmp_path / "out")
    config = read_bundle_config(tmp_path / "out")
    assert config.model["attention_decoder_heads"] == 2
    assert (config.decoding.bos_id, config.decoding.eos_id) == (1, 2)
