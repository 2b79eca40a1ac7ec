"""Native bundles of small random models, built during the run: one fixture per model, named for it.

"tiny" alone named three models (Whisper tiny.en, the random Whisper of tiny_models.py, CREPE tiny):
here each name says the architecture and that the weights are random. The real weights
(tiny_en_ct2, tiny_en_bundle, base_ct2) are in conftest.py. tests/conftest.py registers this
module with ``pytest_plugins``, so every test can ask for these fixtures by name.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from tiny_models import write_openai_pt

# Wide enough that quantize has layers to quantize (every projection has at least 64 inputs).
WIDE_DIMS = dict(n_audio_state=128, n_text_state=128, n_vocab=96, n_audio_ctx=16, n_text_ctx=12)


@pytest.fixture
def random_whisper_bundle(tmp_path) -> Path:
    """A Whisper of tiny_models.TINY_DIMS converted from ``tiny.pt``: a fresh copy per test, which may edit it."""
    from oasr.conversion.run import convert

    out = tmp_path / "bundle"
    convert([write_openai_pt(tmp_path / "tiny.pt")], out)
    return out


@pytest.fixture(scope="module")
def random_whisper_wide_bundle(tmp_path_factory) -> Path:
    """A Whisper of WIDE_DIMS (fp32), one per module: tests copy it before they change it."""
    from oasr.conversion.run import convert

    folder = tmp_path_factory.mktemp("wide-whisper")
    out = folder / "fp32"
    log = logging.getLogger("oasr")
    # The log off while it converts: its missing-tokenizer warning would go to a handler an earlier
    # in-process CLI run left on its (closed) captured stderr.
    was, log.disabled = log.disabled, True
    try:
        convert([write_openai_pt(folder / "tiny.pt", **WIDE_DIMS)], out)
    finally:
        log.disabled = was
    return out


# --- FastConformer with a transducer and a CTC head ----------------------------------------------

BLANK_BIAS = 4.0  # labels on some frames, blanks on most
PIECES = ["<unk>", "▁the", "▁cat", "▁sat", "▁on", "s", "ed", "▁a", "▁dog", "o"]


@pytest.fixture(scope="module")
def random_hybrid_fastconformer_bundle(tmp_path_factory):
    """A native FastConformer bundle with a transducer and a CTC head (random weights)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from oasr import __version__
    from oasr.io.bundle import BundleConfig, write_bundle
    from oasr.models.fastconformer import FastConformer, FastConformerConfig
    from oasr.models.fastconformer.specs import fastconformer_specs
    from oasr.specs import Provenance

    root = tmp_path_factory.mktemp("hybrid")
    tok = Tokenizer(models.Unigram([(p, -1.0 - 0.1 * i) for i, p in enumerate(PIECES)], unk_id=0))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tok.save(str(root / "tokenizer.json"))
    config = FastConformerConfig(
        n_mels=80, d_model=32, n_layers=1, n_heads=4, ff_hidden=64, vocab_size=len(PIECES), head="rnnt", hybrid_ctc=True,
        subsampling_factor=4, subsampling_conv_channels=8, pred_hidden=16, pred_rnn_layers=1, joint_hidden=16,
        att_context_size=(20, 2),
    )
    model = FastConformer(config).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # wider than torch's init, so the labels follow the audio
        for name, p in model.named_parameters():
            if p.dim() > 1 and "pos_bias" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 1.5 / p[0].numel() ** 0.5)
        model.joint.joint_net[2].bias[config.blank_id] += BLANK_BIAS
    files = {"tokenizer.json": root / "tokenizer.json"}
    tokenizer, features, decoding = fastconformer_specs(config, files)
    bundle = root / "bundle"
    write_bundle(
        bundle,
        BundleConfig(
            architecture="fastconformer", model=config.to_dict(), dtype="float32", tokenizer=tokenizer, features=features,
            decoding=decoding, provenance=Provenance(source_format="test", oasr_version=__version__),
            capabilities=tuple(sorted(FastConformer.capabilities)),
        ),
        model.state_dict(),
        files,
    )
    return bundle
