"""A checksum design's SoC (Amaranth's simulator, 2 x 2, programs from DRAM): bit-exact and
cycle-equal to the program walk without a fault; with a faulty PE, ERROR_CODE 8 at the first
RUN (SDC_CTRL.STOP) or a finished program that counted the mismatches (STOP clear), on WS and IS."""

from __future__ import annotations

import numpy as np
import pytest
from system_testlib import result, run_soc, small

from accel_spec.isa import ERROR_SDC, Opcode
from rtl_gen import Fault
from rtl_gen.soc.regmap import CONTROL_REGMAP
from workloads.ops import Requant

SDC_IRQ = 1 << CONTROL_REGMAP["IRQ_STATUS"].field("SDC").lsb


def _operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # no zero operand: the fault always shows. 18 x 8 x 8 still runs as two RUNs on both dataflows.
    return rng.integers(1, 64, (18, 8)), rng.integers(1, 64, (8, 8))


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_checksum_soc_is_exact_then_stops_or_counts_at_a_fault(dataflow):
    config = small(dataflow, checksum="detect")
    a, b = _operands()
    clean = run_soc(config, a, b, sdc_stop=True)
    assert clean.error_code == 0 and clean.status == 0b010
    np.testing.assert_array_equal(result(clean), a @ b)
    assert clean.total == clean.model.total and clean.compute == clean.model.compute
    assert clean.sdc_count == 0 and not clean.irq_status & SDC_IRQ

    runs = [i for i, c in enumerate(clean.program.commands) if c.opcode == Opcode.RUN]
    assert len(runs) > 1
    fault = Fault(row=1, col=0, bit=4, stuck=1)
    stopped = run_soc(config, a, b, fault=fault, sdc_stop=True)
    assert (stopped.error_code, stopped.error_pc) == (ERROR_SDC, runs[0])  # the first RUN, by its index
    assert stopped.status == 0b100 and stopped.sdc_count >= 1 and stopped.sdc_pc == runs[0]
    assert stopped.irq_status & SDC_IRQ

    counted = run_soc(config, a, b, fault=fault, sdc_stop=False)
    assert counted.error_code == 0 and counted.status == 0b010  # ran to the end ...
    assert not np.array_equal(result(counted), a @ b)  # ... with a wrong result, but not silently:
    assert counted.sdc_count >= len(runs) and counted.sdc_pc == runs[-1] and counted.irq_status & SDC_IRQ


def _requant(n: int) -> Requant:
    return Requant(multiplier=tuple((1 << 30) + (i << 26) for i in range(n)), shift=(4,), bias=(3,), zero_point=0,
                   act_min=-128, act_max=127)


def _q_bit(dut):  # the output stage's last register (q), lane 0's bit 2, stuck at 1
    return dut.soc.core.output_stage.q, 2, 1


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_output_stage_fault_stops_at_the_store_that_read_it(dataflow):
    config = small(dataflow, checksum="detect")
    rng = np.random.default_rng(4)
    a, b = rng.integers(-20, 20, (6, 9)), rng.integers(-20, 20, (9, 5))
    clean = run_soc(config, a, b, requant=_requant(5), sdc_stop=True)
    assert clean.error_code == 0 and clean.sdc_count == 0 and not clean.irq_status & SDC_IRQ
    assert clean.total == clean.model.total

    stores = [i for i, c in enumerate(clean.program.commands) if c.opcode == Opcode.STORE and c["requant"]]
    assert stores
    stopped = run_soc(config, a, b, requant=_requant(5), sdc_stop=True, force=_q_bit)
    assert (stopped.error_code, stopped.error_pc) == (ERROR_SDC, stores[0])  # the STORE, not a RUN
    assert stopped.sdc_count >= 1 and stopped.sdc_pc == stores[0] and stopped.irq_status & SDC_IRQ

    plain = run_soc(small(dataflow), a, b, requant=_requant(5), sdc_stop=True, force=_q_bit)
    assert plain.error_code == 0 and plain.sdc_count == 0  # unprotected: the same fault passes silently
