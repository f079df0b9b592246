"""Total cycles from DRAM: the RTL's contract against the sweep's model, and the RTL itself.

For a ResNet-18 layer and a BERT-base block's GEMMs on ``edge``, at two AXI widths and both
``double_buffered`` settings, prints per op:

* ``program``: ``perf_model.gemm_program_cycles`` of the compiled program against simulate's
  DRAM model (the total the RTL's counter reads, cycle for cycle; tested in tests/rtl_gen and
  tests/simulate), with its compute and stall cycles;
* ``sweep``: the vectorised model's total (``perf_model.evaluate_op``) and its ratio to the
  program's: how far the sweep's fractional-bandwidth roofline is from the machine.

``--rtl OP`` also runs that op through ``accel-dse simulate`` (Verilator, from DRAM) on each
setting and prints the RTL's totals, whether they match, and the simulator's speed.

``--wide`` replaces the settings by a 64-byte bus: ``edge`` made 32 x 32 int16 (a row of inputs
is 64 bytes; 48-bit accumulators, 500 MHz), asking 64 B/cycle (a beat every cycle) and 48.57
B/cycle (``tpu-v1``'s DDR3 rate: the DRAM model paces the beats, and so does the walk).

Usage: ``python bench/memory_system.py [--rtl layer1.0.conv1] [--scale 0.25] [--wide]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from accel_dse.simulate.dram.driver import DRAM_LATENCY  # noqa: E402

OPS = (("resnet18", "layer1.0.conv1"), ("resnet18", "layer3.0.conv1"), ("bert_base:seq=128", "attention/query"),
       ("bert_base:seq=128", "ffn_in"))


def settings(wide: bool = False) -> list[tuple[str, object]]:
    edge = load_design("edge")
    if wide:
        big = dataclasses.replace(edge, rows=32, cols=32, input_bits=16, acc_bits=48, clock_mhz=500.0, dram="none")
        return [(f"{bw:g}B db", dataclasses.replace(big, dram_bytes_per_cycle=bw)) for bw in (64.0, 48.57)]
    out = []
    for bw in (8.0, 2.0):
        for double in (True, False):
            cfg = dataclasses.replace(edge, dram_bytes_per_cycle=bw, double_buffered=double, dram="none")
            out.append((f"{int(bw)}B {'db' if double else 'sb'}", cfg))
    return out


def model_rows(wide: bool = False) -> None:
    print(f"{'op':<22} {'setting':<9} {'program':>11} {'compute':>11} {'stall':>10} {'sweep':>12} {'sweep/prog':>10}"
          f" {'walk_s':>7}")
    for spec, name in OPS:
        wl = workloads.resolve(spec)
        op = next(o for o in wl.ops if o.name == name)
        g = op.to_gemm()
        for label, cfg in settings(wide):
            start = time.perf_counter()
            program = perf_model.compile_gemm(cfg, workloads.Gemm(m=g.m, k=g.k, n=g.n), requant=op.requant is not None)
            walk = perf_model.gemm_program_cycles(cfg, program, latency=DRAM_LATENCY, rate=perf_model.dram_rate(cfg))
            seconds = time.perf_counter() - start
            sweep = perf_model.evaluate_op(cfg, workloads.Gemm(m=g.m, k=g.k, n=g.n, requant=op.requant))
            print(f"{name:<22} {label:<9} {walk.total:>11,} {walk.compute:>11,} {walk.stall:>10,} "
                  f"{sweep.total_cycles:>12,.0f} {sweep.total_cycles / walk.total:>10.3f} {seconds:>7.2f}")


def rtl_rows(op_name: str, scale: float, wide: bool = False) -> None:
    from accel_dse.simulate import simulate

    spec = next(s for s, n in OPS if n == op_name)
    print(f"\nRTL from DRAM (Verilator), {op_name} of {spec}, scale {scale:g}:")
    print(f"{'setting':<9} {'status':<6} {'total_rtl':>11} {'total_model':>11} {'match':>5} {'stall_rtl':>10} "
          f"{'build_s':>7} {'sim_s':>7} {'cycles/s':>10}")
    for label, cfg in settings(wide):
        start = time.perf_counter()
        report = simulate(cfg, spec, ops=[op_name], scale=scale, simulator="verilator")
        (op,) = report.ops
        print(f"{label:<9} {op.status:<6} {op.cycles_total_rtl or 0:>11,} {op.cycles_total_model or 0:>11,} "
              f"{'yes' if op.total_cycles_match else 'no':>5} {op.stall_cycles_rtl or 0:>10,} "
              f"{report.build_seconds:>7.1f} {op.sim_seconds:>7.1f} {op.cycles_per_second:>10,.0f}"
              f"   ({time.perf_counter() - start:.0f} s wall, build {'cached' if report.build_cached else 'new'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rtl", metavar="OP", help="also simulate this op from DRAM (e.g. layer1.0.conv1)")
    parser.add_argument("--scale", type=float, default=1.0, help="M scale of the simulated op (default 1)")
    parser.add_argument("--wide", action="store_true", help="a 64-byte bus, unpaced and paced (see above)")
    args = parser.parse_args()
    model_rows(args.wide)
    if args.rtl:
        rtl_rows(args.rtl, args.scale, args.wide)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
