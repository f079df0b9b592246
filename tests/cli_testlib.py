"""Shared checks of the CLI's error convention, for tests in every package."""

from __future__ import annotations

import re

#: How every error line of the CLI starts.
ERROR_PREFIX = "accel-dse: error: "

#: Progress lines that may come before an error on stderr (export's and verify's steps).
PROGRESS_PREFIXES = ("accel-dse export:", "accel-dse verify:")


def one_line_error(code: int, out: str, err: str, *, status: int = 2) -> str:
    """Check the bad-input contract: exit ``status``, one stderr line besides progress lines, no
    traceback; return that line (``accel-dse: error: ...``)."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(PROGRESS_PREFIXES)]
    assert code == status, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX), lines[0]
    return lines[0]


def assert_one_line_error(code: int, out: str, err: str, pattern: str) -> None:
    """Exit 2, nothing on stdout, one stderr line ``accel-dse: error: ...`` matching ``pattern``."""
    line = one_line_error(code, out, err)
    assert re.search(pattern, line), line
    assert out == ""
