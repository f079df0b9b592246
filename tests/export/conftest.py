"""Fixtures of the export tests: one export of the ``tiny`` preset shared by the session, and each design's
Verilog converted once per test process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPORT_TESTS = Path(__file__).resolve().parent.parent / "report"
if str(REPORT_TESTS) not in sys.path:
    sys.path.insert(0, str(REPORT_TESTS))


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory):
    """``(out_dir, ExportResult)`` of ``export_design(tiny preset)`` with synthesis."""
    from accel_dse.design_files import load_preset
    from accel_dse.export import export_design

    out = tmp_path_factory.mktemp("exports") / "tiny"
    return out, export_design(load_preset("tiny"), out, source={"kind": "preset", "preset": "tiny"})


@pytest.fixture(autouse=True)
def _verilog_once(monkeypatch):
    """Each design's Verilog converted once per test process (``tests.cli_testlib.verilog_once``): many of
    these tests export ``tiny`` or a study's best again (13 core and 10 AXI conversions of ``tiny`` in one run),
    and test what the export writes around the text, which is the same for the same design
    (tests/rtl_gen/test_rtl_export.py::test_export_is_deterministic_and_named_from_the_config_hash). The first
    export of each design in a process converts for real, and ``tiny_export`` (session scope, set up before
    this fixture) always does."""
    from tests.cli_testlib import verilog_once

    verilog_once(monkeypatch)
