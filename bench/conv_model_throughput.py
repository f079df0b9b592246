"""Throughput of the analytic model on a CNN: ResNet-18 designs per second, convs on chip or as GEMMs.

Draws designs from ``bench/model_throughput.py``'s grid (seeded, every dataflow) and scores them
on ResNet-18 with ``perf_model.evaluate_designs`` twice in one process:

* ``gemm-only``: every conv as its im2col GEMM (``Conv2d.to_gemm``), the vectorised model alone;
* ``on chip``: the workload as it is; a weight-stationary design scores its convs by the program
  they run (``perf_model.evaluator.conv_ops``), caches cold (a fresh process) then warm.

``--repo PATH`` imports the model from another checkout (the same sitting, one after the other,
compares two versions). Nothing is asserted: this prints figures, and the load average.

Run: ``.venv/bin/python bench/conv_model_throughput.py [--designs N] [--repo PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=600, help="designs drawn from the grid")
    parser.add_argument("--workload", default="resnet18", help="workload spec")
    parser.add_argument("--repo", default=str(HERE.parent), help="checkout whose model is measured")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve()))
    import perf_model
    import workloads
    from workloads.ops import Conv2d, Workload

    sys.path.insert(1, str(HERE))
    import model_throughput  # the grid (it puts this checkout on the path: the model is imported first)

    print(f"model from {Path(perf_model.__file__).resolve().parent.parent}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    columns = model_throughput.grid_columns()
    pick = np.random.default_rng(27).choice(len(columns["rows"]), size=args.designs, replace=False)
    designs = perf_model.DesignArrays.from_columns(**{k: v[pick] for k, v in columns.items()})
    ws = int((columns["dataflow"][pick] == 0).sum())
    wl = workloads.resolve(args.workload)
    gemms = Workload(name=wl.name, ops=tuple(op.to_gemm() if isinstance(op, Conv2d) else op for op in wl.ops),
                     counts=wl.counts)
    perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(**{k: v[:20] for k, v in columns.items()}),
                                gemms)  # warm-up: imports
    print(f"{args.designs} designs ({ws} weight-stationary) x {len(wl.ops)} ops of {args.workload}")
    for name, workload in (("gemm-only", gemms), ("on chip, cold", wl), ("on chip, warm", wl)):
        start = time.perf_counter()
        table = perf_model.evaluate_designs(designs, workload)
        wall = time.perf_counter() - start
        print(f"{name:14s}: {wall:8.3f} s -> {args.designs / wall:10,.1f} designs/s "
              f"(feasible {int(table.feasible.sum())})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
