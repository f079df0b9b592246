"""Fmax of a design's accelerator top on Lattice ECP5, without place and route.

The critical path of the top is the slower of two register-to-register paths, each a fixed
chain of cells (nextpnr's critical-path report names both ends, see docs/fpga.md)::

    PE MAC path      operand bank EBR output -> operand gate -> MULT18X18D -> acc-bit adder -> PE register
                     (OS: the adder accumulates in place, one more select: slower)
    output stage     qparam/ofmap EBR output -> bias add and int32 saturation -> 32 x 32 Q31
                     multiply (4 MULT18X18D and the adders joining them) -> product register

Each path's delay is its logic plus routing; the routing grows as the design spreads over the
die, with its side, so with the square root of the PE count (measured: the output-stage path
from 24.6 ns at 4 PEs to 30.5 ns at 64)::

    path_ns  = base_ns (+ os_extra_ns for the PE path of OS) + per_step_ns * sqrt(R * C)
    output stage: + per_acc_bit_ns * (acc_bits - 32)   (the bias add and the saturating compare
                                                        before the multiply are acc_bits wide)
    fmax_mhz = 1000 / max(pe_ns, output_stage_ns)

The terms are fitted by ``bench/fpga_resources.py`` to nextpnr's post-route critical paths on
our own RTL (Yosys 0.70, nextpnr-ecp5 0.11.1, seed 1, ECP5-85k out of context); its error is in
docs/fpga.md. The output-stage terms are refitted on the six-stage output stage (every design
re-measured); since it was pipelined, the PE MAC path is the critical one of every design
measured (tiny 61.56 MHz, within 4.4 % leave-one-out). The accumulator-width term rests on one
design (16-bit operands, 48-bit accumulators); the PE path has no width term (it was measured at
8/32 bits only).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays

__all__ = ["FmaxFit", "ECP5_FMAX_FIT", "fpga_path_arrays", "fpga_fmax_arrays", "fpga_fmax_mhz"]

#: Dataflow code of OS (``perf_model.timing``: ws 0, os 1, is 2).
_OS = 1


@dataclasses.dataclass(frozen=True)
class FmaxFit:
    """Fitted path delays, ns (see the module docstring).

    Attributes:
        pe_ns, pe_per_step_ns: the WS/IS PE MAC path: base, and per unit of sqrt(PEs).
        pe_os_extra_ns: what the OS PE's accumulate-in-place adds to it.
        output_stage_ns, output_stage_per_step_ns: the output stage's multiply path.
        output_stage_per_acc_bit_ns: what each accumulator bit beyond 32 adds to it.
    """

    pe_ns: float
    pe_per_step_ns: float
    pe_os_extra_ns: float
    output_stage_ns: float
    output_stage_per_step_ns: float
    output_stage_per_acc_bit_ns: float = 0.0


#: Fitted by ``bench/fpga_resources.py`` (docs/fpga.md: the points and the error).
ECP5_FMAX_FIT = FmaxFit(pe_ns=14.432, pe_per_step_ns=0.507, pe_os_extra_ns=2.882, output_stage_ns=15.464,
                        output_stage_per_step_ns=0.34, output_stage_per_acc_bit_ns=0.052)


def fpga_path_arrays(designs: DesignArrays, fit: FmaxFit = ECP5_FMAX_FIT) -> dict[str, np.ndarray]:
    """Delay of the ``pe`` and ``output_stage`` paths of each design, ns."""
    spread = np.sqrt((designs.rows * designs.cols).astype(np.float64))
    pe = fit.pe_ns + fit.pe_per_step_ns * spread + np.where(designs.dataflow == _OS, fit.pe_os_extra_ns, 0.0)
    wider = np.maximum(designs.acc_bits - 32, 0).astype(np.float64)
    out = fit.output_stage_ns + fit.output_stage_per_step_ns * spread + fit.output_stage_per_acc_bit_ns * wider
    return {"pe": pe, "output_stage": out}


def fpga_fmax_arrays(designs: DesignArrays, fit: FmaxFit = ECP5_FMAX_FIT) -> np.ndarray:
    """ECP5 Fmax of each design, MHz: 1000 / the slower of its two paths."""
    paths = fpga_path_arrays(designs, fit)
    return 1000.0 / np.maximum(paths["pe"], paths["output_stage"])


def fpga_fmax_mhz(config: ArrayConfig, fit: FmaxFit = ECP5_FMAX_FIT) -> float:
    """ECP5 Fmax of ``config``'s accelerator top, MHz (one design of :func:`fpga_fmax_arrays`)."""
    return float(fpga_fmax_arrays(DesignArrays.from_configs([config]), fit)[0])
