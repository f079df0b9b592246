"""Fixtures of the search tests: the stand-in model, small spaces, subprocess helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from search_testlib import (  # noqa: E402,F401
    SMALL_SPACE,
    SMALL_SPACE_TOML,
    WORKLOAD_A,
    WORKLOAD_B,
    make_space,
    standin_evaluator,
)


@pytest.fixture
def small_space():
    return make_space()


@pytest.fixture
def subprocess_env():
    """Environment for Python subprocesses that import accel_dse and the stand-in model."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    return env
