"""verify --top K at full scale (sampled check) against the scaled exhaustive check, on a fresh study.

Sweeps the ``edge-int8`` space (``--trials`` trials, journal storage in a temporary directory),
then verifies the top K designs on the study's workload (ResNet-18 for ``edge-int8``) twice:
``mode="sampled"`` at full scale and ``mode="exhaustive"`` at ``--scale`` (default 0.01). Prints
per design: wall seconds, pass/fail, runs simulated / runs total; and the totals with the load
average. Asserts nothing. Builds are cached in ``--work-dir`` (default a temporary directory),
so the second pass reuses them only where the Verilog (DRAM size) is the same.

    .venv/bin/python bench/verify_full_scale.py [--trials 200] [--top 10] [--jobs 2] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", default="edge-int8")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--scale", type=float, default=0.01, help="scale of the exhaustive comparison")
    parser.add_argument("--max-ops", type=int, default=None)
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--skip-scaled", action="store_true")
    parser.add_argument("--storage", default=None, help="verify this study instead of sweeping a new one "
                        "(with --study)")
    parser.add_argument("--study", default="bench")
    args = parser.parse_args()

    from accel_dse.verify import verify_top

    tmp = Path(tempfile.mkdtemp(prefix="accel-dse-verify-bench-"))
    url = args.storage or f"sqlite:///{tmp / 'study.db'}"
    if args.storage is None:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "accel_dse", "sweep", "--space", args.space, "--trials",
                        str(args.trials), "--storage", url, "--study", args.study, "--quiet", "--seed", "0"],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"sweep {args.space}, {args.trials} trials: {time.perf_counter() - start:.0f} s; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    work = args.work_dir or str(tmp / "sim")
    passes = [("sampled", 1.0)] + ([] if args.skip_scaled else [("exhaustive", args.scale)])
    for mode, scale in passes:
        load0 = os.getloadavg()[0]
        start = time.perf_counter()
        results = verify_top(url, args.study, args.top, scale=scale, mode=mode, jobs=args.jobs, work_dir=work,
                             synth=False, max_ops=args.max_ops, timeout=None,
                             progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        wall = time.perf_counter() - start
        print(f"{mode} (scale {scale:g}): {sum(r.passed for r in results)}/{len(results)} passed in {wall / 60:.1f} "
              f"min wall, {args.jobs} at a time; load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
        for r in results:
            print(f"    trial {r.trial:4d} {r.design:28s} {r.status:5s} {r.seconds:7.0f} s  runs simulated "
                  f"{r.runs_simulated:,} of {r.runs_total:,}  cycles rtl {r.cycles_rtl} model {r.cycles_model}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
