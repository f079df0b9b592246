"""Shared checks of the CLI's error convention, for tests in every package."""

from __future__ import annotations

import re

import pytest

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


#: Verilog texts converted by :func:`verilog_once`, by function and arguments (this process's).
_TEXTS: dict[tuple[object, ...], str] = {}


def verilog_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Convert each design's Verilog once per test process: ``rtl_gen.to_verilog`` and
    ``system_verilog`` memoised by their arguments, for tests about what the CLI writes around the
    text. They give the same text for the same arguments
    (tests/rtl_gen/test_rtl_export.py::test_export_is_deterministic_and_named_from_the_config_hash)."""
    import rtl_gen

    for name in ("to_verilog", "system_verilog"):
        monkeypatch.setattr(rtl_gen, name, _once(name, getattr(rtl_gen, name)))


def _once(name: str, real):  # type: ignore[no-untyped-def]
    def once(config, **kwargs):  # type: ignore[no-untyped-def]
        key = (name, config, tuple(sorted(kwargs.items())))
        if key not in _TEXTS:
            _TEXTS[key] = real(config, **kwargs)
        return _TEXTS[key]
    return once
