"""Shared pytest fixtures for the whole suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Wall time is not what the property tests check: on a loaded machine (CI runs the suite on both
# cores beside simulator builds) Hypothesis's per-example deadline and its too-slow health check
# fail tests whose properties hold. Explicit @settings still set their own example counts.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

REPO = Path(__file__).resolve().parent.parent


def sim_work_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A simulation work directory of this session whose ``builds`` and ``verilog`` caches are
    shared by every xdist worker of the run (symlinks into the run's common temporary folder), so
    a design is converted and built once per run, not once per worker. Its ``runs`` stay its own.
    The caches are made for concurrent use: builds and entries are renamed into place, under locks."""
    work = tmp_path_factory.mktemp(name)
    common = _shared_dir(tmp_path_factory)
    for sub in ("builds", "verilog"):
        (common / sub).mkdir(parents=True, exist_ok=True)
        (work / sub).symlink_to(common / sub, target_is_directory=True)
    return work


def _shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's folder shared by every xdist worker (in the run's common temporary folder)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "sim-shared"


@pytest.fixture(scope="session", autouse=True)
def _verilog_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every ``rtl_gen.to_verilog`` and ``system_verilog`` of the run without a ``cache_dir`` (the export,
    lint, FPGA, SDC and CLI tests', in-process and in the CLI subprocesses) cached in one directory shared
    by every worker (``rtl_gen.tools.verilog_export.CACHE_ENV``; the simulation caches' ``verilog``): a
    design converts once a run, not once per test that writes it. The cache returns the text byte for
    byte (tests/rtl_gen/test_verilog_cache.py); the tests of the conversion itself (determinism, what
    is converted) ask for ``uncached_verilog``."""
    from rtl_gen.tools.verilog_export import CACHE_ENV

    common = _shared_dir(tmp_path_factory) / "verilog"
    common.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(common))
        yield common


@pytest.fixture
def uncached_verilog(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Verilog cache in this test: ``to_verilog`` and ``system_verilog`` without ``cache_dir`` convert
    from scratch (the tests of the conversion itself: two conversions give one text, what is converted)."""
    from rtl_gen.tools.verilog_export import CACHE_ENV

    monkeypatch.delenv(CACHE_ENV, raising=False)


@pytest.fixture
def run_cli(capsys):
    """Run ``accel-dse`` in-process; returns ``(exit_code, stdout, stderr)``."""
    from accel_dse.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors and --help/--version
            code = exc.code if isinstance(exc.code, int) else 2
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for running ``python -m accel_dse`` in a subprocess from the repo."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


PYTHON = sys.executable
