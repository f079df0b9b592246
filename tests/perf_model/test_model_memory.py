"""DRAM as a part: ``dram`` names a memory kind; bandwidth and energy follow it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from model_testlib import SLOW_MHZ

import perf_model
from accel_dse.search import load_space
from accel_spec.config import MEMORY_KINDS, ArrayConfig
from accel_spec.errors import ConfigError, ModelError
from workloads.ops import Gemm

GEMM = Gemm(m=512, k=512, n=512)


def test_effective_bandwidth_is_the_lesser_of_interface_and_part():
    # TPU v1: 34.1 GB/s at 700 MHz is 48.71 B/cycle, above the 48.57 of the interface.
    got = perf_model.effective_dram_bytes_per_cycle(
        [48.57, 48.57, 48.57, 8.0, 1e6], ["ddr3-2133-2x64", "ddr3-2133-2x64", "none", "hbm2e", "none"],
        [700.0, 1000.0, 1000.0, 3000.0, 1.0])
    np.testing.assert_allclose(got, [48.57, 34.1, 48.57, 8.0, 1e6])
    # names and codes agree
    codes = perf_model.DesignArrays.from_columns(rows=1, cols=1, dram=["hbm2e"]).dram
    assert perf_model.effective_dram_bytes_per_cycle(1e4, codes, 1000.0)[0] == pytest.approx(409.6)


def test_more_bandwidth_never_more_cycles():
    """Over per-cycle limits and memory parts: a design with at least the other's bandwidth
    (by the effective bytes per cycle) never takes more cycles, on every op shape."""
    parts = ["none", *MEMORY_KINDS]
    per_cycle = [1.0, 4.0, 16.0, 64.0, 1024.0]
    columns = dict(rows=16, cols=16, clock_mhz=np.repeat([400.0, 1000.0], len(parts) * len(per_cycle)),
                   dram=np.tile(np.repeat(parts, len(per_cycle)), 2),
                   dram_bytes_per_cycle=np.tile(per_cycle, 2 * len(parts)), tech_nm=28)
    designs = perf_model.DesignArrays.from_columns(**columns)
    bw = perf_model.effective_dram_bytes_per_cycle(designs.dram_bytes_per_cycle, designs.dram, designs.clock_mhz)
    for gemm in (GEMM, Gemm(m=1, k=4096, n=4096), Gemm(m=3000, k=64, n=17)):
        t = perf_model.evaluate_designs(designs, [(gemm, 1)])
        assert t.feasible.all()
        more = bw[:, None] >= bw[None, :]
        assert (t.total_cycles[:, None] <= t.total_cycles[None, :] * (1 + 1e-12))[more].all()


def test_dram_energy_is_the_parts_pj_per_bit():
    base = ArrayConfig(rows=16, cols=16, clock_mhz=SLOW_MHZ)
    for name, kind in MEMORY_KINDS.items():
        r = perf_model.evaluate_op(dataclasses.replace(base, dram=name), GEMM)
        moved = r.dram_read_bytes + r.dram_write_bytes
        assert r.energy_breakdown["dram"] == pytest.approx(moved * 8 * kind.pj_per_bit)
    # the default part is LPDDR5 x32: 5 pJ/bit, 40 pJ a byte moved
    default = perf_model.evaluate_op(base, GEMM)
    moved = default.dram_read_bytes + default.dram_write_bytes
    assert moved > 0 and default.energy_breakdown["dram"] == pytest.approx(moved * 40.0)
    # "none" is ideal memory: the same bytes, no energy
    ideal = perf_model.evaluate_op(dataclasses.replace(base, dram="none"), GEMM)
    assert ideal.dram_read_bytes + ideal.dram_write_bytes == moved
    assert ideal.energy_breakdown["dram"] == 0.0
    assert ideal.energy_pj == pytest.approx(default.energy_pj - moved * 40.0)


def test_unknown_memory_kind_is_one_clear_error(run_cli, tmp_path):
    with pytest.raises(ConfigError, match=r"dram must be one of none, ddr3-1600-x64, .*hbm2e, not 'ddr9'"):
        ArrayConfig(rows=4, cols=4, dram="ddr9")
    with pytest.raises(ModelError, match="dram must be one of none"):
        perf_model.DesignArrays.from_columns(rows=4, cols=4, dram=["ddr9"])
    path = tmp_path / "d.toml"
    path.write_text('[design]\nrows = 4\ncols = 4\ndram = "ddr9"\n')
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "ddr9" in err and all(name in err for name in MEMORY_KINDS)


def test_default_memory_keeps_bandwidth_and_hash():
    plain = ArrayConfig(rows=8, cols=8)
    assert plain.dram == "lpddr5-x32"
    assert "dram" in plain.to_dict()
    assert ArrayConfig.from_dict(plain.to_dict()) == plain
    # the hash a file without dram had when the default was "none" (main before the change)
    assert plain.config_hash == "a2028923fb20"
    ideal = dataclasses.replace(plain, dram="none")
    assert ideal.config_hash != plain.config_hash
    assert perf_model.DesignArrays.from_configs([ideal]).config(0) == ideal
    # 25.6 GB/s: 25.6 B a cycle at 1 GHz, above the default 16 (unchanged); 12.8 at 2 GHz
    assert float(perf_model.effective_dram_bytes_per_cycle(16.0, plain.dram, 1000.0)) == 16.0
    assert float(perf_model.effective_dram_bytes_per_cycle(16.0, plain.dram, 2000.0)) == pytest.approx(12.8)
    assert float(perf_model.effective_dram_bytes_per_cycle(16.0, "none", 2000.0)) == 16.0


def test_a_space_can_search_the_memory_kind(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "m"\nobjectives = ["edp"]\n[[workloads]]\nspec = "gemm:m=64,k=64,n=64"\n'
                    '[params]\nrows = 8\ncols = 8\nclock_mhz = 500.0\ndram = ["lpddr5-x32", "hbm2e"]\n')
    space = load_space(path)
    param = next(p for p in space.params if p.field == "dram")
    assert param.kind == "choice" and param.values == ("lpddr5-x32", "hbm2e")
    assert list(space.grid_columns(0, 2)["dram"]) == ["lpddr5-x32", "hbm2e"]
    bad = tmp_path / "b.toml"
    bad.write_text(path.read_text().replace('"hbm2e"', '"hbm9"'))
    with pytest.raises(ConfigError, match="dram must be one of"):
        load_space(bad)
