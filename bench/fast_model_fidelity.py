"""How close the sweep's vectorised cycle model is to the program walk the RTL equals.

For random designs x random GEMMs (every dataflow, both ``double_buffered`` settings, AXI widths
from 1 to 32 bytes, small ops and large ones, requantised and raw outputs) prints the
distribution of ``fast / walk``: ``perf_model.evaluate_op``'s total cycles (the sweep's model)
over ``perf_model.gemm_program_cycles`` of the compiled program (what the RTL's counter reads,
against the simulator's DRAM model, latency ``DEFAULT_DRAM_LATENCY``). Then the layers of
``bench/memory_system.py`` (ResNet-18 and BERT-base GEMMs on ``edge``, two bandwidths, both
buffer settings). Nothing is asserted: this prints figures.

The designs name no memory part (``dram = "none"``) and power-of-two bandwidths, so the bus is
what the design asks and the DRAM model is the walk's. ``--paced N`` adds N cases whose
bandwidth is 55-90 % of their bus (2 to 128 bytes, arrays up to 64 x 64): the walk paces the
beats as the RTL's DRAM model does (``perf_model.dram_rate``), the sweep's model stretches them.

Usage: ``python bench/fast_model_fidelity.py [--cases 400] [--seed 1] [--paced 200] [--no-layers]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402
from accel_spec.errors import AccelDseError  # noqa: E402
from workloads.ops import Gemm, Requant  # noqa: E402

REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))
LAYERS = (("resnet18", "layer1.0.conv1"), ("resnet18", "layer3.0.conv1"), ("bert_base:seq=128", "attention/query"),
          ("bert_base:seq=128", "ffn_in"))


def random_case(rng: np.random.Generator, paced: bool = False) -> tuple[ArrayConfig, Gemm]:
    """A random design and GEMM: small arrays and buffers with small ops, or larger ones;
    ``paced``: a bandwidth 55-90 % of a bus of 2 to 128 bytes."""
    large = rng.random() < 0.3
    sizes = ([8, 16, 32, 64] if paced else [8, 12, 16, 32]) if large else [2, 3, 4, 6, 8, 12, 16]
    kib = [8, 16, 32, 64] if large else [1, 2, 4, 8, 16]
    buses = [2, 4, 8, 16, 32, 64, 128] if paced else [1, 2, 4, 8, 16, 32]
    config = ArrayConfig(
        rows=int(rng.choice(sizes)), cols=int(rng.choice(sizes)), dataflow=str(rng.choice(["ws", "os", "is"])),
        ifmap_sram_kib=int(rng.choice(kib)), weight_sram_kib=int(rng.choice(kib)), ofmap_sram_kib=int(rng.choice(kib)),
        dram_bytes_per_cycle=float(rng.choice(buses)), double_buffered=bool(rng.integers(0, 2)),
        shadow_stationary=bool(rng.integers(0, 2)), dram="none",
    )
    if paced:
        config = dataclasses.replace(config, dram_bytes_per_cycle=config.dram_bytes_per_cycle
                                     * float(rng.choice([0.55, 0.7, 0.76, 0.9])))
    top = 1200 if large else 300
    m, k, n = (int(rng.integers(1, top)) for _ in range(3))
    return config, Gemm(m=m, k=k, n=n, requant=REQUANT if rng.random() < 0.5 else None)


def ratio(config: ArrayConfig, gemm: Gemm) -> tuple[float, int] | None:
    """``(fast / walk, walk total)`` of one case, or ``None`` if the design cannot run it."""
    try:
        program = perf_model.compile_gemm(config, Gemm(m=gemm.m, k=gemm.k, n=gemm.n),
                                          requant=gemm.requant is not None)
    except AccelDseError:
        return None
    walk = perf_model.gemm_program_cycles(config, program, rate=perf_model.dram_rate(config))
    fast = perf_model.evaluate_op(config, gemm)
    return fast.total_cycles / walk.total, walk.total


def summary(label: str, ratios: np.ndarray) -> None:
    dev = np.abs(ratios - 1.0)
    print(f"{label:<24} n={len(ratios):>4}  median {np.median(ratios):.4f}  p5 {np.percentile(ratios, 5):.4f}  "
          f"p95 {np.percentile(ratios, 95):.4f}  worst {ratios[dev.argmax()]:.4f}  "
          f"within 1% {np.mean(dev <= 0.01):.1%}  exact {np.mean(dev == 0):.1%}")


def random_rows(cases: int, seed: int, paced: bool = False) -> None:
    rng = np.random.default_rng(seed)
    rows: list[tuple[float, ArrayConfig, Gemm]] = []
    start = time.perf_counter()
    while len(rows) < cases:
        config, gemm = random_case(rng, paced)
        if paced and perf_model.dram_rate(config) is None:
            continue  # the array's rows capped the bus below the bandwidth: not paced
        got = ratio(config, gemm)
        if got is not None:
            rows.append((got[0], config, gemm))
    r = np.array([x[0] for x in rows])
    what = "paced-memory " if paced else ""
    print(f"\n{cases} random {what}design x op cases (seed {seed}, {time.perf_counter() - start:.0f} s): fast / walk")
    summary("all", r)
    for name, keep in (("double buffered", [c.double_buffered for _, c, _ in rows]),
                       ("single buffered", [not c.double_buffered for _, c, _ in rows]),
                       ("requantised", [g.requant is not None for _, _, g in rows]),
                       ("raw outputs", [g.requant is None for _, _, g in rows])):
        summary(name, r[np.array(keep)])
    for df in ("ws", "os", "is"):
        summary(f"dataflow {df}", r[np.array([c.dataflow.value == df for _, c, _ in rows])])
    worst = sorted(rows, key=lambda x: -abs(x[0] - 1.0))[:5]
    print("worst cases:")
    for value, config, gemm in worst:
        print(f"  {value:.4f}  {config.short_name()} db={config.double_buffered} "
              f"bw={config.dram_bytes_per_cycle:g} {gemm.m}x{gemm.k}x{gemm.n} requant={gemm.requant is not None}")


def layer_rows() -> None:
    print(f"\n{'op':<22} {'setting':<6} {'walk':>11} {'fast':>12} {'fast/walk':>10}")
    edge = load_design("edge")
    for spec, name in LAYERS:
        op = next(o for o in workloads.resolve(spec).ops if o.name == name)
        g = op.to_gemm()
        for bw in (8.0, 2.0):
            for double in (True, False):
                config = dataclasses.replace(edge, dram_bytes_per_cycle=bw, double_buffered=double, dram="none")
                got = ratio(config, Gemm(m=g.m, k=g.k, n=g.n, requant=op.requant))
                if got is None:
                    continue
                print(f"{name:<22} {f'{int(bw)}B ' + ('db' if double else 'sb'):<6} {got[1]:>11,} "
                      f"{got[0] * got[1]:>12,.0f} {got[0]:>10.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=400, help="random design x op cases (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--paced", type=int, default=0, help="random cases on a memory slower than the bus")
    parser.add_argument("--no-layers", action="store_true", help="skip the layer table")
    args = parser.parse_args()
    if args.cases < 1:
        print(f"fast_model_fidelity: --cases must be a positive number, not {args.cases}", file=sys.stderr)
        return 2
    random_rows(args.cases, args.seed)
    if args.paced > 0:
        random_rows(args.paced, args.seed, paced=True)
    if not args.no_layers:
        layer_rows()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
