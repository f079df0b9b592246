"""What an FPGA target costs the sweep: designs/s of the model evaluator with and without it.

Scores the full-factorial grid of ``bench/model_throughput.py`` (15,552 designs) on ResNet-18
with ``accel_dse.search.ModelEvaluator.evaluate_columns`` (the grid sampler's path), once
without an FPGA target and once with ``[fpga] family = "ecp5", device = "85k"`` (which adds
``perf_model.fpga_metrics``: resources, Fmax, utilisation); then one design at a time with
``evaluate`` (what each trial of a TPE/NSGA-II sweep calls). Best of ``--repeat`` runs; nothing
is asserted, the figures are printed with the machine's load.

Run: ``.venv/bin/python bench/fpga_target_throughput.py [--repeat R] [--single N]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_throughput import grid_columns  # noqa: E402

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.search import FpgaTarget, ModelEvaluator  # noqa: E402
from accel_spec.config import FIELD_NAMES, ArrayConfig  # noqa: E402

_CODES = ("ws", "os", "is")


def _best(repeat: int, run) -> float:  # noqa: ANN001 - a no-argument callable
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is reported)")
    parser.add_argument("--single", type=int, default=300, help="designs scored one at a time")
    args = parser.parse_args()

    resnet = workloads.resolve("resnet18")
    columns = grid_columns()
    n = len(columns["rows"])
    defaults = {f.name: f.default for f in dataclasses.fields(ArrayConfig)}
    full = {f: columns[f] if f in columns else np.full(n, defaults[f]) for f in FIELD_NAMES}
    print(f"grid: {n:,} designs on ResNet-18 ({len(resnet.ops)} ops); load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    target = FpgaTarget(family="ecp5", device="85k")
    plain = ModelEvaluator([("resnet18", 1.0, resnet)])
    fpga = ModelEvaluator([("resnet18", 1.0, resnet)], fpga=target)
    plain.evaluate_columns({k: v[:50] for k, v in full.items()})  # warm-up
    fpga.evaluate_columns({k: v[:50] for k, v in full.items()})
    t_plain = _best(args.repeat, lambda: plain.evaluate_columns(full))
    t_fpga = _best(args.repeat, lambda: fpga.evaluate_columns(full))
    designs = perf_model.DesignArrays.from_columns(**full)
    t_metrics = _best(args.repeat, lambda: perf_model.fpga_metrics(designs, "ecp5", "85k"))
    print(f"batch, no FPGA target : {t_plain:.3f} s -> {n / t_plain:,.0f} designs/s")
    print(f"batch, ecp5 85k target: {t_fpga:.3f} s -> {n / t_fpga:,.0f} designs/s "
          f"({100 * (t_fpga - t_plain) / t_plain:+.1f} %)")
    print(f"fpga_metrics alone    : {t_metrics * 1e3:.1f} ms -> {n / t_metrics:,.0f} designs/s")
    one = designs.take(np.arange(1))
    t_one = _best(args.repeat, lambda: [perf_model.fpga_metrics(one, "ecp5", "85k") for _ in range(200)]) / 200
    print(f"fpga_metrics on one design: {t_one * 1e6:.0f} us per call")

    configs = [ArrayConfig(**{k: _CODES[v[i]] if k == "dataflow" else v[i].item() for k, v in full.items()})
               for i in range(0, n, max(1, n // args.single))][: args.single]
    for name, evaluator in (("no FPGA target ", plain), ("ecp5 85k target", fpga)):
        t = _best(args.repeat, lambda ev=evaluator: [ev.evaluate(c) for c in configs])
        print(f"one at a time, {name}: {len(configs) / t:,.0f} designs/s ({t / len(configs) * 1e3:.2f} ms each)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
