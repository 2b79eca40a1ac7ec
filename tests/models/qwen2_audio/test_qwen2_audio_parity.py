"""Qwen2-Audio on random weights against transformers' Qwen2AudioForConditionalGeneration: a
tiny model saved in shards by transformers itself, converted, and decoded by oasr's engine."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

pytest.importorskip("transformers")

from qwen2_audio_refs import write_tiny_qwen2_audio  # noqa: E402

import oasr  # noqa: E402
from oasr.conversion.run import convert_one  # noqa: E402
from oasr.decoding.speech_llm.options import SpeechLlmDecoding  # noqa: E402
from oasr.errors import ConversionError, InputError  # noqa: E402
from oasr.io.audio import load_audio  # noqa: E402
from oasr.options import TranscribeOptions  # noqa: E402
from oasr.pipelines.transcribe.speech_llm import Engine  # noqa: E402

PROMPT = "<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the speech: <|en|>"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen2audio")
    ref, processor = write_tiny_qwen2_audio(root / "hf")
    result = convert_one(root / "hf", root / "bundle")
    assert result.status == "converted" and not result.dropped
    return root, ref, processor


@pytest.fixture(scope="module")
def jfk(data_dir):
    return load_audio(data_dir / "asr" / "jfk.wav", 16000)


def _reference(ref, processor, samples, prompt=PROMPT, **generate):
    inputs = processor(text=prompt, audio=samples, sampling_rate=16000, return_tensors="pt")
    with torch.no_grad():
        out = ref.generate(**inputs, do_sample=False, **generate)
    return inputs, out[0, inputs["input_ids"].shape[1] :].tolist()


def test_sharded_folder_as_transformers_writes_it(tiny):
    root, _, _ = tiny
    index = json.loads((root / "hf" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2  # really sharded


def test_encoder_and_logits_match_transformers(tiny, jfk):
    root, ref, processor = tiny
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32", cache=False)
    model = loaded.model
    inputs = processor(text=PROMPT, audio=jfk, sampling_rate=16000, return_tensors="pt")
    captured = {}
    hook = ref.model.audio_tower.register_forward_hook(lambda m, i, o: captured.update(enc=o.last_hidden_state.clone()))
    try:
        with torch.no_grad():
            logits_ref = ref(**inputs).logits
    finally:
        hook.remove()
    frames = inputs["feature_attention_mask"].sum(-1)
    with torch.no_grad():
        encoded = model.audio_tower(inputs["input_features"], frames)
        x = model.embed_prompt(inputs["input_ids"][0], model.embed_audio(inputs["input_features"], frames)[0])
        logits = model.logits(x)
    assert (encoded - captured["enc"]).abs().max() < 1e-4
    assert (logits - logits_ref).abs().max() < 1e-4
    # oasr's own front end gives transformers' features
    engine = Engine(loaded, TranscribeOptions(language="en"), SpeechLlmDecoding())
    spec = loaded.feature_spec
    mel = oasr.features.feature_extractor(spec)(torch.as_tensor(jfk), spec, padding=480000 - len(jfk))
    assert (mel - inputs["input_features"][0]).abs().max() < 1e-4
    assert engine.text == PROMPT


def test_greedy_20_tokens_and_text_identical_to_generate(tiny, jfk):
    root, ref, processor = tiny
    _, expected = _reference(ref, processor, jfk, max_new_tokens=20)
    assert len(expected) == 20
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32")
    engine = Engine(loaded, TranscribeOptions(language="en"), SpeechLlmDecoding(max_new_tokens=20))
    with torch.inference_mode():
        found = engine.answer(jfk)
    assert found.tokens == expected
    transcript = oasr.transcribe(jfk, loaded, TranscribeOptions(language="en", decoding={"max_new_tokens": 20}), device="cpu", dtype="float32")
    assert transcript.text == processor.tokenizer.decode(expected, skip_special_tokens=True)
    assert transcript.language == "en" and transcript.segments[0].start == 0.0
    assert transcript.provenance.options["decoding"]["max_new_tokens"] == 20


def test_beam_search_matches_generate(tiny, jfk):
    root, ref, processor = tiny
    _, expected = _reference(ref, processor, jfk, max_new_tokens=12, num_beams=3, length_penalty=1.0, early_stopping=False)
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32")
    engine = Engine(loaded, TranscribeOptions(language="en"), SpeechLlmDecoding(max_new_tokens=12, beam_size=3))
    with torch.inference_mode():
        assert engine.answer(jfk).tokens == expected


def test_user_prompt_and_translate_prompts(tiny, jfk):
    root, ref, processor = tiny
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32")
    ask = "What is the speaker's mood?"
    engine = Engine(loaded, TranscribeOptions(), SpeechLlmDecoding(prompt=ask, max_new_tokens=8))
    # the tokenizer has a chat template: the instruction goes into a user turn, as the processor's
    chat = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "audio", "audio_url": "x"}, {"type": "text", "text": ask}]}], add_generation_prompt=True, tokenize=False
    )
    assert engine.text == chat
    _, expected = _reference(ref, processor, jfk, prompt=chat, max_new_tokens=8)
    with torch.inference_mode():
        assert engine.answer(jfk).tokens == expected
    translate = Engine(loaded, TranscribeOptions(task="translate"), SpeechLlmDecoding())
    assert translate.text.endswith("Translate the speech into English: ")
    with pytest.raises(InputError, match="--prompt"):
        TranscribeOptions(task="translate", decoding={"prompt": ask})
    with pytest.raises(InputError, match="special tokens"):
        SpeechLlmDecoding(prompt="<|AUDIO|> hi")


def test_long_audio_one_segment_per_window(tiny, jfk):
    root, _, _ = tiny
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32")
    long = torch.cat([torch.as_tensor(jfk)] * 4).numpy()  # 44 s: two windows
    t = oasr.transcribe(long, loaded, TranscribeOptions(language="en", decoding={"max_new_tokens": 4}), device="cpu", dtype="float32")
    assert [(s.start, s.end) for s in t.segments] == [(0.0, 30.0), (30.0, round(len(long) / 16000, 3))]


def test_omitted_text_config_fields_come_from_qwen2_defaults(tiny, tmp_path):
    from oasr_converters.hf_qwen2_audio import qwen2_audio_config

    root, _, _ = tiny
    full = json.loads((root / "hf" / "config.json").read_text())
    defaults = dict(full)
    kept = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "max_position_embeddings")
    defaults["text_config"] = {k: v for k, v in full["text_config"].items() if k in kept}
    assert qwen2_audio_config(defaults, "x") == qwen2_audio_config(full, "x")
    published = qwen2_audio_config({"model_type": "qwen2_audio", "text_config": {"vocab_size": 156032}}, "x")
    assert (published.hidden_size, published.num_layers, published.num_kv_heads, published.rope_theta, published.audio_layers) == (4096, 32, 32, 10000.0, 32)
    sliding = dict(full, text_config=dict(full["text_config"], use_sliding_window=True))
    with pytest.raises(ConversionError, match="sliding"):
        qwen2_audio_config(sliding, "x")


def test_index_checked_against_shards(tiny, tmp_path):
    root, _, _ = tiny
    folder = tmp_path / "hf"
    shutil.copytree(root / "hf", folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    name, shard = next(iter(index["weight_map"].items()))
    other = next(s for s in index["weight_map"].values() if s != shard)
    index["weight_map"][name] = other
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ConversionError, match=f"puts {name} in {other}"):
        convert_one(folder, tmp_path / "b")
    assert not (tmp_path / "b").exists()
    del index["weight_map"][name]
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ConversionError, match="does not list"):
        convert_one(folder, tmp_path / "b")


def test_inspect_and_capabilities(tiny):
    root, _, _ = tiny
    loaded = oasr.load_pretrained(root / "bundle", device="cpu", dtype="float32")
    assert {"transcribe", "translate", "prompt"} <= loaded.capabilities
    assert loaded.decoding.family == "speech_llm"
    with pytest.raises(oasr.errors.CapabilityError, match="timestamps"):
        oasr.transcribe(torch.zeros(16000).numpy(), loaded, TranscribeOptions(word_timestamps=True), device="cpu", dtype="float32")
