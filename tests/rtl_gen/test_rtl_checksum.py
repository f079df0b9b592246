"""The checksum option (``checksum = "detect"``) in RTL, on Amaranth's simulator (small arrays):
bit-exact and cycle-equal to the model without a fault, OS refused with its reason, the ports and
the export. A fault in each protected place: ``tests/simulate/test_sim_sdc_campaign.py`` (the
campaign's Verilator bench) and ``test_rtl_system_checksum.py`` (the SoC's ERROR_CODE and SDC_PC)."""

from __future__ import annotations

import numpy as np
import pytest
from rtl_testlib import run_gemms, wrap

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from perf_model import timing
from rtl_gen import Accelerator

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


def test_checksum_refuses_os_with_its_reason():
    with pytest.raises(ConfigError, match="checksum 'detect' is built for dataflows ws, is, not os"):
        Accelerator(ArrayConfig(rows=2, cols=2, dataflow="os", checksum="detect"))


def test_unprotected_design_has_no_sdc_ports():
    assert "sdc" not in Accelerator(ArrayConfig(rows=2, cols=2)).signature.members
    members = Accelerator(ArrayConfig(rows=2, cols=2, checksum="detect")).signature.members
    assert {"sdc", "sdc_count", "sdc_event", "host_qcheck", "sdc_qevent"} <= set(members)


def test_hierarchical_export_of_a_checksum_design_converts():
    from amaranth.back import verilog

    from rtl_gen.tools.verilog_export import export_units

    units = export_units(ArrayConfig(rows=2, cols=3, checksum="detect"))
    texts = {name: verilog.convert(unit, name=name, emit_src=False) for name, unit in units}
    top = units[0][0]
    assert "sdc_event" in texts[top] and "a_edge" in texts[f"{top}_row"]
