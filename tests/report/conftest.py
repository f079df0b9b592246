"""Fixtures of the report tests: the helpers of report_testlib importable, a few studies per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from report_testlib import WIDE_PARAMS, make_study  # noqa: E402


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
