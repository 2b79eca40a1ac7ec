#!/usr/bin/env python
"""Regenerate man/ (roff man pages) and completions/ (bash, zsh, fish) from the oasr command line.

    python scripts/gen_cli_docs.py           # write the files (also: make docs)
    python scripts/gen_cli_docs.py --check   # exit 1 listing stale, missing or leftover files

Everything comes from the Typer apps in oasr_cli/main.py through oasr_cli/docs.py, so run this after
adding a command or changing any help text; tests/test_cli_docs.py fails until the checked-in
copies are current. Files in man/ (*.1) and completions/ (*.bash, *.zsh, *.fish) that the apps no
longer produce (a removed command) are deleted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # oasr_cli from this checkout when the package is not installed


def plan(root: Path = ROOT) -> tuple[dict[str, str], list[str], list[str]]:
    """(every generated file by relative path, the ones that differ on disk, leftovers to delete)."""
    from oasr_cli.docs import OWNED, generated_files

    files = generated_files()
    stale = []
    for rel, text in files.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    leftovers = sorted(
        {
            path.relative_to(root).as_posix()
            for folder, pattern in OWNED
            for path in (root / folder).glob(pattern)
            if path.relative_to(root).as_posix() not in files
        }
    )
    return files, stale, leftovers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 listing stale files")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    files, stale, leftovers = plan(args.root)
    if args.check:
        for rel in stale:
            print(f"stale: {rel}" if (args.root / rel).exists() else f"missing: {rel}")
        for rel in leftovers:
            print(f"not generated (remove): {rel}")
        if stale or leftovers:
            print("run `python scripts/gen_cli_docs.py` (or `make docs`) and commit the result", file=sys.stderr)
            return 1
        return 0

    for rel in stale:
        path = args.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel], encoding="utf-8")
        print(f"wrote {rel}")
    for rel in leftovers:
        (args.root / rel).unlink()
        print(f"removed {rel}")
    if not stale and not leftovers:
        print(f"{len(files)} files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
