"""Fixtures of the simulation tests: one build cache shared by the whole session (all its workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import sim_work_dir

TOY_DIR = Path(__file__).resolve().parent / "toy"


@pytest.fixture(scope="session")
def sim_cache(tmp_path_factory) -> Path:
    """Work directory (builds and runs) shared by every simulation test of the session."""
    return sim_work_dir(tmp_path_factory, "sim-work")
