"""The clock a design's logic reaches: critical-path delay per pipeline stage at ``tech_nm`` (internal).

Every stage is a register-to-register path, its delay counted in FO4 inverter delays and
converted to time with the node's FO4 (:func:`perf_model.physical.technology.fo4_ps`)::

    period(stage) = (depth_fo4(stage) + SEQUENCING_FO4) * fo4_ps(tech_nm)
    f_max         = 1 / max over stages of period(stage)      (at the node's nominal supply)

Depths of the logic stages come from our own RTL synthesised with Yosys and ABC
(``bench/fmax_calibration.py``: longest path of the mapped netlist on a logical-effort gate
model; the fit and its measured points are in ``perf_model/physical/fmax_fit.py``):

* ``pe``: the PE's multiply-accumulate (``input_bits`` product into the ``acc_bits`` sum),
  ``c0 + c1 * input_bits + c2 * log2(acc_bits)`` per PE cell (WS, also IS; OS);
* ``output_stage``: the deepest of the requantisation lane's register stages
  (``rtl_gen.core.output_stage``: ``OUTPUT_STAGE_LATENCY`` stages, the 32 x 32 multiply as four
  16 x 16 products summed over the next two, carry chains of at most 35 bits each),
  ``c0 + c1 * input_bits + c2 * log2(acc_bits)`` with ``out_bits = input_bits``, per lane: 65 to
  69 FO4 measured, below both PE cells at 8 or 16 bits with accumulators of 32 bits or more
  (the shipped designs), so it sets f_max only where the PE is shallow and the controller too
  (8-bit WS/IS with 16- to 28-bit accumulators);
* ``controller``: the fold sequencer and address generator, per dataflow (its deepest point).

``sram``: the buffer's access time, which Yosys does not see (the buffers are memories). After
B. S. Amrutur and M. A. Horowitz, "Speed and power scaling of SRAMs", IEEE JSSC 35(2), 2000
(an optimally organised SRAM's delay grows with the log of its size while gates dominate):
``SRAM_BASE_FO4 + SRAM_FO4_PER_DOUBLING * log2(bank KiB)`` from 1 KiB, with banks of at most
``SRAM_MACRO_KIB`` (a larger buffer is built of macros of that size; the wires between them
are not modelled). A double-buffered buffer's bank is half of it. The coefficients are our
assumption, not a measurement.

``SEQUENCING_FO4``: flip-flop clock-to-output and setup plus clock skew and jitter, 3 FO4
(Hrishikesh et al., ISCA 2002, count 1.8 FO4 of latch overhead and about 1 FO4 of skew and
jitter). The result is an estimate for a typical corner at nominal supply: synthesis here does
no gate sizing or timing-driven restructuring beyond the adder and multiplier architectures.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perf_model import timing
from perf_model.arrays.designs import DesignArrays
from perf_model.physical import fmax_fit as fit
from perf_model.physical.format_cost import format_cost, pe_cell_codes
from perf_model.physical.technology import fo4_ps

__all__ = ["STAGES", "SEQUENCING_FO4", "stage_depths_fo4", "fmax_mhz", "fo4_ps", "pe_depth_fo4",
           "clock_reason", "output_stage_depth_fo4", "design_fmax"]

#: Pipeline stages that bound ``f_max``, in report order (module docstring).
STAGES = ("pe", "output_stage", "controller", "sram")
#: What each stage is, for reasons.
STAGE_TEXT = {
    "pe": "PE multiply-accumulate", "output_stage": "output stage (requantisation)",
    "controller": "controller", "sram": "SRAM access",
}
SEQUENCING_FO4 = 3.0
SRAM_BASE_FO4 = 12.0
SRAM_FO4_PER_DOUBLING = 1.5
SRAM_MACRO_KIB = 64.0
_OS = timing.DATAFLOW_CODES["os"]
_CTRL = np.array([fit.CONTROLLER_FO4[name] for name, _ in sorted(timing.DATAFLOW_CODES.items(), key=lambda kv: kv[1])])


def _linear(coef: tuple[float, float, float], ib: np.ndarray, ab: np.ndarray) -> np.ndarray:
    return coef[0] + coef[1] * ib + coef[2] * np.log2(ab)


def pe_depth_fo4(input_bits: Any, acc_bits: Any, dataflow: Any) -> np.ndarray:
    """Logic depth of the PE's multiply-accumulate, FO4 (the Yosys fit; dataflow codes)."""
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    return np.where(np.asarray(dataflow) == _OS, _linear(fit.PE_FO4["os"], ib, ab), _linear(fit.PE_FO4["ws"], ib, ab))


def sram_depth_fo4(bank_kib: Any) -> np.ndarray:
    """Access time of an SRAM bank of ``bank_kib`` KiB, FO4 (module docstring)."""
    kib = np.clip(np.asarray(bank_kib, dtype=np.float64), 1.0, SRAM_MACRO_KIB)
    return SRAM_BASE_FO4 + SRAM_FO4_PER_DOUBLING * np.log2(kib)


def stage_depths_fo4(dataflow: Any, input_bits: Any, acc_bits: Any, kib: tuple[Any, Any, Any],
                     double_buffered: Any, weight_format: Any = 0) -> np.ndarray:
    """Logic depth of each stage of :data:`STAGES`, FO4, shape ``(len(STAGES), designs)``; a float
    operand format (``weight_format`` codes) takes its cells' depths (``perf_model.physical.format_cost``)."""
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    largest = np.max(np.stack([np.asarray(k, dtype=np.float64) for k in kib]), axis=0)
    bank = largest / np.where(double_buffered, 2.0, 1.0)
    fmt = format_cost(weight_format, dataflow, ab)
    return np.stack(np.broadcast_arrays(
        np.where(fmt.has_lane, fmt.pe_fo4, pe_depth_fo4(ib, ab, dataflow)),  # int4 PE: the integer depth
        np.where(fmt.has_lane, fmt.output_fo4, output_stage_depth_fo4(ib, ab)),
        _CTRL[np.asarray(dataflow, dtype=np.int64)], sram_depth_fo4(bank)))


def output_stage_depth_fo4(input_bits: Any, acc_bits: Any) -> np.ndarray:
    """Logic depth of the output stage's deepest register stage, FO4 (the Yosys fit)."""
    return _linear(fit.OUTPUT_STAGE_FO4, np.asarray(input_bits, dtype=np.float64),
                   np.asarray(acc_bits, dtype=np.float64))


def fmax_mhz(depths_fo4: np.ndarray, tech_nm: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(f_max in MHz, index of the critical stage)`` of designs with stage depths ``depths_fo4``."""
    critical = np.argmax(depths_fo4, axis=0)
    worst = np.take_along_axis(depths_fo4, critical[None], axis=0)[0]
    return 1e6 / ((worst + SEQUENCING_FO4) * fo4_ps(tech_nm)), critical


def clock_reason(clock_mhz: float, f_max: float, tech_nm: int, stage: int, depth_fo4: float) -> str:
    """The reason a design cannot run at ``clock_mhz``: the clock, f_max and the stage that limits it."""
    return (f"clock_mhz = {clock_mhz:g} exceeds f_max = {f_max:.0f} MHz at {tech_nm} nm: the "
            f"{STAGE_TEXT[STAGES[stage]]} path is {depth_fo4:.1f} FO4 + {SEQUENCING_FO4:g} FO4 of register overhead "
            f"at {float(fo4_ps(tech_nm)):.1f} ps per FO4")


def design_fmax(config: Any) -> dict[str, Any]:
    """Timing of one ``ArrayConfig``: f_max, its critical stage, every stage's depth and period.

    Returns:
        ``{"f_max_mhz", "critical", "fo4_ps", "stages": {name: {"fo4", "period_ps", "f_mhz"}}, "clock_ok",
        "reason"}`` (``stages`` in :data:`STAGES` order; ``reason`` ``""`` when the clock is met).
    """
    d = DesignArrays.from_configs([config])
    kib = (d.ifmap_sram_kib, d.weight_sram_kib, d.ofmap_sram_kib)
    depths = stage_depths_fo4(d.dataflow, d.input_bits, d.acc_bits, kib, d.double_buffered,
                              pe_cell_codes(d.weight_format, d.act_format, d.pack_int4))
    f_max, critical = fmax_mhz(depths, d.tech_nm)
    unit = float(fo4_ps(config.tech_nm))

    def entry(fo4: float) -> dict[str, float]:
        period = (fo4 + SEQUENCING_FO4) * unit
        return {"fo4": fo4, "period_ps": period, "f_mhz": 1e6 / period}

    stages = {name: entry(float(depths[s, 0])) for s, name in enumerate(STAGES)}
    ok = config.clock_mhz <= float(f_max[0])
    stage = int(critical[0])
    return {
        "f_max_mhz": float(f_max[0]), "critical": STAGES[stage], "fo4_ps": unit, "stages": stages,
        "clock_ok": ok,
        "reason": "" if ok else clock_reason(config.clock_mhz, float(f_max[0]), config.tech_nm, stage,
                                              float(depths[stage, 0])),
    }
