"""Fixtures of the verify tests: the study helpers of tests/report and a shared simulation cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import sim_work_dir

REPORT_TESTS = Path(__file__).resolve().parent.parent / "report"
if str(REPORT_TESTS) not in sys.path:
    sys.path.insert(0, str(REPORT_TESTS))


@pytest.fixture(scope="session")
def sim_work(tmp_path_factory) -> Path:
    """Simulation builds and runs of the verify tests."""
    return sim_work_dir(tmp_path_factory, "verify-sim")
