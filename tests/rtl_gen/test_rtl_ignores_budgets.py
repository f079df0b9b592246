"""A field the RTL ignores (``accel_spec.config.MODEL_ONLY_FIELDS``: the power-density budget) changes
neither the Verilog nor the module names that carry ``config_hash``."""

from __future__ import annotations

import dataclasses

import rtl_gen
from accel_spec.config import MODEL_ONLY_FIELDS, ArrayConfig


def test_the_power_density_budget_leaves_the_verilog_and_its_name_alone(uncached_verilog):
    # uncached_verilog: both designs converted (a cache keys them alike)
    assert MODEL_ONLY_FIELDS == ("max_power_density_w_mm2",)
    base = ArrayConfig(rows=2, cols=2, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    budget = dataclasses.replace(base, max_power_density_w_mm2=0.25)
    assert budget != base  # a different design description ...
    assert rtl_gen.top_name(budget) == rtl_gen.top_name(base)  # ... the same module name
    assert rtl_gen.to_verilog(budget) == rtl_gen.to_verilog(base)  # ... and the same Verilog, byte for byte
    # the check can fail: a hardware field changes both
    wider = dataclasses.replace(base, cols=4)
    assert rtl_gen.top_name(wider) != rtl_gen.top_name(base)


def test_designs_differing_only_in_a_budget_share_one_cached_verilog(tmp_path, monkeypatch):
    """``system_verilog``'s cache keys the design without the model-only fields: the second design
    is served from the first's entry (the generator runs once), a hardware field makes a new one."""
    from rtl_gen.tools import verilog_export

    built: list[ArrayConfig] = []

    def fake(config, fault, dram, rate, cache_dir, *knobs):  # the Yosys conversion (knobs: queue depth, stall seed)
        built.append(config)
        return f"// verilog of {config.rows}x{config.cols}\n"

    monkeypatch.setattr(verilog_export, "_system_verilog", fake)
    base = ArrayConfig(rows=2, cols=2, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    budget = dataclasses.replace(base, max_power_density_w_mm2=0.25)
    first = verilog_export.system_verilog(base, cache_dir=tmp_path)
    second = verilog_export.system_verilog(budget, cache_dir=tmp_path)
    assert second == first and built == [base]  # one generation, one entry
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1
    verilog_export.system_verilog(dataclasses.replace(base, cols=4), cache_dir=tmp_path)
    assert len(built) == 2 and len([p for p in tmp_path.rglob("*") if p.is_file()]) == 2
