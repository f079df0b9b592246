"""DRAM bytes and energy of a workload with raw 32-bit outputs vs outputs through the output stage.

"Before" is the workload with every op's ``requant`` removed (outputs leave at ``acc_bits``, as
the model had it before the output stage); "after" is the workload as ``workloads.resolve``
gives it (the builtin int8 models requantise every op, so outputs leave at ``input_bits``).
Printed: DRAM read/write bytes, total energy and its DRAM, ofmap-SRAM and output-stage parts,
latency and area, and the write-byte ratio.

Usage: ``.venv/bin/python bench/requant_traffic.py [--design edge] [--workload resnet18]``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="edge")
    parser.add_argument("--workload", default="resnet18")
    args = parser.parse_args()
    design = load_design(args.design)
    after = workloads.resolve(args.workload)
    before = dataclasses.replace(after, ops=tuple(dataclasses.replace(op, requant=None) for op in after.ops))
    rows = []
    for label, wl in (("raw 32-bit outputs", before), ("requantised outputs", after)):
        r = perf_model.evaluate(design, wl)
        t = r.total
        parts = t["energy_breakdown"]
        rows.append((label, r.status, t["dram_read_bytes"], t["dram_write_bytes"], t["energy_pj"] * 1e-6,
                     parts["dram"] * 1e-6, parts["sram_ofmap"] * 1e-6, parts["output_stage"] * 1e-6,
                     t["latency_s"] * 1e3, t["area_mm2"]))
    print(f"# {args.workload} on {args.design} ({design.short_name()}, acc_bits {design.acc_bits})")
    head = ("outputs", "status", "dram_read_B", "dram_write_B", "energy_uJ", "dram_uJ", "sram_ofmap_uJ",
            "out_stage_uJ", "latency_ms", "area_mm2")
    print(" | ".join(head))
    for row in rows:
        print(" | ".join([row[0], row[1]] + [f"{row[2]:,.0f}", f"{row[3]:,.0f}"] + [f"{v:,.1f}" for v in row[4:8]]
                         + [f"{row[8]:.3f}", f"{row[9]:.4f}"]))
    (_, _, r0, w0, e0, *_), (_, _, r1, w1, e1, *_) = rows
    print(f"DRAM write bytes {w0 / w1:.2f}x fewer; DRAM bytes (read + write) {(r0 + w0) / (r1 + w1):.2f}x fewer; "
          f"energy {e0 / e1:.2f}x lower")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
