"""The power-density limit as a design field (``ArrayConfig.max_power_density_w_mm2``): checked, left
out of the hash, applied per design by the model (per-op totals and the one program's walk alike),
and usable by a space (fixed in ``[params]``, or ``power_density_w_mm2`` as a constraint)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_dse.search import ModelEvaluator, parse_space
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from perf_model.arrays.designs import DesignArrays

_GEMM = "gemm:m=256,k=256,n=256"
_BASE = ArrayConfig(rows=32, cols=32, tech_nm=7, clock_mhz=1500.0)


def test_the_default_is_the_h100_bound_rounded_up():
    # 700 W over 814 mm^2 (H100 SXM5) is 0.86 W/mm^2; the default rounds it up to 1.0
    assert ArrayConfig(rows=4, cols=4).max_power_density_w_mm2 == 1.0
    assert 700 / 814 == pytest.approx(0.86, abs=0.005) and 700 / 814 < 1.0


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, 2e6, "1", True, None])
def test_a_bad_limit_is_one_line_naming_the_field(bad):
    with pytest.raises(ConfigError) as info:
        ArrayConfig(rows=4, cols=4, max_power_density_w_mm2=bad)
    text = str(info.value)
    assert text.startswith("max_power_density_w_mm2 must be") and "\n" not in text and repr(bad) in text


def test_an_int_limit_is_kept_as_a_float_and_the_hash_ignores_the_limit():
    c = ArrayConfig(rows=4, cols=4, max_power_density_w_mm2=2)
    assert isinstance(c.max_power_density_w_mm2, float) and c.max_power_density_w_mm2 == 2.0
    assert c.config_hash == ArrayConfig(rows=4, cols=4).config_hash  # a budget, not hardware
    assert c.config_hash != ArrayConfig(rows=4, cols=8).config_hash  # the hash still sees hardware


def test_design_arrays_carry_the_limit_and_check_it():
    d = DesignArrays.from_columns(rows=[4, 8], cols=4, max_power_density_w_mm2=[0.5, 3])
    assert d.max_power_density_w_mm2.dtype == np.float64 and d.max_power_density_w_mm2.tolist() == [0.5, 3.0]
    assert d.config(1).max_power_density_w_mm2 == 3.0
    assert DesignArrays.from_columns(rows=4, cols=4).max_power_density_w_mm2.tolist() == [1.0]
    with pytest.raises(Exception, match=r"max_power_density_w_mm2\[1\] must be a positive finite number"):
        DesignArrays.from_columns(rows=4, cols=4, max_power_density_w_mm2=[1.0, -2.0])


def test_each_design_is_held_to_its_own_limit():
    wl = workloads.resolve(_GEMM)
    density = perf_model.evaluate(_BASE, wl).total["power_density_w_mm2"]
    assert density > 0
    limits = [density * 0.9, density * 1.1, 1.0]  # over, under, the default
    designs = DesignArrays.from_configs([dataclasses.replace(_BASE, max_power_density_w_mm2=x) for x in limits])
    table = perf_model.evaluate_designs(designs, wl)
    assert table.feasible.tolist() == [False, True, density <= 1.0]
    assert f"max_power_density_w_mm2 = {density * 0.9:g} W/mm^2" in table.reason[0]
    assert f"{density:.2f} W/mm^2" in table.reason[0]
    # the feasible one's density is the same design's: the limit changes nothing else
    assert table.power_density_w_mm2[1] == pytest.approx(density, rel=1e-12)


def test_the_one_programs_walk_is_held_to_the_designs_limit():
    wl = workloads.resolve("resnet18:res=32")
    config = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    walk = perf_model.evaluate_designs(DesignArrays.from_configs([config]), wl)
    assert walk.feasible[0]
    density = float(walk.power_density_w_mm2[0])
    tight = dataclasses.replace(config, max_power_density_w_mm2=density * 0.99)
    loose = dataclasses.replace(config, max_power_density_w_mm2=density * 1.01)
    table = perf_model.evaluate_designs(DesignArrays.from_configs([tight, loose]), wl)
    assert table.feasible.tolist() == [False, True]
    assert "power density" in table.reason[0] and f"{density * 0.99:g}" in table.reason[0]


def _space(params_extra: dict, constraints: list[str]) -> object:
    return parse_space({
        "name": "dense", "objectives": ["latency"], "constraints": constraints,
        "workloads": [{"spec": _GEMM}],
        "params": {"rows": 32, "cols": 32, "tech_nm": 7, "clock_mhz": 1500.0, **params_extra},
    })


def test_a_space_constrains_power_density_by_name_and_fixes_the_limit():
    wl = workloads.resolve(_GEMM)
    density = perf_model.evaluate(_BASE, wl).total["power_density_w_mm2"]
    space = _space({}, [f"power_density_w_mm2 <= {density / 2}"])
    (constraint,) = space.constraints
    assert constraint.metric == "power_density_w_mm2"
    design = space.design({})
    metrics = ModelEvaluator([("g", 1.0, wl)]).evaluate(design).metrics
    assert metrics["power_density_w_mm2"] == pytest.approx(density, rel=1e-12)
    assert constraint.violation(metrics["power_density_w_mm2"]) == pytest.approx(density / 2)
    # the limit fixed in [params]: every design of the space carries it, and past it is infeasible
    tight = _space({"max_power_density_w_mm2": density / 2}, [])
    assert tight.design({}).max_power_density_w_mm2 == pytest.approx(density / 2)
    evaluation = ModelEvaluator([("g", 1.0, wl)]).evaluate(tight.design({}))
    assert not evaluation.feasible and "power density" in evaluation.reason


def test_a_bad_limit_in_a_space_is_one_line():
    with pytest.raises(ConfigError, match="max_power_density_w_mm2 must be a positive finite number, not -1"):
        _space({"max_power_density_w_mm2": -1}, [])
