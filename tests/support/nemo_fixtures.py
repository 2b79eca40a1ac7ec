"""Tiny NeMo checkpoints in every format, written the way NeMo writes them, without NeMo.

NeMo's toolkit (``nemo_toolkit[asr]`` 3.0.0, about 2.3 GB of dependencies) is not installed for
the tests: the formats are reproduced from its code instead.

- ``.nemo``: ``SaveRestoreConnector.save_to`` writes ``model_config.yaml`` (the model config,
  artifact entries rewritten to ``nemo:<32 hex>_<name>``), ``model_weights.ckpt``
  (``torch.save(model.state_dict())``) and each artifact copied as ``<32 hex>_<name>`` into a
  folder, then ``tarfile.open(path, "w:")`` + ``tar.add(folder, arcname=".")`` (NeMo before 1.7:
  ``"w:gz"``), so members read ``./model_config.yaml``.
- Lightning ``.ckpt``: ``torch.save`` of ``state_dict``, ``hyper_parameters = {"cfg": DictConfig}``
  (the model section of the whole training config, so it keeps its ``_parent`` and
  ``${model.sample_rate}`` references), optimiser and loop states.
- distributed: ``torch.distributed.checkpoint.save({"state_dict": ..., "optimizer_0": ...})``
  and ``meta.pt`` beside it, as Lightning's ``ModelParallelStrategy.save_checkpoint`` does.

The configs are NeMo's schema (``EncDecCTCModelBPE``, ``EncDecRNNTBPEModel`` with a TDT loss,
``EncDecHybridRNNTCTCBPEModel``, a character ``EncDecCTCModel``) at toy sizes; the weights are
random, under the names of a NeMo model's state dict (the FastConformer model keeps NeMo's names),
plus the preprocessor's window and filterbank buffers NeMo's state dict carries.
"""

from __future__ import annotations

import copy
import shutil
import tarfile
import tempfile
import uuid
from pathlib import Path

import torch
import yaml

SP_TEXT = (
    "and so my fellow americans ask not what your country can do for you "
    "ask what you can do for your country the quick brown fox jumps over the lazy dog "
    "speech recognition turns audio into text one frame at a time "
)
CHAR_LABELS = [" ", *"abcdefghijklmnopqrstuvwxyz", "'"]


def train_sentencepiece(folder: Path, vocab_size: int = 48, model_type: str = "bpe") -> Path:
    """A tiny SentencePiece model (NeMo's ``tokenizer.model``) trained on a few sentences."""
    import sentencepiece

    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "text.txt"
    text.write_text("\n".join([SP_TEXT] * 20))
    prefix = folder / "tokenizer"
    sentencepiece.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=vocab_size, model_type=model_type,
        character_coverage=1.0, bos_id=-1, eos_id=-1, minloglevel=2,
    )
    return prefix.with_suffix(".model")


def pieces(model: Path) -> list[str]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def _encoder(n_mels: int = 80) -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.ConformerEncoder",
        "feat_in": n_mels, "feat_out": -1, "n_layers": 2, "d_model": 32,
        "subsampling": "dw_striding", "subsampling_factor": 8, "subsampling_conv_channels": 16,
        "causal_downsampling": False, "ff_expansion_factor": 4, "self_attention_model": "rel_pos",
        "n_heads": 4, "att_context_size": [-1, -1], "att_context_style": "regular", "xscaling": True,
        "untie_biases": True, "pos_emb_max_len": 5000, "conv_kernel_size": 9, "conv_norm_type": "batch_norm",
        "conv_context_size": None, "dropout": 0.1, "dropout_pre_encoder": 0.1, "dropout_emb": 0.0,
        "dropout_att": 0.1, "stochastic_depth_drop_prob": 0.0,
    }


def _preprocessor(sample_rate="${model.sample_rate}") -> dict:
    return {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "sample_rate": sample_rate, "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01,
        "window": "hann", "features": 80, "n_fft": 512, "log": True, "frame_splicing": 1, "dither": 1.0e-05,
        "pad_to": 0, "pad_value": 0.0,
    }


def nemo_config(kind: str, vocabulary: list[str], sp_entry: str | None) -> dict:
    """A model config in NeMo's schema: kind ``ctc``, ``rnnt``, ``tdt``, ``hybrid`` or ``char_ctc``;
    ``sp_entry`` is the tokenizer's ``model_path`` (``nemo:...`` in an archive)."""
    v = len(vocabulary)
    cfg: dict = {"sample_rate": 16000, "preprocessor": _preprocessor(), "encoder": _encoder()}
    cfg["spec_augment"] = {"_target_": "nemo.collections.asr.modules.SpectrogramAugmentation", "freq_masks": 2, "time_masks": 2}
    if kind != "char_ctc":
        cfg["tokenizer"] = {"dir": None, "type": "bpe", "model_path": sp_entry}
    if kind in ("ctc", "char_ctc"):
        cfg["target"] = (
            "nemo.collections.asr.models.ctc_bpe_models.EncDecCTCModelBPE" if kind == "ctc"
            else "nemo.collections.asr.models.ctc_models.EncDecCTCModel"
        )
        if kind == "char_ctc":
            cfg["labels"] = list(vocabulary)
        cfg["decoder"] = {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": 32, "num_classes": v, "vocabulary": list(vocabulary)}
        return cfg
    cfg["model_defaults"] = {"enc_hidden": 32, "pred_hidden": 24, "joint_hidden": 20}
    cfg["decoder"] = {
        "_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None, "random_state_sampling": False,
        "blank_as_pad": True, "prednet": {"pred_hidden": 24, "pred_rnn_layers": 1, "t_max": None, "dropout": 0.2},
    }
    cfg["joint"] = {
        "_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
        "fuse_loss_wer": True, "fused_batch_size": 4, "num_classes": v, "vocabulary": list(vocabulary),
        "jointnet": {"joint_hidden": 20, "activation": "relu", "dropout": 0.2, "encoder_hidden": 32, "pred_hidden": 24},
    }
    cfg["decoding"] = {"strategy": "greedy_batch", "greedy": {"max_symbols": 10}}
    if kind == "tdt":
        cfg["target"] = "nemo.collections.asr.models.rnnt_bpe_models.EncDecRNNTBPEModel"
        cfg["model_defaults"]["tdt_durations"] = [0, 1, 2, 3, 4]
        cfg["joint"]["num_extra_outputs"] = 5
        cfg["decoding"]["model_type"] = "tdt"
        cfg["decoding"]["durations"] = [0, 1, 2, 3, 4]
        cfg["loss"] = {"loss_name": "tdt", "tdt_kwargs": {"durations": [0, 1, 2, 3, 4], "sigma": 0.02, "omega": 0.1}}
    elif kind == "hybrid":
        cfg["target"] = "nemo.collections.asr.models.hybrid_rnnt_ctc_bpe_models.EncDecHybridRNNTCTCBPEModel"
        cfg["aux_ctc"] = {
            "ctc_loss_weight": 0.3,
            "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": 32, "num_classes": v, "vocabulary": list(vocabulary)},
        }
    else:
        cfg["target"] = "nemo.collections.asr.models.rnnt_bpe_models.EncDecRNNTBPEModel"
    return cfg


def resolved(cfg: dict) -> dict:
    """The config as ``save_to`` writes it: ``${model.x}`` references resolved."""
    out = copy.deepcopy(cfg)
    out["preprocessor"]["sample_rate"] = cfg["sample_rate"]
    return out


def nemo_state_dict(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under NeMo's names for ``cfg``, the preprocessor's buffers included."""
    import librosa

    from oasr.models.fastconformer import FastConformer
    from oasr_converters.nemo import fastconformer_config

    torch.manual_seed(seed)
    model = FastConformer(fastconformer_config(resolved(cfg)))
    state = {}
    for name, t in model.state_dict().items():
        if t.is_floating_point():
            t = torch.rand_like(t) + 0.5 if name.endswith("running_var") else torch.randn_like(t) * 0.2
        state[name] = t.clone()
    pre = cfg["preprocessor"]
    win = int(pre["window_size"] * 16000)
    state["preprocessor.featurizer.window"] = torch.hann_window(win, periodic=False)
    fb = librosa.filters.mel(sr=16000, n_fft=pre["n_fft"], n_mels=pre["features"], fmin=0, fmax=8000, norm="slaney")
    state["preprocessor.featurizer.fb"] = torch.tensor(fb, dtype=torch.float).unsqueeze(0)
    return state


# ---------------------------------------------------------------------------------------------
# writers, one per format


def write_nemo(path: Path, cfg: dict, state: dict, tokenizer: Path | None = None, *, gz: bool = False) -> Path:
    """A ``.nemo`` as ``save_to`` writes it; the tokenizer becomes a ``nemo:<hex>_tokenizer.model`` artifact."""
    cfg = resolved(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if tokenizer is not None and "tokenizer" in cfg:
            name = f"{uuid.uuid4().hex}_{tokenizer.name}"
            shutil.copy2(tokenizer, folder / name)
            cfg["tokenizer"]["model_path"] = f"nemo:{name}"
        (folder / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        torch.save(state, folder / "model_weights.ckpt")
        with tarfile.open(path, "w:gz" if gz else "w:") as tar:
            tar.add(folder, arcname=".")
    return path


def training_config(cfg: dict):
    """The whole Hydra training config as OmegaConf builds it; ``.model`` is what NeMo saves."""
    from omegaconf import OmegaConf

    whole = OmegaConf.create({
        "name": "tiny", "model": cfg,
        "trainer": {"devices": 1, "max_epochs": 1, "precision": 32},
        "exp_manager": {"exp_dir": "/results", "create_checkpoint_callback": True},
    })
    return whole.model


def lightning_checkpoint(cfg: dict, state: dict) -> dict:
    """What Lightning's ``dump_checkpoint`` gives for a NeMo model (training state included)."""
    params = [t for t in state.values() if t.is_floating_point()]
    return {
        "epoch": 3, "global_step": 1200, "pytorch-lightning_version": "2.5.1",
        "state_dict": state,
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 4, "completed": 3}}}},
        "callbacks": {"ModelCheckpoint{'monitor': 'val_wer', 'mode': 'min'}": {"best_model_score": torch.tensor(0.31), "best_model_path": "/results/tiny.ckpt"}},
        "optimizer_states": [{"state": {i: {"exp_avg": torch.zeros_like(p)} for i, p in enumerate(params[:3])}, "param_groups": [{"lr": 0.001, "params": [0, 1, 2]}]}],
        "lr_schedulers": [{"last_epoch": 1200, "_last_lr": [0.001]}],
        "hparams_name": "kwargs",
        "hyper_parameters": {"cfg": training_config(cfg)},
    }


def write_lightning(path: Path, cfg: dict, state: dict) -> Path:
    torch.save(lightning_checkpoint(cfg, state), path)
    return path


def write_distcp(folder: Path, cfg: dict, state: dict) -> Path:
    """One process's ``dcp.save`` of Lightning's converted state, and ``meta.pt`` beside it."""
    import warnings

    import torch.distributed.checkpoint as dcp

    folder.mkdir(parents=True, exist_ok=True)
    ckpt = lightning_checkpoint(cfg, state)
    converted = {"state_dict": ckpt.pop("state_dict")}
    converted["optimizer_0"] = ckpt.pop("optimizer_states")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(converted, checkpoint_id=str(folder), no_dist=True)
    torch.save(ckpt, folder / "meta.pt")
    return folder


def write_safetensors(folder: Path, cfg: dict, state: dict, tokenizer: Path | None = None) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cfg = resolved(cfg)
    if tokenizer is not None and "tokenizer" in cfg:
        shutil.copy2(tokenizer, folder / "tokenizer.model")
        cfg["tokenizer"]["model_path"] = "tokenizer.model"
    (folder / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "model_weights.safetensors")
    return folder


def _save_rank(rank: int, world: int, folder: str, init_file: str, state: dict) -> None:
    """One rank of a two-process FSDP-style save: every matrix sharded by rows, the rest replicated."""
    import warnings

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        sharded = {
            k: distribute_tensor(v, mesh, [Shard(0) if v.dim() >= 2 and v.shape[0] % world == 0 else Replicate()])
            for k, v in state.items()
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp.save({"state_dict": sharded}, checkpoint_id=folder)
    finally:
        dist.destroy_process_group()


def write_distcp_sharded(folder: Path, cfg: dict, state: dict, world: int = 2) -> Path:
    """``world`` CPU processes (gloo) saving one distributed checkpoint, then Lightning's ``meta.pt``."""
    import torch.distributed.checkpoint  # noqa: F401 - imported once here, not in every forked rank
    import torch.distributed.tensor  # noqa: F401
    import torch._dynamo  # noqa: F401 - distribute_tensor imports it on first use
    import torch.multiprocessing as mp

    folder.mkdir(parents=True, exist_ok=True)
    init_file = folder.parent / f".{folder.name}.pg"
    mp.start_processes(_save_rank, args=(world, str(folder), str(init_file), state), nprocs=world, start_method="fork")
    init_file.unlink(missing_ok=True)
    ckpt = lightning_checkpoint(cfg, state)
    del ckpt["state_dict"], ckpt["optimizer_states"]
    torch.save(ckpt, folder / "meta.pt")
    return folder
