"""The options of the ``speech_llm`` decoding family, and its declaration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ...errors import InputError
from ...options import check_range
from ..family import DecodingFamily

MAX_BEAMS = 16
MAX_NEW_TOKENS = 4096
MAX_PROMPT_CHARS = 4000


@dataclass(frozen=True)
class SpeechLlmDecoding:
    """The decoding section of the ``speech_llm`` family (Qwen2-Audio)."""

    family: ClassVar[str] = "speech_llm"
    max_beam_size: ClassVar[int] = MAX_BEAMS

    beam_size: int = 1  # 1: greedy; above: beam search over this many hypotheses
    # The user's own instruction in place of the transcription prompt ("What is the speaker's
    # mood?"); the answer is the text. None: the model card's prompt for --task and --language.
    prompt: str | None = field(default=None, metadata={"flag": "--prompt"})
    max_new_tokens: int | None = None  # tokens per 30 s window; None: the bundle's (generation_config.json)
    # The chat template (the Instruct model's) around the instruction: None: for --prompt when
    # the tokenizer has one; the task prompts are the base model card's plain text.
    chat: bool | None = None
    length_penalty: float = 1.0  # beam search: a finished hypothesis scores sum(logprob) / length ** this

    def __post_init__(self):
        check_range(self.beam_size, "--beam-size", 1, MAX_BEAMS, integer=True)
        if self.max_new_tokens is not None:
            check_range(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS, integer=True)
        check_range(self.length_penalty, "length_penalty", -10.0, 10.0)
        if self.prompt is not None:
            if not isinstance(self.prompt, str) or not self.prompt.strip():
                raise InputError("--prompt is empty; give the instruction as text")
            if len(self.prompt) > MAX_PROMPT_CHARS:
                raise InputError(f"--prompt is {len(self.prompt)} characters; at most {MAX_PROMPT_CHARS}")
            if "<|" in self.prompt:
                raise InputError("--prompt must not hold special tokens such as <|AUDIO|>; the audio is placed by oasr")

    def check(self, shared) -> None:
        if self.prompt is not None and shared.task == "translate":
            raise InputError("--prompt replaces the task's prompt; give it without --task translate")


CAN_DO = "greedy or beam search (--beam-size), --task transcribe|translate, --language, --prompt; segments per 30 s window, no word timestamps"

FAMILY = DecodingFamily(
    options=SpeechLlmDecoding,
    engine="oasr.pipelines.transcribe.speech_llm:Engine",
    verify="oasr.decoding.speech_llm.verify:verify_speech_llm",
    can_do=CAN_DO,
)
