"""The text a speech LLM is asked with: the model card's prompts, or the user's instruction.

Qwen2-Audio's base model (Qwen/Qwen2-Audio-7B) is prompted with plain text after the audio:
``<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the speech: <|en|>``
transcribes English; without the language tag the model writes the tag it hears first, which
is the detected language. The Instruct model has a chat template: the user's instruction goes
into a user turn after the audio (``chat=True`` puts the task prompts there too). ``<|AUDIO|>`` stands for the clip; the engine repeats it once per
audio feature, as transformers' processor does.
"""

from __future__ import annotations

from ...errors import CapabilityError

AUDIO = "<|AUDIO|>"
AUDIO_BOS, AUDIO_EOS = "<|audio_bos|>", "<|audio_eos|>"
TRANSCRIBE = "Detect the language and recognize the speech: "
TRANSLATE = "Translate the speech into English: "  # oasr's translation is into English, as Whisper's


def language_tag(language: str) -> str:
    return f"<|{language}|>"


def instruction(task: str, language: str | None, prompt: str | None) -> str:
    """The instruction after the audio: the user's, or the task's (ending in the language tag
    when the language is given)."""
    if prompt is not None:
        return prompt
    if task == "translate":
        return TRANSLATE
    return TRANSCRIBE + (language_tag(language) if language else "")


def prompt_text(tokenizer, task: str, language: str | None, prompt: str | None, chat: bool | None = None) -> str:
    """The whole prompt as text, with one ``<|AUDIO|>`` for the clip; ``chat``: inside the
    tokenizer's chat template (None: for the user's ``prompt`` when there is one)."""
    for name in (AUDIO, AUDIO_BOS, AUDIO_EOS):
        if tokenizer.special(name) is None:
            raise CapabilityError(f"this model's vocabulary has no {name} token; it is not a Qwen2-Audio tokenizer")
    if language and tokenizer.special(language_tag(language)) is None:
        raise CapabilityError(f"--language {language}: this model's vocabulary has no {language_tag(language)} tag")
    text = instruction(task, language, prompt)
    if chat is None:
        chat = prompt is not None and tokenizer.chat_template is not None
    if chat:
        if tokenizer.chat_template is None:
            raise CapabilityError("chat: this model's tokenizer has no chat template")
        messages = [{"role": "user", "content": [{"type": "audio", "audio_url": "input"}, {"type": "text", "text": text}]}]
        return tokenizer.render_chat(messages)
    return f"{AUDIO_BOS}{AUDIO}{AUDIO_EOS}{text}"


def prompt_ids(tokenizer, text: str, n_audio: int) -> list[int]:
    """The prompt's ids with the one ``<|AUDIO|>`` repeated ``n_audio`` times."""
    audio = tokenizer.special(AUDIO)
    ids = tokenizer.encode(text)
    if ids.count(audio) != 1:
        raise CapabilityError(f"the prompt holds {ids.count(audio)} {AUDIO} tokens; it needs one")
    at = ids.index(audio)
    return ids[:at] + [audio] * n_audio + ids[at + 1 :]
