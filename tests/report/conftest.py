"""Fixtures of the report tests: the helpers of report_testlib importable, a few studies per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from report_testlib import WIDE_PARAMS, make_study  # noqa: E402


@pytest.fixture(autouse=True)
def _verilog_once(monkeypatch):
    """Each design's Verilog converted once per test process (``tests.cli_testlib.verilog_once``): the
    best-pick tests export the same studies' best designs (``--no-synth``) to check which trial is picked
    and how it is named, not the text (tests/export, tests/rtl_gen)."""
    from tests.cli_testlib import verilog_once

    verilog_once(monkeypatch)


@pytest.fixture(scope="session")
def single_study(tmp_path_factory):
    """A finished single-objective (EDP) study in SQLite: ``(url, sweep result)``."""
    url = f"sqlite:///{tmp_path_factory.mktemp('single') / 'study.db'}"
    return url, make_study(url, objectives=["edp"], trials=24, workload="mlp",
                           params=WIDE_PARAMS)


@pytest.fixture(scope="session")
def multi_study(tmp_path_factory):
    """A finished two-objective (latency, area) study in a journal file: ``(url, sweep result)``."""
    url = f"journal:{tmp_path_factory.mktemp('multi') / 'study.journal'}"
    return url, make_study(url, objectives=["latency", "area"], trials=24, sampler="nsga2")
