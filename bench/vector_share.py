"""Share of cycles and energy in vector work per builtin, on the vector unit (the model's figures).

For each builtin workload and design: the vector ops the unit runs (``perf_model.evaluate``'s
``vector_ops``), their busy cycles against the total, the vector energy parts (logic, SRAM,
DRAM) against the total energy, the unit's area against the design's, and the vector ops left
on the host with their reason. Printed as a table; nothing is written.

Usage: ``.venv/bin/python bench/vector_share.py [--designs edge tpu-v1] [--workloads bert_base ...]``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from perf_model.physical.design_area import logic_mm2  # noqa: E402
from perf_model.physical.vector_unit import unit_um2  # noqa: E402

WORKLOADS = ("bert_base:seq=64", "bert_base", "llama_block", "llama_decode", "gpt2_decode", "resnet18", "mobilenet_v2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", default=["edge", "tpu-v1"])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    args = parser.parse_args()
    print(f"{'design':<8} {'workload':<18} {'vec ops':>7} {'vec cycles':>12} {'total cycles':>13} {'cyc %':>6} "
          f"{'vec mJ':>8} {'total mJ':>9} {'energy %':>8} {'unit mm2':>8} {'area %':>6}  host work")
    for design in args.designs:
        config = dataclasses.replace(load_design(design), vector_unit=True)  # the preset with the unit
        for spec in args.workloads:
            w = workloads.resolve(spec)
            r = perf_model.evaluate(config, w)
            t = r.total
            parts = t["energy_breakdown"]
            vec_pj = parts["vector"] + parts["vector_sram"] + parts["vector_dram"]
            unit = float(logic_mm2(unit_um2(config.cols), config.tech_nm)) if r.vector_ops else 0.0
            host = sorted({h["kind"] for h in r.host_work})
            print(f"{design:<8} {spec:<18} {len(r.vector_ops):>7} {t['vector_cycles']:>12,} "
                  f"{round(t['total_cycles']):>13,} {100 * t['vector_cycles'] / max(t['total_cycles'], 1):>6.2f} "
                  f"{vec_pj * 1e-9:>8.3f} {t['energy_pj'] * 1e-9:>9.3f} {100 * vec_pj / max(t['energy_pj'], 1):>8.2f} "
                  f"{unit:>8.4f} {100 * unit / max(t['area_mm2'], 1e-12):>6.2f}  {', '.join(host) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
