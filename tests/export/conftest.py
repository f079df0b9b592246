"""Fixtures of the export tests: one export of the ``tiny`` preset shared by the session."""

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
