"""What a full-scale sampled check of a study's top K designs would simulate, without simulating.

Per design (the ranking ``verify --top K`` uses) and, with ``-v``, per op: the path (GEMM, conv on
chip, or the host's im2col), output tiles, classes, runs simulated / runs total and the model's
cycles simulated / total. The cycles simulated are what the RTL simulation costs (at a few thousand
cycles a second on a 64x32 design), so this says where a ``verify --full-scale`` spends its time
before any build. Prints figures, asserts nothing.

    .venv/bin/python bench/verify_plan.py --storage sqlite:///runs/edge-int8/study.db --study edge-int8 [--top 10] [-v]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", required=True)
    parser.add_argument("--study", required=True)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("-v", action="store_true", help="per op too")
    args = parser.parse_args()

    import perf_model
    import workloads
    from accel_dse.report import load_study, trial_config
    from accel_dse.simulate.dram.conv import conv_instances, on_chip_conv
    from accel_dse.simulate.dram.driver import DRAM_LATENCY
    from accel_dse.simulate.dram.sampled_check import sampled_job
    from accel_dse.simulate.driver import _select_ops

    view = load_study(args.storage, args.study, read_only=True)
    chosen = [t for layer in view.ranked_layers() for t in layer][:args.top]
    spec = view.workloads[0]
    selected = _select_ops(workloads.resolve(spec), spec, None, None)
    grand = [0, 0, 0, 0]
    for trial in chosen:
        design = trial_config(trial, study=args.study)
        sums = [0, 0, 0, 0]  # runs simulated, runs, cycles simulated, cycles
        lines = []
        for name, op, _count in selected:
            path = on_chip_conv(design, name, op, False)
            if path == "chip":
                program = conv_instances(design, name, op, 0, 1.0, DRAM_LATENCY)[0]
                batch, how = 1, "conv"
            else:
                gemm = op.to_gemm()
                program = perf_model.compile_gemm(design, workloads.Gemm(m=gemm.m, k=gemm.k, n=gemm.n, name=name),
                                                  requant=op.requant is not None)
                batch, how = gemm.batch, "gemm" if not path else "im2col"
            job = sampled_job(design, program, batch, DRAM_LATENCY, perf_model.dram_rate(design))
            s = job.summary()
            got = (s["runs_simulated"], s["runs_total"], s["cycles_simulated_model"], s["op_cycles_model"])
            sums = [a + b for a, b in zip(sums, got, strict=True)]
            lines.append(f"    {name:20s} {how:6s} tiles {len(job.plan.tiles):4d} classes {s['classes']:3d} "
                         f"runs {got[0]:4d}/{got[1]:4d} cycles {got[2]:9,d}/{got[3]:9,d}")
        grand = [a + b for a, b in zip(grand, sums, strict=True)]
        print(f"trial {trial.number:4d} {design.short_name():14s} runs {sums[0]:4d}/{sums[1]:4d} "
              f"cycles simulated {sums[2]:10,d} of {sums[3]:10,d} ({100 * sums[2] / sums[3]:.0f} %)", flush=True)
        if args.v:
            print("\n".join(lines))
    print(f"all {len(chosen)}: runs {grand[0]}/{grand[1]}, cycles simulated {grand[2]:,d} of {grand[3]:,d} "
          f"({100 * grand[2] / max(grand[3], 1):.0f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
