"""Fixtures of the simulation tests: one build cache shared by the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest

TOY_DIR = Path(__file__).resolve().parent / "toy"


@pytest.fixture(scope="session")
def sim_cache(tmp_path_factory) -> Path:
    """Work directory (builds and runs) shared by every simulation test of the session."""
    return tmp_path_factory.mktemp("sim-work")
