"""Fixtures of the hostile-input tests: the helpers of hostile_testlib importable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

REPORT_TESTS = HERE.parent / "report"
if str(REPORT_TESTS) not in sys.path:
    sys.path.insert(0, str(REPORT_TESTS))


@pytest.fixture(autouse=True)
def _verilog_once(monkeypatch):
    """Each design's Verilog converted once per test process (``tests.cli_testlib.verilog_once``):
    these tests are about what the CLI reads, refuses and writes around the text, and many export
    the same designs (``tiny``, a study's best); the text itself is tested in tests/rtl_gen and tests/export."""
    from tests.cli_testlib import verilog_once

    verilog_once(monkeypatch)
