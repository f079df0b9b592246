"""The work directory's caches stay within $ACCEL_DSE_SIM_CACHE_MB (accel_dse/simulate/runner/cache_bound.py).

Built on the hand-written counter under Icarus (about a second a build)."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest

from accel_dse.simulate import build_design, find_simulator
from accel_dse.simulate.runner import cache_bound as _cache_bound
from accel_spec.errors import SimulationError

COUNTER = (Path(__file__).resolve().parent / "toy" / "counter.v").read_text()


def _build(work: Path, i: int):
    return build_design(COUNTER + f"// variant {i}\n", top="counter", simulator=find_simulator("icarus"),
                        work_dir=work)


def _age(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def test_least_recently_used_entries_go_first_and_recent_or_locked_builds_stay(tmp_path):
    work = tmp_path / "work"
    a, b, c, d = (_build(work, i) for i in range(4))
    sizes = {x.directory: json.loads((x.directory / "build.json").read_text())["bytes"] for x in (a, b, c, d)}
    for path, size in sizes.items():  # its files but build.json, which records it
        assert size == _cache_bound.tree_bytes(path) - (path / "build.json").stat().st_size > 0
    verilog = work / "verilog" / "0123.v"
    verilog.parent.mkdir()
    verilog.write_text("x" * 1000)
    _age(a.directory / "build.json", 5000)
    _age(verilog, 4000)
    _age(b.directory / "build.json", 3000)
    _age(c.directory / "build.json", 2000)
    _age(d.directory / "build.json", _cache_bound.MIN_IDLE_S / 2)
    # room for one build: a, the Verilog entry and b go, oldest first; c is held by another process's
    # lock and d was used in the last MIN_IDLE_S seconds: both stay, over the bound
    with open(work / "builds" / f"{c.directory.name}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        removed = _cache_bound.prune(work, budget=max(sizes.values()) + 10)
    assert removed == [a.directory, verilog, b.directory]
    assert not a.directory.exists() and not verilog.exists() and not b.directory.exists()
    assert c.directory.is_dir() and d.directory.is_dir()
    assert not list((work / "builds").glob("*.evict-*"))
    # unlocked, c goes; d, used in the last MIN_IDLE_S seconds, stays however far over the bound
    assert _cache_bound.prune(work, budget=1) == [c.directory]
    assert d.directory.is_dir()
    # a removed build is built again, not found half there
    again = _build(work, 0)
    assert not again.cached and (again.directory / "build.json").is_file()


def test_a_new_build_prunes_and_a_reuse_counts_as_a_use(tmp_path, monkeypatch):
    work = tmp_path / "work"
    first = _build(work, 0)
    _age(first.directory / "build.json", 5000)
    reused = _build(work, 0)
    assert reused.cached and time.time() - (first.directory / "build.json").stat().st_mtime < 60
    second = _build(work, 1)
    assert first.directory.is_dir() and second.directory.is_dir()  # the default bound: GBs
    monkeypatch.setenv(_cache_bound.ENV, "0.001")  # about 1 kB: no build fits
    monkeypatch.setattr(_cache_bound, "MIN_IDLE_S", 0.0)
    third = _build(work, 2)
    assert third.directory.is_dir()  # the new build always stays
    assert not first.directory.exists() and not second.directory.exists()


@pytest.mark.parametrize("value", ["lots", "0", "-5", "nan", "inf"])
def test_a_malformed_bound_is_refused_before_anything_is_built(tmp_path, monkeypatch, value):
    monkeypatch.setenv(_cache_bound.ENV, value)
    with pytest.raises(SimulationError) as info:
        _build(tmp_path / "work", 0)
    assert str(info.value) == f"ACCEL_DSE_SIM_CACHE_MB must be a positive number of MiB, not {value!r}"
    assert not (tmp_path / "work" / "builds").exists() or not list((tmp_path / "work" / "builds").iterdir())


def test_the_cli_refuses_a_malformed_bound_in_one_line(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv(_cache_bound.ENV, "10GB")
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=4,k=4,n=4", "--simulator",
                             "icarus", "--work-dir", str(tmp_path / "work"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["accel-dse: error: ACCEL_DSE_SIM_CACHE_MB must be a positive number of "
                                        "MiB, not '10GB'"]
