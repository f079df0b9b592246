"""The vectorised model takes the designs whose fp8 or int4 activations reach the vector unit through
its door (accel_spec.vector_door), as ArrayConfig does, and prices their vector ops as the int8
unit's: the door is combinational, so the unit's cycles are the same (the RTL's totals equal the
walk: tests/simulate/test_sim_vector_door.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError, ModelError

SPEC = "bert_base:seq=16,d=32,heads=2,ffn=64"


def test_the_columns_take_the_door_formats_and_refuse_what_arrayconfig_refuses():
    formats = [("fp8_e4m3", "fp8_e4m3", 48), ("fp8_e5m2", "fp8_e5m2", 32), ("int4", "int4", 32), ("int8", "int4", 32),
               ("bf16", "bf16", 32)]
    d = perf_model.DesignArrays.from_columns(rows=8, cols=8, vector_unit=True, clock_mhz=250.0,
                                             weight_format=np.array([w for w, _, _ in formats]),
                                             act_format=np.array([a for _, a, _ in formats]),
                                             acc_bits=np.array([acc for *_, acc in formats]),
                                             input_bits=np.array([16 if a == "bf16" else 8 for _, a, _ in formats]))
    table = perf_model.evaluate_designs(d, workloads.resolve(SPEC))
    assert table.feasible.all(), table.reason
    byte_lanes = table.vector_cycles[:4]  # one unit, one program: the same cycles
    assert (byte_lanes == byte_lanes[0]).all() and byte_lanes[0] > 0
    assert table.vector_cycles[4] > 0  # bf16: its vector ops op by op (no block program: no transpose)
    packed = {"weight_format": "int4", "act_format": "int4", "pack_int4": True}
    with pytest.raises(ModelError, match="vector_unit"):
        perf_model.DesignArrays.from_columns(rows=8, cols=8, vector_unit=True, input_bits=16, acc_bits=32)
    with pytest.raises(ModelError, match="vector_unit.*unpacked"):
        perf_model.DesignArrays.from_columns(rows=8, cols=8, vector_unit=True, **packed)
    with pytest.raises(ConfigError, match="packed two a byte"):
        ArrayConfig(rows=8, cols=8, vector_unit=True, **packed)


@pytest.mark.parametrize("fmt,acc", [("fp8_e4m3", 48), ("int4", 32)])
def test_a_door_designs_vector_cycles_are_the_int8_units(fmt, acc):
    """Same array, same unit: the one program's vector cycles equal the int8 design's."""
    base = load_design("edge")
    door = dataclasses.replace(base, weight_format=fmt, act_format=fmt, acc_bits=acc)
    wl = workloads.resolve(SPEC)
    a, b = perf_model.evaluate(base, wl).network, perf_model.evaluate(door, wl).network
    assert a is not None and b is not None
    assert b["vector_cycles"] == a["vector_cycles"] > 0 and b["vector_ops"] == a["vector_ops"]


def test_a_bf16_design_runs_no_transformer_block_as_one_program():
    """Its 16-bit lanes: the unit's transpose tile holds bytes, so the keys' transpose cannot run and
    the one-program figure says why (the vector ops still run on the unit, op by op)."""
    bf16 = dataclasses.replace(load_design("tiny-vector"), weight_format="bf16", act_format="bf16", clock_mhz=250.0)
    result = perf_model.evaluate(bf16, workloads.resolve(SPEC))
    assert result.network is not None
    assert "transposes its keys on the vector unit, whose tile holds bytes" in result.network["reason"]


def test_a_bf16_designs_vector_ops_move_two_bytes_an_element_and_the_door_is_charged():
    """A bf16 design's per-op vector traffic is twice the int8 one's (2-byte elements, as its program
    moves them); a door design's unit is bigger by its converters: at 4 lanes fp8_e4m3's door
    measured 1,546 µm^2 beside the unit's 174,727 (bench/vector_door_area.py, docs/formats.md)."""
    from perf_model.compiler.vector_walk import COMPILER_WALKS
    from perf_model.evaluator.vector_work import vector_columns
    from perf_model.physical.energy import DEFAULT_ENERGY
    from workloads.vector_ops import VectorOp

    add = VectorOp(kind="add", shape=(8, 64), params=(("mult_a", 1 << 14), ("mult_b", 1 << 14), ("shift", 14)),
                   name="residual")  # 512 elements, two operands in, one out
    d = perf_model.DesignArrays.from_columns(rows=4, cols=4, vector_unit=True, clock_mhz=250.0,
                                             input_bits=np.array([8, 16, 8]), acc_bits=np.array([32, 32, 32]),
                                             weight_format=np.array(["auto", "bf16", "fp8_e4m3"]),
                                             act_format=np.array(["auto", "bf16", "fp8_e4m3"]))
    v = vector_columns(d, [(add, 1)], DEFAULT_ENERGY, np.ones(3), walks=COMPILER_WALKS)
    assert v.dram_read[0] == 2 * 512 and v.dram_write[0] == 512  # int8: a byte an element
    assert v.dram_read[1] == 2 * v.dram_read[0] and v.dram_write[1] == 2 * v.dram_write[0]
    assert v.area_mm2[2] / v.area_mm2[0] - 1 == pytest.approx(1546 / 174727, rel=0.02)
