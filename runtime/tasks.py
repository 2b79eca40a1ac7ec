"""The tasks oasr has built, and the capability a model declares to serve each one.

One list: the catalog validates its entries against it, ``oasr models list --task`` offers it,
and ``load_pretrained(..., task=)`` checks a model's declared capabilities with it. A task is
added here when its pipeline lands.
"""

from __future__ import annotations

from .errors import CapabilityError, InputError

# task -> the capability a model must declare to be loaded for it
CAPABILITY = {
    "transcribe": "transcribe",
    "pitch": "pitch",
    "vad": "vad",
    "speaker-embedding": "speaker_embedding",
    "separate": "separate",
    "speaker-segmentation": "speaker_segmentation",
    "tts": "tts",
}
TASKS = tuple(CAPABILITY)


def check_task(task: str) -> str:
    if task not in CAPABILITY:
        raise InputError(f"unknown task {task!r}; the built tasks are {', '.join(TASKS)}")
    return task


def require_capability(task: str, capabilities, what: str) -> None:
    """Raise unless a model declaring ``capabilities`` serves ``task``; the error names the
    installed architectures that do and what this model can do."""
    need = CAPABILITY[check_task(task)]
    if need in capabilities:
        return
    from .models.architectures import serving

    can = ", ".join(sorted(capabilities)) or "nothing"
    fits = " or ".join(serving(need)) or "another"
    raise CapabilityError(f"{task} needs a {fits} model; {what} can: {can}")
