"""How Verilator build time and simulation speed grow with the array: 16x16, 64x64, 128x32, 128x128.

Per array size: the SoC simulation block (``rtl_gen.system_verilog``, what ``simulate`` and
``verify`` build) of the ``edge`` preset reshaped to ``RxC`` (dataflow and buffers as given) is
built from scratch in a fresh work directory (ccache holds only the Verilator runtime and any
identical object), then one GEMM runs from DRAM; printed: build wall seconds, the accelerator's
clock cycles (its CYCLES_TOTAL, equal to the model's; the clock cycles a backdoor spends loading
DRAM are not counted) per wall second of the testbench, CPU seconds of build and run, and the
1-minute load average before and after each figure (the machine is shared; compare figures taken in the same run).
The op then runs a second time on the cached build, and the CPU seconds of that run (simulator
and testbench processes) give cycles per CPU-second, the figure least bent by the load.

``--repo DIR`` imports accel-dse from another checkout (e.g. main) so a before/after pair is
measured in one sitting with the same interpreter and load:

    .venv/bin/python bench/sim_scaling.py --sizes 16x16,64x64
    .venv/bin/python bench/sim_scaling.py --repo /path/to/main --sizes 16x16,64x64

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path


def _size(text: str) -> tuple[int, int]:
    r, c = text.lower().split("x")
    return int(r), int(c)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", help="import accel-dse from this checkout (default: this one)")
    parser.add_argument("--sizes", default="16x16,64x64", help="comma-separated RxC (default %(default)s)")
    parser.add_argument("--dataflow", default="ws")
    parser.add_argument("--gemm", default=None, help="M,K,N (default: 4R x 4R x 4C, at least 256 each)")
    parser.add_argument("--hier-min-pes", type=int, default=None,
                        help="build arrays of at least this many PEs with hierarchical row blocks "
                        "(default: accel_dse.simulate.runner.build.HIER_MIN_PES; 0 always, a huge number never)")
    parser.add_argument("--hier-blocks", default=None,
                        help="comma-separated module suffixes built as hierarchical blocks (default: "
                        "accel_dse.simulate.runner.build.HIER_BLOCK_SUFFIXES), e.g. _row or _row,_block")
    parser.add_argument("--work-dir", help="keep builds here (default: a fresh temporary directory)")
    args = parser.parse_args()
    repo = Path(args.repo or Path(__file__).resolve().parent.parent).resolve()
    sys.path.insert(0, str(repo))
    os.environ["PYTHONPATH"] = str(repo) + os.pathsep + os.environ.get("PYTHONPATH", "")  # build/run children

    from accel_dse.design_files import load_preset
    from accel_dse.simulate import simulate
    from accel_dse.simulate.runner import build as _build

    if args.hier_min_pes is not None:
        _build.HIER_MIN_PES = args.hier_min_pes
    if args.hier_blocks is not None:
        _build.HIER_BLOCK_SUFFIXES = tuple(args.hier_blocks.split(","))
    print(f"repo {repo}; {os.cpu_count()} CPUs; load average {_load()}; hierarchical blocks "
          f"{getattr(_build, 'HIER_BLOCK_SUFFIXES', ())} from "
          f"{getattr(_build, 'HIER_MIN_PES', 'never (not in this checkout)')} PEs")
    for text in args.sizes.split(","):
        rows, cols = _size(text)
        design = dataclasses.replace(load_preset("edge"), rows=rows, cols=cols, dataflow=args.dataflow,
                                     ifmap_sram_kib=max(128, 8 * rows), weight_sram_kib=max(128, 8 * rows),
                                     ofmap_sram_kib=max(128, 8 * cols))
        if args.gemm:
            m, k, n = (int(v) for v in args.gemm.split(","))
        else:
            m, k, n = max(256, 4 * rows), max(256, 4 * rows), max(256, 4 * cols)
        spec = f"gemm:m={m},k={k},n={n}"
        work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="accel-dse-scaling-"))
        try:
            load0 = _load()
            cpu0 = _child_cpu()
            report = simulate(design, spec, simulator="verilator", work_dir=work, timeout=None)
            cpu = _child_cpu() - cpu0
            t = report.totals()
            (op,) = report.ops
            # The same op again on the cached build: the simulator's own CPU time, which the
            # machine's load does not inflate (wall figures on a shared machine do).
            cpu1 = _child_cpu()
            again = simulate(design, spec, simulator="verilator", work_dir=work, timeout=None)
            run_cpu = _child_cpu() - cpu1
            print(f"{rows}x{cols} {args.dataflow}: build {report.build_seconds:.1f} s wall"
                  f"{' (cached)' if report.build_cached else ''}, {cpu - run_cpu:.0f} CPU-s; {spec}: "
                  f"{op.status}, {op.tiles} runs, {op.cycles_total_rtl:,} accelerator cycles ({t['sim_cycles']:,} "
                  f"clock cycles simulated, backdoor included) in {t['sim_seconds']:.1f} s: "
                  f"{op.cycles_total_rtl / max(t['sim_seconds'], 1e-9):,.0f} accelerator cycles/s wall; rerun on "
                  f"the cached build {again.ops[0].status}: {again.ops[0].sim_seconds:.1f} s in the testbench, "
                  f"{run_cpu:.1f} CPU-s in all, {op.cycles_total_rtl / max(run_cpu, 1e-9):,.0f} accelerator cycles "
                  f"per CPU-s (includes the testbench's start-up); load {load0} -> {_load()}", flush=True)
        finally:
            if not args.work_dir:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
