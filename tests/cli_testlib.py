"""Shared check of the CLI's error convention, for tests in every package."""

from __future__ import annotations

import re


def assert_one_line_error(code: int, out: str, err: str, pattern: str) -> None:
    """Exit 2, nothing on stdout, one stderr line ``accel-dse: error: ...`` matching ``pattern``."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("accel-dse: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert out == ""
