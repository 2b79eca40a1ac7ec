"""POST /v1/audio/diarization: oasr's own endpoint, shaped like the audio ones (a multipart ``file``).

Fields: ``response_format`` rttm | json | csv (default json: ``oasr diarize -F json``'s document,
provenance included), ``num_speakers``, ``min_speakers``, ``max_speakers``, and the pipeline's two
models, by name: ``segmentation_model`` and ``embedding_model`` (default: those ``oasr.diarize``
uses). The bodies come from ``oasr.formats.turns``, as the CLI's do; the RTTM file id is
the upload's base name without its extension.
"""

from __future__ import annotations

import dataclasses

from ..errors import InputError
from ..options import DiarizeOptions
from .errors import ApiError
from .uploads import read_upload

SEGMENTATION, EMBEDDING = "speaker-segmentation", "speaker-embedding"  # the tasks of its two models


async def diarization(request, server):
    from ..formats.registry import names
    from ..pipelines.diarize import EMBEDDING_MODEL, SEGMENTATION_MODEL

    upload = await read_upload(request)
    fmt = upload.choice("response_format", tuple(names("turns")), default="json")
    options = _options(upload)
    segmenter = server.pool.slot(upload.text("segmentation_model") or SEGMENTATION_MODEL, SEGMENTATION, param="segmentation_model")
    encoder = server.pool.slot(upload.text("embedding_model") or EMBEDDING_MODEL, EMBEDDING, param="embedding_model")
    audio = upload.audio()
    device = server.config.device

    def work(samples, models, check):
        import oasr

        segmentation_model, embedding_model = models
        return oasr.diarize(samples, options, segmentation_model=segmentation_model, embedding_model=embedding_model, device=device, progress=check)

    turns = await server.infer(request, [segmenter, encoder], [SEGMENTATION, EMBEDDING], server.with_audio(audio, upload.filename, work))
    return respond(dataclasses.replace(turns, source=upload.filename), fmt)


def _options(upload) -> DiarizeOptions:
    given = {name: upload.number(name, integer=True) for name in ("num_speakers", "min_speakers", "max_speakers")}
    try:
        return DiarizeOptions(**{k: v for k, v in given.items() if v is not None})
    except InputError as e:
        raise ApiError(400, " ".join(str(e).split()), code="invalid_value") from e


def respond(turns, fmt: str):
    import json

    from starlette.responses import JSONResponse, PlainTextResponse

    from ..formats.turns import render_turns, turns_json

    document = json.loads(turns_json(turns, indent=None))
    headers = {"x-oasr-provenance": json.dumps(document["provenance"], ensure_ascii=True, separators=(",", ":"))}
    if fmt == "json":
        return JSONResponse(document, headers=headers)
    return PlainTextResponse(render_turns(turns, fmt), headers=headers)
