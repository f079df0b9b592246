"""The DRAM default and the memory parts: figures before and after the default became a named part.

Usage: ``PYTHONPATH=<tree> .venv/bin/python bench/dram_default.py [--designs 200] [--dram NAME]``.

Run it against a tree (``PYTHONPATH=<tree>``); ``--dram NAME`` replaces every design's part, so
``--dram none`` on a tree from before the change is the old hidden default (DDR3's 30.5 pJ/bit at any
clock), and on this tree is ideal memory (no DRAM energy). Prints:

* a few designs that name no part (the default) on their workloads: energy, DRAM share, cycles;
* the ``datacenter-bert`` space (7 nm) on a seeded sample of its designs: the Pareto front
  (latency, energy, area; power <= 75 W) with its size and ranges.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from space_sample import space_sample  # noqa: E402

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.search import ModelEvaluator  # noqa: E402
from accel_dse.search.space.trial_values import pareto_mask  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402

#: Designs that name no ``dram`` (what a user's first design file looks like), and a workload each.
CASES = [
    ("16x16 (defaults)", ArrayConfig(rows=16, cols=16), "resnet18"),
    ("32x32, 1 GHz", ArrayConfig(rows=32, cols=32, ifmap_sram_kib=256, weight_sram_kib=256,
                                 ofmap_sram_kib=256), "bert_base:seq=128"),
    ("16x16, 2 GHz, 7 nm", ArrayConfig(rows=16, cols=16, clock_mhz=2000.0, tech_nm=7), "resnet18"),
]


def sample(space_name: str, n: int, seed: int, dram: str | None) -> tuple[dict[str, np.ndarray], ModelEvaluator]:
    """``n`` designs of the space drawn uniformly over its parameters' values (``dram`` replaced when given)."""
    columns, evaluator = space_sample(space_name, n, seed)
    if dram is not None:
        columns["dram"] = np.array([dram] * n)
    return columns, evaluator


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dram", default=None, help="replace every design's part (default: as shipped)")
    args = parser.parse_args()
    print(f"tree: {Path(perf_model.__file__).resolve().parents[1]}; dram: {args.dram or 'as shipped'}")
    print("| design | workload | dram | energy mJ | DRAM share | total cycles |")
    print("|---|---|---|---|---|---|")
    for name, config, spec in CASES:
        if args.dram is not None:
            config = dataclasses.replace(config, dram=args.dram)
        result = perf_model.evaluate(config, workloads.resolve(spec))
        if result.status != "ok":
            print(f"| {name} | {spec} | {config.dram} | {result.status}: {result.reason[:90]} | | |")
            continue
        t = result.total
        br = t["energy_breakdown"]
        share = (br["dram"] + br["vector_dram"]) / t["energy_pj"]
        print(f"| {name} | {spec} | {config.dram} | {t['energy_pj'] * 1e-9:.3f} | {100 * share:.1f} % "
              f"| {round(float(t['total_cycles'])):,} |")
    columns, evaluator = sample("datacenter-bert", args.designs, args.seed, args.dram)
    batch = evaluator.evaluate_columns(columns)
    m = batch.metrics
    ok = np.asarray(batch.feasible) & (m["power_w"] <= 75)
    values = np.stack([m["latency_s"], m["energy_pj"], m["area_mm2"]], axis=1)[ok]
    mask = pareto_mask(values)
    energy, latency, area = (m[k][ok][mask] for k in ("energy_pj", "latency_s", "area_mm2"))
    density = m["power_density_w_mm2"][ok][mask].max() if "power_density_w_mm2" in m else float("nan")
    print()
    print(f"datacenter-bert (7 nm), {args.designs} sampled designs (seed {args.seed}), power_w <= 75, "
          f"dram = {args.dram or 'hbm2e (as shipped)'}:")
    print(f"feasible {int(ok.sum())}, front {int(mask.sum())}; front energy {energy.min() * 1e-9:.3f} - "
          f"{energy.max() * 1e-9:.3f} mJ (max/min {energy.max() / energy.min():.2f}); latency "
          f"{latency.min() * 1e3:.3f} - {latency.max() * 1e3:.3f} ms; area {area.min():.1f} - {area.max():.1f} mm^2; "
          f"densest {density:.3f} W/mm^2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
