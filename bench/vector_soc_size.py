"""Size of the vector unit in the RTL: its Verilog at two lane counts, the SoC block's Verilog of
``tiny`` and ``edge`` without and with ``vector_unit``, and (``--build``) the Verilator build time
of ``tiny`` without and with it (fresh build directories; the machine's load is printed beside).

Usage: ``.venv/bin/python bench/vector_soc_size.py [--lanes 4 16] [--build]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amaranth.back import verilog  # noqa: E402

import rtl_gen  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from rtl_gen.core.vector_unit import VectorUnit  # noqa: E402

DRAM = (20, 1 << 14)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", nargs="+", type=int, default=[4, 16])
    parser.add_argument("--build", action="store_true", help="also build tiny with Verilator, without and with")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    for lanes in args.lanes:
        text = verilog.convert(VectorUnit(lanes=lanes, addr_bits=16), name="vu")
        print(f"vector unit, {lanes:>3} lanes: {len(text) / 1e3:8.0f} KB of Verilog")
    for name in ("tiny", "edge"):
        sizes = []
        for vec in (False, True):
            config = dataclasses.replace(load_design(name), vector_unit=vec)
            sizes.append(len(rtl_gen.system_verilog(config, dram=DRAM)))
        print(f"{name:<5} SoC block + DRAM model: {sizes[0] / 1e3:8.0f} KB without the unit, {sizes[1] / 1e3:8.0f} KB "
              f"with it ({config.vector_lanes} lanes)")
    if args.build:
        from accel_dse.simulate import find_simulator
        from accel_dse.simulate.runner.build import build_design

        sim = find_simulator("verilator")
        for vec in (False, True):
            config = dataclasses.replace(load_design("tiny"), vector_unit=vec)
            text = rtl_gen.system_verilog(config, dram=DRAM)
            with tempfile.TemporaryDirectory(prefix="vec-build-") as work:
                start = time.perf_counter()
                build_design(text, top=rtl_gen.sim_name(config), simulator=sim, work_dir=Path(work))
                took = time.perf_counter() - start
                print(f"tiny {'with' if vec else 'without'} the unit: Verilator build {took:.0f} s "
                      f"(load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
