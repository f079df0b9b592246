# amaranth: UnusedElaboratable=no
"""Synthesis figures: one real Yosys run on a PE; scaling and caching with a stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rtl_gen.tools.synth as synth_mod
from accel_dse.design_files import load_preset
from rtl_gen import PE, default_cache_dir, synth_component, synth_stats


def test_one_pe_synthesises_with_its_registers() -> None:
    figures = synth_component(PE(dataflow="ws", input_bits=8, acc_bits=32), "pe")
    # a (8) + stationary weight (8) + partial sum (32) flip-flops
    assert figures["flops"] == 48
    assert figures["cells"] > figures["flops"]
    # an 8x8 multiplier and a 32-bit adder cannot take fewer than ~1000 transistors
    assert figures["transistors"] > 1000


class _FakeYosys:
    """Stands in for Yosys: deterministic figures per component name, counts calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, component: Any, name: str, **_: Any) -> dict[str, Any]:
        self.calls.append(name)
        base = 10 + len(self.calls) if name.startswith("pe") else len(name)
        return {"cells": base, "flops": 1, "transistors": 7 * base, "seconds": 0.0}


def test_synth_stats_scales_pieces_and_caches_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeYosys()
    monkeypatch.setattr(synth_mod, "synth_component", fake)
    tiny = load_preset("tiny")  # 4x4 WS, ifmap 4 KiB (1024 words), ofmap 8 KiB (512 words)
    stats = synth_stats(tiny, cache_dir=tmp_path)
    parts = stats["parts"]
    assert parts["pe"]["count"] == 12  # rows 1..3
    assert parts["pe_top_row"]["count"] == 4  # row 0 adds to a constant 0
    assert parts["controller"]["count"] == 1
    assert parts["operand_gate_lane"]["count"] == 4 + 4
    assert parts["ofmap_update_lane"]["count"] == 4
    assert parts["output_stage_lane"]["count"] == 4  # one requantising lane per column
    # bank control delay lines, lane i i cycles late: x and y (10-bit address + enable) 3 registers
    # each, ofmap (9-bit address + enable + add) 4 (one per lane: the write is a tap later);
    # 1 bit: read-valid flags 4 x + 4 y lanes, first-marker line 3 (the shadow PEs swap on it);
    # 2 bits: column strobe + phase, 3 (column c c cycles late); the run's base addresses
    # (10 + 10 + 9 bits) and, double buffered, the host's ofmap half (1 bit)
    assert {k: v["count"] for k, v in parts.items() if k.startswith("stage_")} == {
        "stage_1b": 11 + 1, "stage_2b": 3, "stage_11b": 3 + 3 + 4, "stage_29b": 1,
    }
    for part in ("dma_load", "dma_store", "sequencer", "control_registers"):  # the memory system, once each
        assert parts[part]["count"] == 1
    assert stats["total"]["cells"] == sum(p["cells"] * p["count"] for p in parts.values())
    assert stats["total"]["transistors"] == 7 * stats["total"]["cells"]
    assert stats["array"]["cells"] == 12 * parts["pe"]["cells"] + 4 * parts["pe_top_row"]["cells"]
    assert not any(p["cached"] for p in parts.values())
    first_calls = len(fake.calls)
    assert first_calls == len(parts)

    again = synth_stats(tiny, cache_dir=tmp_path)
    assert len(fake.calls) == first_calls  # everything from the cache
    assert all(p["cached"] for p in again["parts"].values())
    assert again["total"] == stats["total"]

    # another accumulator width needs a new PE but reuses nothing it should not
    wider = synth_stats(tiny.__class__(**{**tiny.to_dict(), "acc_bits": 40}), cache_dir=tmp_path)
    assert not wider["parts"]["pe"]["cached"]
    assert wider["parts"]["operand_gate_lane"]["cached"]  # same 8-bit gate

    plain = synth_stats(tiny.__class__(**{**tiny.to_dict(), "shadow_stationary": False}), cache_dir=tmp_path)
    # no shadow: no first-marker line for WS, the column strobe alone
    assert {k: v["count"] for k, v in plain["parts"].items() if k.startswith("stage_")} == {
        "stage_1b": 8 + 3 + 1, "stage_11b": 3 + 3 + 4, "stage_29b": 1,
    }
    assert not plain["parts"]["pe"]["cached"]  # the plain PE is another piece of logic

    synth_stats(tiny, use_cache=False)
    assert len(fake.calls) > first_calls + len(parts)  # no cache: synthesised again


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCEL_DSE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("ACCEL_DSE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "accel-dse"


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("shadow", [True, False])
@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("rows,cols,kib",
                         [(4, 4, (4, 4, 8)), (3, 5, (1, 2, 1)), (1, 7, (1, 1, 1)), (16, 2, (64, 8, 32))])
def test_area_model_counts_the_registers_the_accelerator_has(rows, cols, kib, dataflow, shadow, double) -> None:
    """perf_model prices the flops outside the PEs from its own count; it must be rtl_gen's."""
    from accel_spec.config import ArrayConfig
    from perf_model.physical.design_area import skew_register_bits
    from perf_model.timing import dataflow_code
    from rtl_gen import Accelerator

    config = ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kib=kib[0], weight_sram_kib=kib[1],
                         ofmap_sram_kib=kib[2], shadow_stationary=shadow, double_buffered=double)
    rtl = sum(width * count for width, count in Accelerator(config).register_stages().items())
    outside, _ = skew_register_bits(rows, cols, dataflow_code(dataflow), 8, 32, kib, shadow, config.double_buffered)
    assert float(outside) == rtl


def test_a_float_design_synthesises_its_own_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bf16 design's pieces are the bf16 PE (every row: no integer top-row cell), the float32
    fold adder and the bf16 output lane, cached apart from the integer ones."""
    built: dict[str, Any] = {}

    class _Recording(_FakeYosys):
        def __call__(self, component: Any, name: str, **kw: Any) -> dict[str, Any]:
            built[name] = component
            return super().__call__(component, name, **kw)

    fake = _Recording()
    monkeypatch.setattr(synth_mod, "synth_component", fake)
    tiny = load_preset("tiny")
    synth_stats(tiny, cache_dir=tmp_path)
    bf16 = tiny.__class__(**{**tiny.to_dict(), "input_bits": 16, "weight_format": "bf16", "act_format": "bf16",
                             "clock_mhz": 200.0})
    parts = synth_stats(bf16, cache_dir=tmp_path)["parts"]
    assert parts["pe"]["count"] == 16 and "pe_top_row" not in parts
    for part in ("pe", "ofmap_update_lane", "output_stage_lane"):
        assert not parts[part]["cached"]
    assert built["pe"].number_format == built["update"].number_format == built["ostage"].number_format == "bf16"


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("weight,act", [("int4", "int4"), ("int4", "int8"), ("int8", "int4")])
def test_area_model_counts_the_registers_of_a_packed_int4_design(dataflow, weight, act) -> None:
    """A packed int4 buffer holds twice the words (4-bit lanes), so its lane controls carry one
    more address bit; the model's count follows ``DesignArrays.operand_bits``."""
    import dataclasses

    from accel_spec.config import ArrayConfig
    from perf_model.arrays.designs import DesignArrays
    from perf_model.physical.design_area import skew_register_bits
    from perf_model.timing import dataflow_code
    from rtl_gen import Accelerator

    kib = (1, 2, 4)
    config = ArrayConfig(rows=4, cols=6, dataflow=dataflow, ifmap_sram_kib=kib[0], weight_sram_kib=kib[1],
                         ofmap_sram_kib=kib[2], weight_format=weight, act_format=act, pack_int4=True)
    rtl = sum(width * count for width, count in Accelerator(config).register_stages().items())
    plain = dataclasses.replace(config, pack_int4=False)
    rtl_plain = sum(width * count for width, count in Accelerator(plain).register_stages().items())
    bits = DesignArrays.from_configs([config]).operand_bits()[:2]
    outside, _ = skew_register_bits(4, 6, dataflow_code(dataflow), 8, 32, kib, config.shadow_stationary,
                                    config.double_buffered, bits)
    assert float(outside[0]) == rtl > rtl_plain
