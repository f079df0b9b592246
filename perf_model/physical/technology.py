"""Per-node technology figures: gate delay (FO4), the voltage-frequency curve, leakage (internal).

**FO4 delay.** The delay of an inverter driving four copies of itself, the unit in which the
timing model (:mod:`perf_model.physical.fmax`) counts logic depth. Horowitz's rule of thumb puts it
at about 500 ps per µm of effective gate length in the worst-case corner, about 360 ps per
µm of drawn length (R. Ho, K. W. Mai and M. A. Horowitz, "The future of wires", Proc. IEEE
89(4), 2001; used by V. Agarwal et al., "Clock rate versus IPC", ISCA 2000, and
M. S. Hrishikesh et al., "The optimal logic depth per pipeline stage is 6 to 8 FO4 inverter
delays", ISCA 2002). The model is for a typical corner: ``FO4 = 0.25 ps per nm`` of drawn
gate length, which gives the 8.7 ps published for a 32 nm high-k metal-gate process within
8 % (8.0 ps) and lies between that and the worst-case rule elsewhere (e.g. 45 ps quoted for
90 nm, rule 22.5 ps typical, 32 ps worst case): the figure is good to tens of percent, not
better. Planar nodes (>= 28 nm) use the node as the gate length. FinFET nodes no longer
shrink the gate with the node name: we assume physical gate lengths of 26 nm (22 nm node),
22 nm (16 nm), 20 nm (14 nm), 18 nm (10 nm), 16 nm (7 nm) and 14 nm (5 nm) (an assumption in
the range of the foundries' published device papers). Between table nodes: log-log
interpolation.

**Voltage and frequency.** Gate delay follows the alpha-power law (T. Sakurai and
A. R. Newton, "Alpha-power law MOSFET model and its applications to CMOS inverter delay and
other formulas", IEEE JSSC 25(2), 1990): ``delay ~ V / (V - Vth) ** alpha`` with
``alpha = 1.3`` for velocity-saturated short-channel devices. A design's ``f_max`` is its
clock at the node's nominal supply (:data:`NOMINAL_VDD`); a slower clock
runs at the lowest supply that still meets it, so ``f(V) / f_max = g(V) / g(V_nom)`` with
``g(V) = (V - Vth) ** alpha / V``, down to the bottom of the node's DVFS range,
``V_min = max(DVFS_MIN_FRACTION(node) * V_nom, Vth + 0.15 V)`` (below ``f(V_min)`` the supply
stays at ``V_min``; a design at its ``f_max`` sits at ``V_nom``). The DVFS range is where a
product's timing is signed off: planar standard-cell libraries (28 nm and up) are
characterised over ``V_nom`` +- 10 % (e.g. 28 nm HPM corners at 0.81, 0.90 and 0.99 V), so
their floor is ``0.9 * V_nom``; FinFET libraries add under-drive corners, which puts the floor
at ``0.8 * V_nom`` (0.56 V at 7 nm). Both are assumptions in the range of published
products' operating points, not one foundry's data; the earlier floor of ``0.6 * V_nom`` at
every node put TPU v1 at 0.54 V at 28 nm, far below any published 28 nm operating point.
Threshold voltages per node are typical standard-Vt values (an assumption:
0.45 V at 180 nm falling to 0.25 V at 5 nm, :data:`VTH`).

**Leakage.** Static power per mm^2 of die at the nominal supply and room temperature
(:data:`LEAKAGE_W_PER_MM2`), scaled as ``(V / V_nom) ** 3`` (subthreshold current falls with
the supply through drain-induced barrier lowering, times the supply itself; first order).
The figures follow the trend of N. S. Kim et al., "Leakage current: Moore's law meets static
power", IEEE Computer 36(12), 2003 (static power density rising by several times per
generation through 90-65 nm) and the reduction FinFETs brought; they are first-order
assumptions of general-purpose (not low-leakage) processes, to be replaced by a foundry's
figures: 0.5 mW/mm^2 at 180 nm, 8 mW/mm^2 at 90 nm, 20 mW/mm^2 at 45-28 nm, 15 mW/mm^2 for
FinFET nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NOMINAL_VDD", "fo4_ps", "nominal_vdd", "supply_voltage", "leakage_w_per_mm2", "ALPHA", "VTH",
           "LEAKAGE_W_PER_MM2", "GATE_LENGTH_NM", "DVFS_MIN_FRACTION", "min_supply_voltage"]

#: Typical nominal core supply (V) per node (nm); 45 nm at 0.9 V as in Horowitz's figures.
NOMINAL_VDD: tuple[tuple[int, float], ...] = (
    (5, 0.65), (7, 0.70), (10, 0.75), (14, 0.80), (16, 0.80), (22, 0.80), (28, 0.90), (32, 0.90),
    (45, 0.90), (65, 1.00), (90, 1.00), (130, 1.20), (180, 1.80),
)
#: FO4 delay per nm of drawn gate length, ps (typical corner; module docstring).
FO4_PS_PER_NM = 0.25
#: Gate length (nm) assumed per node where it differs from the node name (FinFETs).
GATE_LENGTH_NM: tuple[tuple[int, float], ...] = (
    (5, 14.0), (7, 16.0), (10, 18.0), (14, 20.0), (16, 22.0), (22, 26.0), (28, 28.0), (180, 180.0),
)
#: Velocity-saturation index of the alpha-power law.
ALPHA = 1.3
#: Typical standard-Vt threshold voltage per node, V (assumption).
VTH: tuple[tuple[int, float], ...] = (
    (5, 0.25), (7, 0.25), (16, 0.28), (28, 0.30), (45, 0.32), (65, 0.33), (90, 0.35), (130, 0.40),
    (180, 0.45),
)
#: Leakage power density at the nominal supply per node, W/mm^2 (assumption; module docstring).
LEAKAGE_W_PER_MM2: tuple[tuple[int, float], ...] = (
    (5, 0.015), (16, 0.015), (22, 0.02), (28, 0.02), (45, 0.02), (65, 0.015), (90, 0.008),
    (130, 0.002), (180, 0.0005),
)
#: Bottom of the DVFS range as a fraction of the nominal supply, per node (module docstring).
DVFS_MIN_FRACTION: tuple[tuple[int, float], ...] = ((5, 0.8), (22, 0.8), (28, 0.9), (180, 0.9))
_V_MIN_OVER_VTH = 0.15
_BISECTIONS = 24


def _interp_log(table: tuple[tuple[int, float], ...], tech_nm: Any, log_y: bool = False) -> np.ndarray:
    x = np.log([n for n, _ in table])
    y = np.array([v for _, v in table], dtype=np.float64)
    q = np.log(np.asarray(tech_nm, dtype=np.float64))
    return np.exp(np.interp(q, x, np.log(y))) if log_y else np.interp(q, x, y)


def fo4_ps(tech_nm: Any) -> np.ndarray:
    """FO4 inverter delay at ``tech_nm`` (nominal supply, typical corner), ps."""
    return FO4_PS_PER_NM * _interp_log(GATE_LENGTH_NM, tech_nm, log_y=True)


def nominal_vdd(tech_nm: Any) -> np.ndarray:
    """The node's nominal core supply, V (:data:`NOMINAL_VDD`)."""
    return _interp_log(NOMINAL_VDD, tech_nm)


def _g(v: np.ndarray, vth: np.ndarray) -> np.ndarray:
    return np.maximum(v - vth, 0.0) ** ALPHA / v


def min_supply_voltage(tech_nm: Any) -> np.ndarray:
    """The bottom of the node's DVFS range, V (module docstring)."""
    vnom = nominal_vdd(tech_nm)
    return np.maximum(_interp_log(DVFS_MIN_FRACTION, tech_nm) * vnom, _interp_log(VTH, tech_nm) + _V_MIN_OVER_VTH)


def supply_voltage(clock_mhz: Any, f_max_mhz: Any, tech_nm: Any) -> np.ndarray:
    """The lowest supply (V) at which a design with ``f_max_mhz`` (at nominal supply) runs at
    ``clock_mhz``, on the alpha-power curve, clipped to ``[V_min, V_nom]`` (module docstring).

    A clock above ``f_max`` gets ``V_nom`` (such a design is infeasible; the model says so).
    """
    vnom = nominal_vdd(tech_nm)
    vth = _interp_log(VTH, tech_nm)
    vmin = min_supply_voltage(tech_nm)
    target = _g(vnom, vth) * np.minimum(np.asarray(clock_mhz, dtype=np.float64)
                                        / np.asarray(f_max_mhz, dtype=np.float64), 1.0)
    lo, hi = vmin.copy(), vnom.copy()
    for _ in range(_BISECTIONS):  # g is increasing above Vth: bisection on [V_min, V_nom]
        mid = 0.5 * (lo + hi)
        fast = _g(mid, vth) >= target
        hi = np.where(fast, mid, hi)
        lo = np.where(fast, lo, mid)
    ratio = np.asarray(clock_mhz, dtype=np.float64) / np.asarray(f_max_mhz, dtype=np.float64)
    return np.where(ratio >= 1.0, vnom, np.where(_g(vmin, vth) >= target, vmin, hi))


def leakage_w_per_mm2(tech_nm: Any, vdd: Any) -> np.ndarray:
    """Leakage power density at ``tech_nm`` and supply ``vdd``, W/mm^2 (module docstring)."""
    return _interp_log(LEAKAGE_W_PER_MM2, tech_nm, log_y=True) * (np.asarray(vdd) / nominal_vdd(tech_nm)) ** 3
