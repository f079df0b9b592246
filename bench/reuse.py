"""On-chip reuse across layers: DRAM bytes and utilisation with and without it, model and RTL.

Model (default): every workload on every design, ``perf_model.evaluate`` with ``reuse`` on and
off: DRAM bytes, utilisation, total cycles, and how many of the workload's links stay on chip
(an op's output is the next op's ``A`` as is: ``Op.a_from_previous``, which the tracer sets;
the design must be WS with ``rows == cols`` and hold both regions, ``perf_model.evaluator.reuse_links``).

``--rtl``: the chained network of ``--rtl-workload`` simulated from DRAM (``accel-dse simulate``'s
path, Verilator) on ``--rtl-design`` with an ifmap of ``--rtl-ifmap-kib``, reuse on and off: RTL
total cycles against the model's programs, and bit-exactness against JAX (the network's final
output).

Usage: ``.venv/bin/python bench/reuse.py [--rtl] [--rtl-design edge] [--rtl-ifmap-kib 512]
[--rtl-workload mlp] [--rtl-scale 1]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402

DESIGNS = ("edge", "tpu-v1")
WORKLOADS = ("resnet18", "bert_base", "mobilenet_v2", "mlp", "dlrm_mlp")


def model_table() -> None:
    """The model's figures, reuse off and on."""
    print(f"{'design':<8} {'workload':<10} {'links':>5} {'kept':>4} {'dram_MB_off':>11} {'dram_MB_on':>10} "
          f"{'saved':>6} {'util_off':>8} {'util_on':>8} {'cycles_off':>11} {'cycles_on':>11}")
    for design in DESIGNS:
        config = load_design(design)
        for name in WORKLOADS:
            wl = workloads.resolve(name)
            links = sum(op.a_from_previous for op in wl.ops)
            off, on = perf_model.evaluate(config, wl, reuse=False), perf_model.evaluate(config, wl)
            kept = sum("out" in op.on_chip for op in on.ops)
            mb = [(r.total["dram_read_bytes"] + r.total["dram_write_bytes"]) / 1e6 for r in (off, on)]
            print(f"{design:<8} {name:<10} {links:>5} {kept:>4} {mb[0]:>11.3f} {mb[1]:>10.3f} "
                  f"{1 - mb[1] / mb[0]:>6.1%} {off.total['utilization']:>8.2%} {on.total['utilization']:>8.2%} "
                  f"{off.total['total_cycles']:>11,.0f} {on.total['total_cycles']:>11,.0f}")


def rtl_table(design: str, ifmap_kib: int, workload: str, scale: float) -> None:
    """The chained network in the RTL from DRAM, reuse on and off."""
    import dataclasses

    from accel_dse.simulate import simulate

    config = dataclasses.replace(load_design(design), ifmap_sram_kib=ifmap_kib)
    print(f"RTL: {config.short_name()} ({design} with a {ifmap_kib} KiB ifmap)")
    for reuse in (False, True):
        start = time.perf_counter()
        report = simulate(config, workload, scale=scale, reuse=reuse)
        seconds = time.perf_counter() - start
        rtl = sum(op.cycles_total_rtl or 0 for op in report.ops)
        model = sum(op.cycles_total_model or 0 for op in report.ops)
        net = report.network or {}
        final = net.get("final_output", {})
        print(f"{design} {workload} scale {scale:g} reuse {'on ' if reuse else 'off'}: ops "
              f"{len(report.ops)}, kept on chip {sum(op.on_chip for op in report.ops)}, total rtl {rtl:,} model "
              f"{model:,} ({'equal' if rtl == model else 'DIFFER'}), final output mismatches "
              f"{final.get('mismatches')}, passed {report.passed}, {seconds:.1f} s")
        for op in report.ops:
            print(f"    {op.name:<8} total rtl {op.cycles_total_rtl:>10,} model {op.cycles_total_model:>10,} "
                  f"on_chip {op.on_chip} status {op.status}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtl", action="store_true", help="also simulate a chained network in the RTL")
    parser.add_argument("--rtl-design", default="edge")
    parser.add_argument("--rtl-ifmap-kib", type=int, default=512)
    parser.add_argument("--rtl-workload", default="mlp")
    parser.add_argument("--rtl-scale", type=float, default=1.0)
    args = parser.parse_args()
    model_table()
    if args.rtl:
        rtl_table(args.rtl_design, args.rtl_ifmap_kib, args.rtl_workload, args.rtl_scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
