"""A .nemo conversion stopped by SIGTERM, or killed outright, leaves nothing in TMPDIR (issue 31)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

from oasr.io.nemo.archive import EXTRACT_PREFIX, sweep_orphans


def _nemo(path: Path) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in (("model_config.yaml", b"model:\n  sample_rate: 16000\n"), ("model_weights.ckpt", b"\0" * 4096)):
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


# The CLI with the archive's copy slowed: SIGTERM arrives while the extraction folder exists.
SLOW_CONVERT = textwrap.dedent(
    """
    import sys, time
    import oasr.io.nemo.archive as archive
    copy = archive.NemoArchive._copy
    def slow(*args):
        copy(*args)
        print("extracted", flush=True)
        time.sleep(60)
    archive.NemoArchive._copy = slow
    from oasr_cli.main import main
    sys.exit(main(["convert", sys.argv[1], sys.argv[2]]))
    """
)


def test_sigterm_mid_extraction_removes_the_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    nemo = _nemo(tmp_path / "m.nemo")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CONVERT, str(nemo), str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp)})
    try:
        assert proc.stdout.readline().strip() == "extracted"
        assert [p.name for p in tmp.iterdir() if p.name.startswith(EXTRACT_PREFIX)]  # there while it runs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not [p.name for p in tmp.iterdir() if p.name.startswith(EXTRACT_PREFIX)]
    assert not (tmp_path / "out").exists()


def test_folders_of_dead_processes_are_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f"{EXTRACT_PREFIX}{dead.pid}-abcd"
    live = tmp_path / f"{EXTRACT_PREFIX}{os.getpid()}-efgh"
    other = tmp_path / f"{EXTRACT_PREFIX}legacy"
    for folder in (orphan, live, other):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "model_weights.ckpt").write_bytes(b"x" * 100)
    assert sweep_orphans(str(tmp_path)) == [orphan]
    assert not orphan.exists() and live.exists() and other.exists()
