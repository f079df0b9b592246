"""What ``checksum = "detect"`` costs on the presets: area, cycles and energy, with and without.

For each preset (default ``edge`` and ``tpu-v1``) and workload (default ``resnet18``) the
model evaluates the design as it is and with ``checksum = "detect"`` and prints the three
figures and the overhead in per cent, and the checksum's ``sdc_coverage`` from the stored
campaign. The cycles are the RTL's (``perf_model.timing``: the RTL tests hold them equal).

Usage: ``.venv/bin/python bench/checksum_overhead.py [--presets edge,tpu-v1] [--workload resnet18]``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="edge,tpu-v1")
    parser.add_argument("--workload", default="resnet18")
    args = parser.parse_args()
    import perf_model
    import workloads
    from accel_dse.design_files import load_preset

    work = workloads.resolve(args.workload)
    print(f"workload {args.workload}")
    print(f"{'preset':8s} {'checksum':8s} {'area mm2':>10s} {'cycles':>14s} {'energy uJ':>11s} {'checksum uJ':>11s} "
          f"{'coverage':>8s}")
    for name in args.presets.split(","):
        base = load_preset(name)
        totals = {}
        for setting in ("none", "detect"):
            config = dataclasses.replace(base, checksum=setting)
            t = perf_model.evaluate(config, work).total
            totals[setting] = t
            print(f"{name:8s} {setting:8s} {t['area_mm2']:10.4f} {t['total_cycles']:14,.0f} "
                  f"{t['energy_pj'] * 1e-6:11.2f} {t['energy_breakdown']['checksum'] * 1e-6:11.3f} "
                  f"{100 * t['sdc_coverage']:7.1f}%")
        a, b = totals["none"], totals["detect"]
        print(f"{name:8s} overhead: area {100 * (b['area_mm2'] / a['area_mm2'] - 1):+.3f} %, cycles "
              f"{100 * (b['total_cycles'] / a['total_cycles'] - 1):+.3f} %, energy "
              f"{100 * (b['energy_pj'] / a['energy_pj'] - 1):+.3f} % ({base.rows}x{base.cols} {base.dataflow.value})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
