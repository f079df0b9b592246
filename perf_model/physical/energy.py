"""Energy per access, with its sources, and its scaling to ``tech_nm``.

Reference figures (45 nm, 0.9 V) from M. Horowitz, "Computing's energy problem (and what we
can do about it)", ISSCC 2014, Figure 1.1.9:

* integer add: 8-bit 0.03 pJ, 32-bit 0.1 pJ; integer multiply: 8-bit 0.2 pJ, 32-bit 3.1 pJ;
* SRAM read of 64 bits: 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ.

(Its DRAM figure, 1.3 - 2.6 nJ per 64-bit access, prices the DDR3 parts of
:data:`accel_spec.config.MEMORY_KINDS`; DRAM energy is always the design's named part's.)

Between the published widths an operator's energy follows the power law through both points
(``E(b) = E8 * (b / 8) ** alpha``: multipliers grow ~b^1.98, adders ~b^0.87). SRAM energy per
byte is interpolated log-log in the capacity of the bank (a double-buffered buffer is two banks
of half the size) and extrapolated with the end slopes. Horowitz gives no figure for pipeline
registers: we assume one flip-flop bit written costs about one full-adder bit, i.e.
``0.1 pJ / 32`` per bit at 45 nm (an assumption, not a measurement). Leakage is on by default
(``leakage_w_per_mm2 = None``: the per-node densities of :mod:`perf_model.physical.technology`);
``0`` turns it off, another number sets one density for every node.

Technology scaling. Planar nodes (28 nm and up) keep the first-order rule, dynamic energy
``C V^2`` at the node's nominal supply (the model then scales it by ``(V / V_nom) ** 2`` at the
supply that meets the design's clock, :func:`perf_model.physical.technology.supply_voltage`)
with capacitance proportional to the feature size::

    E(tech) = E(45) * (tech / 45) * (V(tech) / 0.9 V) ** 2          (tech >= 28 nm)

with V(node) the typical nominal supplies of :data:`NOMINAL_VDD`, interpolated in log(node).
At the FinFET nodes that rule overstates the shrink (7 nm came out at 0.094 of 45 nm), as the
square law did for area. Below 28 nm the scale follows **published per-node energies**
(:data:`FINFET_ENERGY_ANCHORS`), log-log between 28 nm (the rule's value there) and the anchors,
and past the last anchor along the same line:

=====  =======  =========================================================================
node   E / E45  source
=====  =======  =========================================================================
45     1        M. Horowitz, ISSCC 2014 (the reference figures above)
28     0.622    the planar rule (``28 / 45``, 0.9 V at both)
7      0.333    N. Jouppi et al., "Ten Lessons From Three Generations Shaped Google's TPUv4i",
                ISCA 2021, Table 2 (Horowitz's 45 nm figures beside 7 nm ones): an 8-bit
                multiply 0.2 -> 0.07 pJ and a 32-bit add 0.1 -> 0.03 pJ, so the int8 MAC
                (multiply and 32-bit accumulate) 0.3 -> 0.10 pJ
=====  =======  =========================================================================

16 nm lies on the line at 0.48, 5 nm at 0.29 and 3 nm at 0.23 (extrapolated: no published
figure in the table). One factor scales every on-chip dynamic energy (MAC, registers, SRAM,
output stage, vector unit, checksum). The same paper's Table 2 finds SRAM energy improving less
than logic from 45 to 7 nm, so for SRAM the logic factor is a lower bound (not yet a per-node
SRAM figure of its own). DRAM energy is off-chip (I/O and DRAM core), the part's, and is not
scaled (``perf_model._memory_parts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perf_model.physical.technology import NOMINAL_VDD, leakage_w_per_mm2, nominal_vdd

__all__ = ["EnergyTable", "DEFAULT_ENERGY", "tech_energy_scale", "NOMINAL_VDD", "FINFET_ENERGY_ANCHORS",
           "PLANAR_MIN_NM"]

_REF_NM = 45
#: The smallest node the planar rule ``(tech / 45) * (V / 0.9) ** 2`` holds at, nm.
PLANAR_MIN_NM = 28
#: Published dynamic energy at a FinFET node over 45 nm, at each node's nominal supply: ``(node nm,
#: E / E45)``, smallest node first (module docstring for the source: TPUv4i's Table 2, the int8 MAC).
FINFET_ENERGY_ANCHORS: tuple[tuple[float, float], ...] = ((7.0, (0.07 + 0.03) / (0.2 + 0.1)),)


def _planar_scale(tech_nm: np.ndarray | float) -> np.ndarray:
    """``(tech / 45) * (V(tech) / V(45)) ** 2`` (module docstring), vectorised."""
    tech = np.asarray(tech_nm, dtype=np.float64)
    nodes = np.log([n for n, _ in NOMINAL_VDD])
    volts = np.array([v for _, v in NOMINAL_VDD])
    vdd = np.interp(np.log(tech), nodes, volts)
    ref = float(np.interp(math.log(_REF_NM), nodes, volts))
    return (tech / _REF_NM) * (vdd / ref) ** 2


def tech_energy_scale(tech_nm: np.ndarray | float) -> np.ndarray:
    """Dynamic-energy factor of node ``tech_nm`` relative to 45 nm at each node's nominal supply:
    the planar rule at 28 nm and up, the published anchors below (log-log; module docstring)."""
    tech = np.asarray(tech_nm, dtype=np.float64)
    planar = _planar_scale(tech)
    points = [(float(n), float(e)) for n, e in FINFET_ENERGY_ANCHORS]
    points.append((float(PLANAR_MIN_NM), float(_planar_scale(float(PLANAR_MIN_NM)))))
    x = np.log([n for n, _ in points])
    y = np.log([e for _, e in points])
    q = np.log(np.minimum(tech, PLANAR_MIN_NM))
    slope = (y[1] - y[0]) / (x[1] - x[0])  # past the smallest anchor: the line through the last two points
    finfet = np.exp(np.where(q < x[0], y[0] + slope * (q - x[0]), np.interp(q, x, y)))
    return np.where(tech >= PLANAR_MIN_NM, planar, finfet)


def _power_law(bits: np.ndarray, at8: float, at32: float) -> np.ndarray:
    alpha = math.log(at32 / at8) / math.log(4.0)
    return at8 * (np.asarray(bits, dtype=np.float64) / 8.0) ** alpha


@dataclass(frozen=True)
class EnergyTable:
    """Per-access energies at 45 nm in pJ (defaults: see the module docstring for sources).

    Attributes:
        mult_8b_pj, mult_32b_pj: integer multiply, 8 and 32 bits.
        add_8b_pj, add_32b_pj: integer add, 8 and 32 bits.
        reg_bit_pj: one register bit written (assumption: one full-adder bit).
        sram_kib: SRAM capacities (KiB) of the reference points.
        sram_pj_per_64b: energy of a 64-bit SRAM access at those capacities.
        leakage_w_per_mm2: static power per mm^2 of die at nominal supply (``None``: the
            per-node figures of :mod:`perf_model.physical.technology`; 0: off).
    """

    mult_8b_pj: float = 0.2
    mult_32b_pj: float = 3.1
    add_8b_pj: float = 0.03
    add_32b_pj: float = 0.1
    reg_bit_pj: float = 0.1 / 32
    sram_kib: tuple[float, ...] = (8.0, 32.0, 1024.0)
    sram_pj_per_64b: tuple[float, ...] = (10.0, 20.0, 100.0)
    leakage_w_per_mm2: float | None = None

    def mac_pj(self, input_bits: np.ndarray, acc_bits: np.ndarray) -> np.ndarray:
        """One multiply (``input_bits``) and one accumulate (``acc_bits``) at 45 nm, pJ."""
        return _power_law(input_bits, self.mult_8b_pj, self.mult_32b_pj) + _power_law(
            acc_bits, self.add_8b_pj, self.add_32b_pj)

    def sram_pj_per_byte(self, bank_kib: np.ndarray) -> np.ndarray:
        """Energy per byte read or written in an SRAM bank of ``bank_kib`` KiB at 45 nm, pJ."""
        x = np.log(np.asarray(self.sram_kib))
        y = np.log(np.asarray(self.sram_pj_per_64b) / 8.0)
        q = np.log(np.asarray(bank_kib, dtype=np.float64))
        lo_slope = (y[1] - y[0]) / (x[1] - x[0])
        hi_slope = (y[-1] - y[-2]) / (x[-1] - x[-2])
        inside = np.interp(q, x, y)
        out = np.where(q < x[0], y[0] + lo_slope * (q - x[0]),
                       np.where(q > x[-1], y[-1] + hi_slope * (q - x[-1]), inside))
        return np.exp(out)

    def leakage_density(self, tech_nm: np.ndarray, vdd: np.ndarray) -> np.ndarray:
        """Leakage power per mm^2 at ``tech_nm`` and supply ``vdd``, W/mm^2 (vectorised)."""
        if self.leakage_w_per_mm2 is None:
            return leakage_w_per_mm2(tech_nm, vdd)
        return self.leakage_w_per_mm2 * (np.asarray(vdd) / nominal_vdd(tech_nm)) ** 3


DEFAULT_ENERGY = EnergyTable()
