"""The checksum option (``checksum = "detect"``) in RTL, on Amaranth's simulator (small arrays):
bit-exact and cycle-equal to the model without a fault, silent in fault-free runs, a fault in
each protected place detected on every dataflow it supports, OS refused with its reason."""

from __future__ import annotations

import numpy as np
import pytest
from rtl_testlib import run_gemms, wrap

from accel_dse.config import ArrayConfig
from accel_dse.errors import ConfigError
from accel_dse.sdc._sim import simulate_trials
from accel_dse.sdc.places import FaultSpec
from perf_model import timing
from rtl_gen import Accelerator, Fault

FLOWS = ("ws", "is")


def _config(flow: str, shadow: bool = True) -> ArrayConfig:
    return ArrayConfig(rows=3, cols=4, dataflow=flow, checksum="detect", shadow_stationary=shadow)


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("shadow", [True, False])
def test_protected_design_is_bit_exact_and_cycle_equal(flow, shadow):
    config = _config(flow, shadow)
    rng = np.random.default_rng(7)
    runs = [(rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n)), False)
            for m, k, n in ((5, 7, 9), (1, 3, 4), (8, 2, 3))]
    results = run_gemms(config, runs, rng=rng)  # pad lanes random: the checksum carries them alike
    for (a, b, _), got in zip(runs, results, strict=True):
        assert np.array_equal(got.c, wrap(a @ b, 32))
        model = int(timing.run_cycles(timing.dataflow_code(flow), 3, 4, a.shape[0], a.shape[1], b.shape[1], shadow))
        assert got.ticks == got.cycles == model


def _operands(rng: np.random.Generator, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    # in [1, 63]: no zero and bit 6 clear, so a stuck-at-1 on bit 6 changes every operand it holds
    return rng.integers(1, 64, (m, k)), rng.integers(1, 64, (k, n))


@pytest.mark.parametrize("flow", FLOWS)
def test_a_fault_in_each_protected_place_is_detected(flow):
    config = _config(flow)
    rng = np.random.default_rng(3)
    faults = [None,
              FaultSpec("pe_psum", (2, 1, "v"), 20, "stuck1", 0),
              FaultSpec("pe_weight", (1, 2, "s"), 6, "stuck1", 0),
              FaultSpec("pe_weight", (0, 3, "w"), 6, "stuck1", 0),
              FaultSpec("pe_operand", (1, 2, "a"), 6, "stuck1", 0),
              None]
    trials = [(*_operands(rng, 5, 6, 7), f) for f in faults]
    outcomes = simulate_trials(config, trials)
    for (a, b, fault), (c, flagged) in zip(trials, outcomes, strict=True):
        correct = np.array_equal(c, wrap(a @ b, 32))
        if fault is None:
            assert correct and not flagged
        else:
            assert not correct, fault  # the fault corrupted the output ...
            assert flagged, fault  # ... and the checksum saw it


def test_unprotected_design_flags_nothing_and_stuck_pe_is_caught():
    rng = np.random.default_rng(5)
    a, b = _operands(rng, 4, 5, 6)
    plain = ArrayConfig(rows=3, cols=4, dataflow="ws")
    (c, flagged), = simulate_trials(plain, [(a, b, FaultSpec("pe_psum", (0, 0, "v"), 9, "stuck1", 0))])
    assert not np.array_equal(c, wrap(a @ b, 32)) and not flagged
    # the test-only stuck product bit still makes a wrong design, and the checksum sees it
    (c, flagged), = simulate_trials(_config("ws"), [(a, b, None)], pe_fault=Fault(row=1, col=2, bit=4, stuck=1))
    assert not np.array_equal(c, wrap(a @ b, 32)) and flagged


def test_checksum_refuses_os_with_its_reason():
    with pytest.raises(ConfigError, match="checksum 'detect' is built for dataflows ws, is, not os"):
        Accelerator(ArrayConfig(rows=2, cols=2, dataflow="os", checksum="detect"))


def test_unprotected_design_has_no_sdc_ports():
    assert "sdc" not in Accelerator(ArrayConfig(rows=2, cols=2)).signature.members
    assert "sdc" in Accelerator(ArrayConfig(rows=2, cols=2, checksum="detect")).signature.members


def test_hierarchical_export_of_a_checksum_design_converts():
    from amaranth.back import verilog

    from rtl_gen.tools.verilog_export import export_units

    units = export_units(ArrayConfig(rows=2, cols=3, checksum="detect"))
    texts = {name: verilog.convert(unit, name=name, emit_src=False) for name, unit in units}
    top = units[0][0]
    assert "sdc_event" in texts[top] and "a_edge" in texts[f"{top}_row"]
