"""Weight-load accounting: expected drops pass, hinted drops warn by name, misses fail with the hints."""

from __future__ import annotations

import logging

import pytest
import torch

from oasr.conversion.base import CheckpointConverter
from oasr.errors import ConversionError, LoadError
from oasr.models.whisper import WhisperConfig
from oasr.conversion.accounting import check_weights
from oasr.models.weights import meta_model
from oasr.conversion.tensor_map import TensorTable, translate

from oasr_converters.openai_whisper import OpenAIWhisperConverter
from tiny_models import tiny_whisper_state


class _Fake(CheckpointConverter):
    name = "fake"
    architecture = "whisper"
    markers = "nothing"
    tensor_table = OpenAIWhisperConverter.tensor_table  # openai names are oasr's own
    expected_unused_prefixes = ("training.",)
    capability_drop_hints = {"lm_head.": "dropping lm_head loses shallow-fusion rescoring"}


@pytest.fixture
def model_and_state():
    dims, state = tiny_whisper_state()
    return meta_model("whisper", WhisperConfig(**dims)), state


def test_exact_fill_reports_every_tensor(model_and_state):
    model, state = model_and_state
    tensors, report = check_weights(model, state)
    assert report.missing == [] and report.dropped == []
    assert len(report.mapped) == len(state)
    assert "encoder.positional_embedding" not in tensors  # computed buffer: verified, then rebuilt


def test_expected_unused_pass_silently(model_and_state, caplog):
    model, state = model_and_state
    state["training.ema_decay"] = torch.tensor(0.999)
    with caplog.at_level(logging.WARNING, logger="oasr"):
        _, report = check_weights(model, state, converter=_Fake)
    assert report.dropped == ["training.ema_decay"]
    assert caplog.records == []


def test_capability_drop_hint_warns_by_name(model_and_state, caplog):
    model, state = model_and_state
    state["lm_head.weight"] = torch.zeros(3)
    with caplog.at_level(logging.WARNING, logger="oasr"):
        _, report = check_weights(model, state, converter=_Fake)
    assert report.dropped == ["lm_head.weight"]
    assert any("shallow-fusion rescoring" in r.getMessage() for r in caplog.records)


def test_unknown_drop_is_refused(model_and_state):
    model, state = model_and_state
    state["mystery.weight"] = torch.zeros(3)
    with pytest.raises(LoadError, match="mystery.weight.*refusing to drop weights silently"):
        check_weights(model, state, converter=_Fake)


def test_missing_tensor_fails_with_the_hints_that_fired(model_and_state):
    model, state = model_and_state
    del state["decoder.ln.bias"]
    state["lm_head.weight"] = torch.zeros(3)
    with pytest.raises(LoadError, match="decoder.ln.bias.*shallow-fusion rescoring"):
        check_weights(model, state, converter=_Fake)


def test_wrong_shape_is_refused(model_and_state):
    model, state = model_and_state
    state["decoder.ln.bias"] = torch.zeros(7)
    with pytest.raises(LoadError, match="decoder.ln.bias.*shape"):
        check_weights(model, state)


def test_nonstandard_computed_buffer_is_refused(model_and_state):
    model, state = model_and_state
    state["encoder.positional_embedding"] = state["encoder.positional_embedding"] + 0.5
    with pytest.raises(LoadError, match="not a standard one"):
        check_weights(model, state)


def test_table_splits_fused_tensors_and_checks_zero_chunks():
    table = TensorTable({"blk_{bid}/qkv": ("b.{bid}.q", None, "b.{bid}.v"), "emb": "e", "proj": "e"})
    fused = torch.cat([torch.ones(2, 3), torch.zeros(2, 3), torch.full((2, 3), 2.0)])
    emb = torch.randn(4, 3)
    out = translate({"blk_7/qkv": fused, "emb": emb, "proj": emb.clone(), "other": emb}, table)
    assert set(out.tensors) == {"b.7.q", "b.7.v", "e"}
    assert torch.equal(out.tensors["b.7.v"], torch.full((2, 3), 2.0))
    assert out.unmatched == ["other"]
    fused[3, 0] = 1.0  # the chunk that must be zero is not
    with pytest.raises(ConversionError, match="expected to be zero"):
        translate({"blk_7/qkv": fused}, table)
    with pytest.raises(ConversionError, match="different values"):
        translate({"emb": emb, "proj": emb + 1}, table)


def test_converter_must_declare_its_contract():
    with pytest.raises(TypeError, match="must declare"):

        class Incomplete(CheckpointConverter):  # noqa: F841
            name = "incomplete"


def test_third_party_converter_through_entry_points(monkeypatch):
    import importlib.metadata

    import oasr.conversion.detect as registry

    class EP:
        name = "fake"

        def load(self):
            return _Fake

    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [*real(group=group), EP()] if group == registry.ENTRY_POINT_GROUP else real(group=group)
    )
    registry.converters.cache_clear()
    try:
        assert registry.converters()["fake"] is _Fake
        assert "ctranslate2" in registry.converters()
    finally:
        registry.converters.cache_clear()
