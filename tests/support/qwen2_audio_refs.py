"""Tiny random Qwen2-Audio folders written by transformers itself (``save_pretrained`` with
shards), and the reference model they came from."""

from __future__ import annotations

from pathlib import Path

import torch

LANGS = ("en", "de", "fr", "zh")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>", *[f"<|{c}|>" for c in LANGS]]
CORPUS = [
    "Detect the language and recognize the speech: ",
    "Translate the speech into English: ",
    "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
    "What is the speaker's mood? Describe the sound. You are a helpful assistant. system user assistant Audio 1:",
]
CHAT_TEMPLATE = (  # Qwen2-Audio-7B-Instruct's chat template (the processor's default)
    "{% set audio_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if 'audio' in content or 'audio_url' in content %}{% set audio_count.value = audio_count.value + 1 %}"
    "Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer(chat: bool = False):
    """A byte-level BPE of a few hundred pieces with Qwen2-Audio's special tokens, as transformers' fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_config(tokenizer, **text):
    from transformers import Qwen2AudioConfig

    audio = dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=128, max_source_positions=1500)
    # Only what differs from Qwen2's defaults is written: the converter fills the rest as transformers does.
    text = dict(
        model_type="qwen2", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, **text,
    )
    return Qwen2AudioConfig(audio_config=audio, text_config=text, audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"))


def write_tiny_qwen2_audio(folder: Path, seed: int = 0, chat: bool = False, shard: str = "200KB", **text):
    """A folder as transformers writes it (config, generation config, processor, sharded weights);
    returns (the reference model in eval mode, its processor)."""
    from transformers import GenerationConfig, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor

    tokenizer = tiny_tokenizer(chat)
    torch.manual_seed(seed)
    config = tiny_config(tokenizer, **text)
    config.text_config.initializer_range = config.audio_config.initializer_range = 0.2  # logits far from ties
    model = Qwen2AudioForConditionalGeneration(config).eval()
    stops = [tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")]
    model.generation_config = GenerationConfig(eos_token_id=stops, pad_token_id=stops[0], do_sample=False, max_new_tokens=20)
    processor = Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tokenizer, chat_template=CHAT_TEMPLATE if chat else None)
    model.save_pretrained(folder, max_shard_size=shard)
    processor.save_pretrained(folder)
    return model, processor
