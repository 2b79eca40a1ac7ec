"""Qwen2-Audio's tokenizer: byte-level BPE from ``tokenizer.json``, its special tokens, its chat template.

The special tokens (``<|AUDIO|>``, ``<|audio_bos|>``, ``<|im_start|>``, the language tags such as
``<|en|>``) are the added tokens of ``tokenizer.json``; the chat template (the Instruct model's)
is ``chat_template.jinja`` or the ``chat_template`` of ``tokenizer_config.json``, rendered in a
sandbox (no file or attribute access) as transformers renders it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from tokenizers import Tokenizer

from ..errors import BundleError, InputError
from ..specs import TokenizerSpec


class Qwen2AudioTokenizer:
    def __init__(self, tokenizer: Tokenizer, chat_template: str | None):
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        added = tokenizer.get_added_tokens_decoder()
        self.special_ids = {i for i, t in added.items() if t.special}
        self._by_name = {t.content: i for i, t in added.items()}

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "Qwen2AudioTokenizer":
        if "tokenizer.json" not in files:
            raise BundleError("the bundle's tokenizer names no tokenizer.json")
        try:
            tok = Tokenizer.from_file(str(files["tokenizer.json"]))
        except Exception as e:  # noqa: BLE001 - the library raises its own exception types
            raise BundleError(f"tokenizer.json is unreadable: {e}") from e
        return cls(tok, _chat_template(files))

    def special(self, name: str) -> int | None:
        """The id of special token ``name`` (``<|AUDIO|>``), None when the vocabulary lacks it."""
        return self._by_name.get(name)

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def render_chat(self, messages: list[dict]) -> str:
        """The chat template applied to ``messages`` with the generation prompt, as text."""
        if self.chat_template is None:
            raise InputError("this model has no chat template")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        return env.from_string(self.chat_template).render(messages=messages, add_generation_prompt=True)


def _chat_template(files: Mapping[str, Path]) -> str | None:
    if "chat_template.jinja" in files:
        return files["chat_template.jinja"].read_text(encoding="utf-8")
    for name in ("chat_template.json", "tokenizer_config.json"):
        if name in files:
            try:
                data = json.loads(files[name].read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError) as e:
                raise BundleError(f"{name} is not readable JSON: {e}") from e
            template = data.get("chat_template") if isinstance(data, dict) else None
            if isinstance(template, str):
                return template
    return None


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> Qwen2AudioTokenizer:
    return Qwen2AudioTokenizer.from_files(files, spec)
