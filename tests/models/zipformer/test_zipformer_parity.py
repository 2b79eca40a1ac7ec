"""Zipformer CTC and stateless transducers against the ``zipformer`` package (icefall's own modules), on random weights.

No trained icefall weights are reachable here, so parity runs on random ones, for two shapes:
a small one and icefall's default "medium" layout. The reference is zipformer 0.1.3 from PyPI
(``--no-deps``, with stand-ins for its training imports: tests/support/zipformer_reference.py);
its modules, its ``greedy_search`` and ``modified_beam_search`` decode the same features.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
sf = pytest.importorskip("soundfile")

import oasr  # noqa: E402
from oasr.conversion.run import convert  # noqa: E402
from oasr.decoding.transducer.modified_beam import modified_beam_search  # noqa: E402
from oasr.decoding.transducer.search import greedy_transducer  # noqa: E402

from icefall_folders import MEDIUM, SMALL, export_folder, reference_model  # noqa: E402
from zipformer_reference import zipformer_package  # noqa: E402

TOLERANCE = 1e-4
# (shape, seconds of jfk.wav it runs on, spread of the random weights, the heads' blank bias so
# that they emit labels on some frames, blanks on others): the medium stack at the
# small one's spread is chaotic (float64 runs of one model differ by 1e-10 after its 1/8-rate
# stack, float32 runs by 0.2 at the end), so its weights are spread less.
SHAPES = {"small": (SMALL, 11.0, 0.05, 1.5), "medium": (MEDIUM, 3.0, 0.02, 0.0)}


def _features(loaded, jfk_wav, seconds):
    audio, rate = sf.read(jfk_wav, dtype="float32")
    audio = torch.from_numpy(audio[: int(seconds * rate)])
    from oasr.features import feature_extractor

    return audio, feature_extractor(loaded.feature_spec)(audio, loaded.feature_spec)  # [80, T]


def _reference_text(ids, tokenizer_file):
    pieces = dict(line.rsplit(maxsplit=1)[::-1] for line in tokenizer_file.read_text(encoding="utf-8").splitlines())
    return "".join(pieces[str(i)] for i in ids).replace("\u2581", " ").strip()


@pytest.fixture(scope="module", params=sorted(SHAPES))
def hybrid(request, tmp_path_factory):
    """(shape name, reference model, its CTC bundle, its transducer bundle)."""
    shape, _, spread, bias = SHAPES[request.param]
    folder = tmp_path_factory.mktemp(f"zipformer-{request.param}")
    reference = reference_model(shape, ctc=True, transducer=True, blank_bias=bias, spread=spread)
    source = export_folder(folder / "src", reference)
    convert([source], folder / "ctc", architecture="icefall-ctc")
    convert([source], folder / "rnnt", architecture="transducer")
    return request.param, reference, source, folder / "ctc", folder / "rnnt"


def _load(bundle):
    return oasr.load_pretrained(str(bundle), task="transcribe", device="cpu", dtype="float32", cache=False)


def test_encoder_and_ctc_match_the_package(hybrid, jfk_wav):
    name, reference, source, ctc_bundle, _ = hybrid
    loaded = _load(ctc_bundle)
    _, feats = _features(loaded, jfk_wav, SHAPES[name][1])
    lengths = torch.tensor([feats.shape[1]])
    with torch.no_grad():
        want, want_lengths = reference.forward_encoder(feats.T[None], lengths)
        got, got_lengths = loaded.model.encode(feats[None], lengths)
        assert torch.equal(got_lengths, want_lengths)
        assert (got - want).abs().max() < TOLERANCE
        log_probs, _ = loaded.model.ctc_log_probs(feats[None], lengths)
        assert (log_probs - reference.ctc_output(want)).abs().max() < TOLERANCE
    # the whole transcription: greedy CTC of the package's log-probabilities, its tokens' text
    best = reference.ctc_output(want)[0].argmax(-1).tolist()
    ids = [t for i, t in enumerate(best) if t != 0 and (i == 0 or t != best[i - 1])]
    assert ids, "the random CTC head emits nothing: the test would prove nothing"
    if name == "small":  # 11 s, one chunk
        text = oasr.transcribe(str(jfk_wav), loaded, oasr.TranscribeOptions()).text.strip()
        assert text == _reference_text(ids, source / "data" / "lang_bpe_500" / "tokens.txt")


@pytest.fixture(scope="module")
def transducer(hybrid, jfk_wav):
    name, reference, source, _, rnnt_bundle = hybrid
    loaded = _load(rnnt_bundle)
    _, feats = _features(loaded, jfk_wav, SHAPES[name][1])
    lengths = torch.tensor([feats.shape[1]])
    with torch.no_grad():
        encoded, enc_lengths = reference.forward_encoder(feats.T[None], lengths)
    return name, reference, source, loaded, encoded, enc_lengths


def test_joiner_logits_match_the_package(transducer):
    _, reference, _, loaded, encoded, _ = transducer
    model = loaded.model
    context = torch.tensor([[-1, 0], [0, 5], [7, 3]])
    with torch.no_grad():
        want_dec = reference.joiner.decoder_proj(reference.decoder(context, need_pad=False))[:, 0]
        want = reference.joiner(reference.joiner.encoder_proj(encoded[0, :3]), want_dec, project_input=False)
        got = model.joint_logits(model.project_encoder(encoded[0, :3]), model.decode_context(context))
    assert (got - want).abs().max() < TOLERANCE


@pytest.mark.parametrize("max_symbols", [1, 3])
def test_greedy_search_is_the_packages(transducer, max_symbols):
    _, reference, source, loaded, encoded, lengths = transducer
    _, search = zipformer_package()
    with torch.no_grad():
        want = search.greedy_search(reference, encoded, lengths, max_sym_per_frame=max_symbols)
    want = want[0] if max_symbols == 1 else want
    got = greedy_transducer(loaded.model, encoded, lengths, blank_id=0, max_symbols=max_symbols)[0]
    assert want, "the random transducer emits nothing: the test would prove nothing"
    assert [t.id for t in got] == want


@pytest.mark.parametrize("beam", [2, 4])
def test_modified_beam_search_is_the_packages(transducer, beam):
    _, reference, source, loaded, encoded, lengths = transducer
    _, search = zipformer_package()
    with torch.no_grad():  # as icefall decodes
        want = search.modified_beam_search(reference, encoded, lengths, beam=beam, return_timestamps=True)
    got = modified_beam_search(loaded.model, encoded, lengths, blank_id=0, beam_size=beam, context_size=2)[0]
    assert want.hyps[0], "the random transducer emits nothing: the test would prove nothing"
    assert [t.id for t in got.tokens] == want.hyps[0]
    assert [t.frame for t in got.tokens] == want.timestamps[0]


@pytest.mark.parametrize("hybrid", ["small"], indirect=True)  # the whole clip: the small shape only
def test_transcribe_text_is_the_packages_search(transducer, jfk_wav):
    name, reference, source, loaded, encoded, lengths = transducer
    _, search = zipformer_package()
    tokens = source / "data" / "lang_bpe_500" / "tokens.txt"
    for beam in (1, 4):
        with torch.no_grad():
            if beam == 1:
                ids = search.greedy_search(reference, encoded, lengths)[0]
            else:
                ids = search.modified_beam_search(reference, encoded, lengths, beam=beam)[0]
        options = oasr.TranscribeOptions(beam_size=beam, word_timestamps=True)
        result = oasr.transcribe(str(jfk_wav), loaded, options)
        assert result.text.strip() == _reference_text(ids, tokens)
        words = [w for s in result.segments for w in s.words]
        assert words and all(0 <= w.start <= w.end <= 11.1 for w in words)
