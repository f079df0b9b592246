"""The checksum option (``ArrayConfig.checksum``) in the model: cycles, area, energy, coverage.

Mirrors ``rtl_gen.core.checksum`` (which ``perf_model`` may not import; ``tests/perf_model``
checks the constants agree):

* **Cycles.** None: the checksum column and the two lane-sum chains run beside the array in
  the same cycles, and a run's ``done`` comes when it did (``perf_model.timing.run_cycles``
  holds for both settings; the RTL tests compare). The last word's comparison lands
  ``CHECK_LATENCY`` (1) cycle after ``done``.
* **Area** at 45 nm: the Yosys fit of the whole unit (``bench/checksum_area.py``,
  ``perf_model/physical/checksum_fit.py``), as a function of ``R``, ``C``, ``input_bits`` and
  ``acc_bits`` with ``weight_bits = min(acc_bits, input_bits + ceil(log2 C))``.
* **Energy** per useful MAC of the array: each streamed word of a fold costs the array ``R x C``
  MACs and the checksum ``R`` MACs with ``weight_bits``-wide weights (priced as a MAC of
  ``input_bits`` times ``weight_bits / input_bits``), ``C`` adds of ``acc_bits`` on the output
  chain and one compare (an ``acc_bits`` add), and ``R (input_bits + acc_bits) + C acc_bits``
  register bits written; spread over the word's ``R x C`` MACs. The row sums of the stationary
  words (``C`` adds per loaded word) are left out: a load per fold, not per streamed word.
* **The output stage's check** (``rtl_gen.core.output_check``): a duplicate of the output
  stage on the same inputs, compared word by word. No cycle (it runs beside the stage; its
  event lands while the STORE or MOVE that read the word is still in flight). Area: ``C``
  output-stage lanes (the stage's own Yosys lane fit) plus the comparator and the check's delay
  line (``bench/output_check_area.py``, ``perf_model/physical/output_check_fit.py``). Energy
  per requantised output element: the stage's logic again (the parameter word is read once
  for both) plus an ``input_bits`` compare (priced as an add of that width) and the delay
  line's bit per word.
* **Coverage** (``sdc_coverage``): read from the stored campaign
  (``perf_model/physical/sdc_coverage_table.py``, ``bench/sdc_campaign.py --write``), never
  simulated per design: the share of the campaign's corrupting faults in the datapath places
  (:data:`DATAPATH_PLACES`: the PE operand, weight and partial-sum registers, and the output
  stage's pipeline registers) that the design
  detected, per dataflow and checksum setting (0 without a checksum, or without a stored
  campaign). Faults in SRAM words and on the DMA datapath are escapes for every setting (the
  campaign lists them); they are the domain of ECC and bus parity, not of this option.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_spec.config import CHECKSUM_DATAFLOWS, DATAFLOW_CODES, checksum_weight_bits
from accel_spec.isa import CHECK_LATENCY
from perf_model.physical import checksum_fit as fit
from perf_model.physical import output_check_fit as check_fit
from perf_model.physical import sdc_coverage_table as table
from perf_model.physical.energy import EnergyTable, _power_law
from perf_model.physical.output_stage import lane_um2, output_stage_pj, qparam_read_pj

__all__ = ["CHECKSUMS", "CHECK_LATENCY", "CHECKSUM_DATAFLOW_CODES", "weight_bits", "checksum_um2", "array_edge_um2",
           "output_check_um2", "checksum_pj_per_mac", "output_check_pj", "builds", "BUILD_REASON", "sdc_coverage",
           "DATAPATH_PLACES", "QDATA_LATENCY"]

#: ``checksum`` codes: the index in ``accel_spec.config.CHECKSUMS``.
CHECKSUMS = ("none", "detect")
#: Dataflow codes (``accel_spec.config.DATAFLOW_CODES``) whose RTL builds the checksum: WS, IS.
CHECKSUM_DATAFLOW_CODES = tuple(DATAFLOW_CODES[name] for name in CHECKSUM_DATAFLOWS)
#: Why an OS design with a checksum is infeasible.
BUILD_REASON = ("checksum 'detect' is built for dataflows ws, is, not os (an OS array drains its sums "
                "down the columns; its check is not built)")
_FLOW_NAMES = {code: name for name, code in DATAFLOW_CODES.items()}
#: The campaign places ``sdc_coverage`` counts.
DATAPATH_PLACES = ("pe_operand", "pe_weight", "pe_psum", "output_stage")
#: Cycles from a read's address to its requantised word (``rtl_gen.QDATA_LATENCY``): the check's delay line.
QDATA_LATENCY = 7


def weight_bits(cols: Any, input_bits: Any, acc_bits: Any) -> np.ndarray:
    """Bits of a row sum of ``cols`` weights, per design (float64):
    :func:`accel_spec.config.checksum_weight_bits`, the rule the RTL builds."""
    return np.asarray(checksum_weight_bits(np.asarray(cols, dtype=np.float64), np.asarray(input_bits, dtype=np.float64),
                                           np.asarray(acc_bits, dtype=np.float64)), dtype=np.float64)


def builds(dataflow: Any, checksum: Any) -> np.ndarray:
    """Whether the RTL builds the design's checksum setting (no checksum, or WS/IS)."""
    return (np.asarray(checksum) == 0) | np.isin(np.asarray(dataflow), CHECKSUM_DATAFLOW_CODES)


def checksum_um2(rows: Any, cols: Any, input_bits: Any, acc_bits: Any, checksum: Any) -> np.ndarray:
    """Area of the checksum option at 45 nm, µm^2: the array-edge unit and the output stage's check
    (0 without a checksum; module docstring)."""
    return (array_edge_um2(rows, cols, input_bits, acc_bits, checksum)
            + output_check_um2(cols, input_bits, acc_bits, checksum))


def output_check_um2(cols: Any, input_bits: Any, acc_bits: Any, checksum: Any) -> np.ndarray:
    """Area of the output stage's check at 45 nm, µm^2 (0 without a checksum): ``C`` duplicate lanes,
    their comparator and the check's delay line (the Yosys fit)."""
    c, ib = np.asarray(cols, dtype=np.float64), np.asarray(input_bits, dtype=np.float64)
    um2 = c * (lane_um2(ib, acc_bits) + check_fit.COMPARE_BIT_UM2 * ib) + check_fit.BASE_UM2
    return np.where(np.asarray(checksum) != 0, um2, 0.0)


def array_edge_um2(rows: Any, cols: Any, input_bits: Any, acc_bits: Any, checksum: Any) -> np.ndarray:
    """Area of the checksum unit at the array's edges at 45 nm, µm^2 (0 without one)."""
    r, c = np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64)
    ib, ab = np.asarray(input_bits, dtype=np.float64), np.asarray(acc_bits, dtype=np.float64)
    wb = weight_bits(c, ib, ab)
    um2 = (fit.BASE_UM2 + fit.MULT_UM2 * r * ib * wb + fit.CELL_BIT_UM2 * r * (ib + ab + 2 * wb)
           + fit.CHAIN_BIT_UM2 * c * (wb + ab))
    return np.where(np.asarray(checksum) != 0, um2, 0.0)


def checksum_pj_per_mac(energy: EnergyTable, rows: Any, cols: Any, input_bits: Any, acc_bits: Any,
                        checksum: Any) -> np.ndarray:
    """Energy the checksum adds per useful MAC of the array at 45 nm, pJ (0 without one)."""
    r, c = np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64)
    ib, ab = np.asarray(input_bits, dtype=np.float64), np.asarray(acc_bits, dtype=np.float64)
    wb = weight_bits(c, ib, ab)
    add = _power_law(ab, energy.add_8b_pj, energy.add_32b_pj)
    per_word = (r * energy.mac_pj(ib, ab) * wb / ib + (c + 1) * add
                + (r * (ib + ab) + c * ab) * energy.reg_bit_pj)
    return np.where(np.asarray(checksum) != 0, per_word / (r * c), 0.0)


def output_check_pj(energy: EnergyTable, input_bits: Any, acc_bits: Any, checksum: Any) -> np.ndarray:
    """Energy the output stage's check adds per requantised output element at 45 nm, pJ (0 without
    a checksum): the duplicate stage's logic, an ``input_bits`` compare, the delay line's bits
    (``QDATA_LATENCY`` per word of ``C`` elements, left out: under a bit per element)."""
    ib = np.asarray(input_bits, dtype=np.float64)
    logic = output_stage_pj(energy, ib, acc_bits) - qparam_read_pj(energy, ib)
    pj = logic + _power_law(ib, energy.add_8b_pj, energy.add_32b_pj)
    return np.where(np.asarray(checksum) != 0, pj, 0.0)


def sdc_coverage(dataflow: Any, checksum: Any) -> np.ndarray:
    """Detected share of the stored campaign's corrupting datapath faults, per design (0 without a
    checksum or without a stored campaign for its dataflow)."""
    flows = np.asarray(dataflow)
    codes = np.asarray(checksum)
    out = np.zeros(np.broadcast(flows, codes).shape, dtype=np.float64)
    for flow, name in _FLOW_NAMES.items():
        for code, setting in enumerate(CHECKSUMS):
            tallies = table.TALLIES.get((name, setting))
            if not tallies:
                continue
            corrupted = sum(t[1] for p, t in tallies.items() if p in DATAPATH_PLACES)
            detected = sum(t[2] for p, t in tallies.items() if p in DATAPATH_PLACES)
            out = np.where((flows == flow) & (codes == code), detected / corrupted if corrupted else 0.0, out)
    return out
