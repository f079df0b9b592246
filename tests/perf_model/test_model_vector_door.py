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
    formats = [("fp8_e4m3", "fp8_e4m3", 48), ("fp8_e5m2", "fp8_e5m2", 32), ("int4", "int4", 32), ("int8", "int4", 32)]
    d = perf_model.DesignArrays.from_columns(rows=8, cols=8, vector_unit=True, clock_mhz=300.0,
                                             weight_format=np.array([w for w, _, _ in formats]),
                                             act_format=np.array([a for _, a, _ in formats]),
                                             acc_bits=np.array([acc for *_, acc in formats]))
    table = perf_model.evaluate_designs(d, workloads.resolve(SPEC))
    assert table.feasible.all(), table.reason
    assert (table.vector_cycles == table.vector_cycles[0]).all() and table.vector_cycles[0] > 0  # one unit
    packed = {"weight_format": "int4", "act_format": "int4", "pack_int4": True}
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
