"""``tests/rtl_gen`` on ``sys.path`` so the tests share ``rtl_testlib``; the SoC tests' Icarus builds
(``soc_icarus``) in the session's simulation work directory, shared by every worker of the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import sim_work_dir

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session", autouse=True)
def soc_work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The work directory of ``soc_icarus`` (its builds and Verilog caches shared by the run's workers)."""
    import soc_icarus

    soc_icarus.WORK_DIR = sim_work_dir(tmp_path_factory, "soc-icarus")
    return soc_icarus.WORK_DIR
