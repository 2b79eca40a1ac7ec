"""Random-weight icefall models, from the ``zipformer`` package, written as icefall's scripts lay them out.

``export.py`` writes ``exp/pretrained.pt`` (``{"model": state_dict}``) beside a recipe's
``data/lang_bpe_500/`` (``tokens.txt``, ``bpe.model``); ``train.py`` writes ``exp/epoch-N.pt``
(model, optimizer, scheduler, sampler, grad scaler, and the params spread over the top level,
paths as ``PosixPath``). Shapes: ``SMALL`` (two stacks) and ``MEDIUM`` (icefall's default layout).
"""

from __future__ import annotations

from pathlib import Path, PosixPath

import torch

from zipformer_reference import zipformer_package

SMALL = dict(
    num_encoder_layers="1,2", downsampling_factor="1,2", encoder_dim="32,48", encoder_unmasked_dim="32,32",
    query_head_dim="8", pos_head_dim="4", value_head_dim="6", num_heads="2,4", feedforward_dim="64,96",
    cnn_module_kernel="7,5", pos_dim=16, decoder_dim=16, joiner_dim=24,
)
# icefall's zipformer/train.py defaults (the "medium" model)
MEDIUM = dict(
    num_encoder_layers="2,2,3,4,3,2", downsampling_factor="1,2,4,8,4,2", encoder_dim="192,256,384,512,384,256",
    encoder_unmasked_dim="192,192,256,256,256,192", query_head_dim="32", pos_head_dim="4", value_head_dim="12",
    num_heads="4,4,4,8,4,4", feedforward_dim="512,768,1024,1536,1024,768", cnn_module_kernel="31,31,15,15,15,31",
    pos_dim=48, decoder_dim=512, joiner_dim=512,
)
# a small attention decoder (icefall's AttentionDecoderModel, its default 8 heads: an export names none), its widths apart from the encoder's
ATTENTION_DECODER = dict(
    use_attention_decoder=True, attention_decoder_dim=40, attention_decoder_num_layers=2, attention_decoder_attention_dim=32,
    attention_decoder_num_heads=8, attention_decoder_feedforward_dim=56, sos_id=1, eos_id=1,
)
PIECES = ["<blk>", "<sos/eos>", "<unk>", "▁THE", "▁CAT", "▁SAT", "S", "ED", "▁A", "▁DOG", "O", "▁ON", "▁AND", "▁SO", "▁MY",
          "▁FELLOW", "▁AMERICANS", "▁ASK", "▁NOT", "▁WHAT"]


def reference_model(
    shape: dict, *, ctc: bool, transducer: bool, vocab: int = len(PIECES), seed: int = 0, blank_bias: float = 0.0, spread: float = 0.05,
    extra: dict | None = None,
):
    """The package's AsrModel with random weights (spread wider than its init, so the heads
    disagree across labels), in eval mode; ``blank_bias`` pushes the heads towards the blank;
    ``extra``: more of its arguments (``ATTENTION_DECODER``)."""
    model_module, _ = zipformer_package()
    torch.manual_seed(seed)
    model = model_module.AsrModel(
        **shape, chunk_size="-1", left_context_frames="-1", vocab_size=vocab, use_ctc=ctc, use_transducer=transducer,
        context_size=2, **(extra or {}),
    ).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * spread)
        if ctc:
            model.ctc_output[1].bias[0] += blank_bias
        if transducer:
            model.joiner.output_linear.bias[0] += blank_bias
    return model


def write_tokens(folder: Path, vocab: int = len(PIECES)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pieces = PIECES + [f"▁W{i}" for i in range(len(PIECES), vocab)]
    (folder / "tokens.txt").write_text("".join(f"{p} {i}\n" for i, p in enumerate(pieces[:vocab])), encoding="utf-8")
    return folder / "tokens.txt"


def export_folder(root: Path, model) -> Path:
    """``export.py``'s layout: exp/pretrained.pt, data/lang_bpe_500/tokens.txt."""
    (root / "exp").mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict()}, root / "exp" / "pretrained.pt")
    write_tokens(root / "data" / "lang_bpe_500", model.vocab_size)
    return root


def training_checkpoint(path: Path, model, epoch: int = 3) -> Path:
    """``save_checkpoint``'s file: states beside the model, the params at the top level."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.zero_grad()
    sum(p.sum() for p in model.parameters()).backward()
    optimizer.step()
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": {"base_lrs": [0.045], "last_epoch": epoch},
        "grad_scaler": None,
        "sampler": {"epoch": epoch, "world_size": 1, "diagnostics": {"num_kept_batches": 10}},
        "exp_dir": PosixPath("zipformer/exp"), "epoch": epoch, "feature_dim": 80,
        "num_heads": "2,4" if len(model.encoder.encoder_dim) == 2 else "4,4,4,8,4,4", "best_valid_loss": 1.5,
    }
    torch.save(checkpoint, path)
    return path
