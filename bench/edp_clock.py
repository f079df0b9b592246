"""EDP against clock: the ``edge`` preset on ResNet-18 from a low clock up to its f_max.

Every clock is one design of a ``DesignArrays`` (the preset with ``clock_mhz`` varied) scored by
``perf_model.evaluate_designs`` in one pass. Printed per clock: the supply on the node's
voltage-frequency curve, latency, energy (dynamic and leakage), EDP, and the clock of least
EDP, with whether it is interior (neither the lowest clock nor f_max). With the clock free of
voltage (the model before the timing and voltage work) EDP fell monotonically with clock.

Usage: ``.venv/bin/python bench/edp_clock.py [--design edge] [--workload resnet18] [--points 40]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402


def sweep(design: str, workload: str, points: int) -> tuple[np.ndarray, perf_model.DesignTable, float]:
    """Clocks, the table of the design at each, and its f_max (MHz)."""
    config = load_design(design)
    f_max = perf_model.design_fmax(config)["f_max_mhz"]
    clocks = np.linspace(f_max / 20, f_max, points)
    columns = {k: v for k, v in config.to_dict().items()}
    columns["clock_mhz"] = clocks
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(**columns), workloads.resolve(workload))
    return clocks, table, f_max


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="edge")
    parser.add_argument("--workload", default="resnet18")
    parser.add_argument("--points", type=int, default=40)
    args = parser.parse_args()
    clocks, t, f_max = sweep(args.design, args.workload, args.points)
    print(f"{args.design} on {args.workload}: f_max {f_max:.0f} MHz")
    print(f"{'clock_mhz':>10} {'vdd_V':>6} {'latency_ms':>11} {'energy_mJ':>10} {'leak_%':>7} {'edp_J_s':>11}")
    best = int(np.argmin(np.where(t.feasible, t.edp, np.inf)))
    for i, clock in enumerate(clocks):
        leak = t.energy_breakdown["leakage"][i] / t.energy_pj[i]
        mark = "  <- least EDP" if i == best else ""
        print(f"{clock:>10.0f} {t.vdd[i]:>6.3f} {t.latency_s[i] * 1e3:>11.3f} {t.energy_pj[i] * 1e-9:>10.3f} "
              f"{leak:>7.1%} {t.edp[i]:>11.4e}{mark}")
    interior = 0 < best < len(clocks) - 1
    print(f"least EDP {t.edp[best]:.4e} J*s at {clocks[best]:.0f} MHz (vdd {t.vdd[best]:.3f} V); "
          f"{'interior' if interior else 'at an END of the range'}: EDP {t.edp[0]:.4e} at {clocks[0]:.0f} MHz, "
          f"{t.edp[-1]:.4e} at f_max")
    return 0 if interior else 1


if __name__ == "__main__":
    raise SystemExit(main())
