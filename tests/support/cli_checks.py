"""Checks shared by the command-line tests."""

from __future__ import annotations


def one_line_error(code: int, err: str, *needles: str) -> str:
    """The run failed (exit 1) with exactly one ``oasr: error:`` line on stderr holding every needle; the line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1, err
    assert lines[0].startswith("oasr: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
