"""POST /v1/audio/separation: oasr's own endpoint, shaped like the audio ones (a multipart ``file``).

Fields, as ``oasr separate``'s flags: ``model`` (default htdemucs), ``stems`` (comma-separated
sources to keep), ``two_stems`` (a source and ``no_<source>``), ``shifts``, ``overlap``, ``format``
wav | flac (16-bit, as ``oasr separate``'s files), and ``response_format``: ``zip`` (default: one
``<stem>.<format>`` member per stem, stored uncompressed) or ``audio`` (the one stem ``stems``
names, as the file itself). The stems are ``oasr separate``'s bytes: the same writer, into a
temporary folder removed once answered. The zip's members are listed in ``x-oasr-stems``.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path

from ..errors import InputError
from .errors import ApiError
from .uploads import read_upload

RESPONSE_FORMATS = ("zip", "audio")
MEDIA_TYPES = {"wav": "audio/wav", "flac": "audio/flac"}
DEFAULT_MODEL = "htdemucs"


async def separation(request, server):
    from starlette.responses import Response

    from ..formats.registry import names

    upload = await read_upload(request)
    fmt = upload.choice("response_format", RESPONSE_FORMATS, default="zip")
    container = upload.choice("format", tuple(names("stems")), default="wav")
    options = _options(upload)
    if fmt == "audio" and (options.stems is None or len(options.stems) != 1):
        raise ApiError(400, "response_format 'audio' answers one stem: name it in 'stems' (or ask for a zip)", param="response_format", code="invalid_value")
    slot = server.pool.slot(upload.text("model") or DEFAULT_MODEL, "separate")
    data, track = upload.audio(), Path(upload.filename or "upload").stem or "upload"
    config = server.config

    def work(models, check):
        import oasr
        from ..pipelines.separate import output_names
        from ..pipelines.separate.writer import StemFiles

        (loaded,) = models
        stems = output_names(tuple(loaded.config.sources), options)
        with tempfile.TemporaryDirectory(prefix="oasr-separation-") as folder:
            files = StemFiles({s: Path(folder) / f"{s}.{container}" for s in stems}, container)
            try:
                result = oasr.separate(data, loaded, options, files=files, device=config.device, dtype=config.dtype, progress=check)
            except InputError as e:  # the options were checked: what is left is the upload's audio
                raise ApiError(400, " ".join(str(e).split()).replace("<bytes>", upload.filename or "the upload"), param="file", code="invalid_file") from e
            return {s.name: Path(s.path).read_bytes() for s in result.stems}, result

    written, result = await server.infer(request, [slot], ["separate"], work)
    headers = {
        "x-oasr-provenance": json.dumps(result.provenance.__dict__, ensure_ascii=True, separators=(",", ":")),
        "x-oasr-stems": ",".join(written),
    }
    if fmt == "audio":
        (body,) = written.values()
        headers["content-disposition"] = f'attachment; filename="{track}.{container}"'
        return Response(body, media_type=MEDIA_TYPES.get(container, "application/octet-stream"), headers=headers)
    return Response(_zip(written, container), media_type="application/zip", headers={**headers, "content-disposition": f'attachment; filename="{track}.zip"'})


def _zip(stems: dict[str, bytes], container: str) -> bytes:
    import io

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:  # audio does not deflate
        for name, data in stems.items():
            archive.writestr(f"{name}.{container}", data)
    return out.getvalue()


def _options(upload):
    from ..options import SeparateOptions

    stems = upload.text("stems")
    given = {
        "stems": tuple(s.strip() for s in stems.split(",") if s.strip()) if stems else None,
        "two_stems": (upload.text("two_stems") or "").strip() or None,
        "shifts": upload.number("shifts", integer=True),
        "overlap": upload.number("overlap"),
    }
    try:
        return SeparateOptions(**{k: v for k, v in given.items() if v is not None})
    except InputError as e:
        message = " ".join(str(e).split())
        param = next((k for k in given if k.replace("_", "-") in message), None)
        raise ApiError(400, message, param=param, code="invalid_value") from e
