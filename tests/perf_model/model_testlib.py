"""Helpers for the perf-model tests: an obvious per-run reference and the cycle formula by hand.

The reference walks the tiles of a tiling one Python iteration per run and applies the per-run
definitions of ``perf_model.evaluator.schedule``'s docstring literally (loads of tiles that changed,
read-back of revisited partial sums, stores when the output tile changes, and the
double-buffered roofline run by run). It shares no code with the closed forms it checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import random
from collections.abc import Callable
from typing import Any

import perf_model
from accel_spec.config import ArrayConfig
from perf_model import timing
from workloads.ops import Conv2d, Requant

#: A clock that every design these tests build reaches at every node (the slowest, 16-bit
#: operands into 64-bit accumulators at 180 nm, reaches about 200 MHz): for tests of tiling,
#: traffic or area, where the clock only has to be feasible.
SLOW_MHZ = 100.0


def at_nominal_supply(config: ArrayConfig) -> ArrayConfig:
    """``config`` clocked at its f_max, so it runs at the node's nominal supply (``V = V_nom``):
    its dynamic energies are the per-access figures of the energy table times the node's scale."""
    return dataclasses.replace(config, clock_mhz=perf_model.design_fmax(config)["f_max_mhz"])

#: GEMM dim of the mapped dims (rows-dim, cols-dim, streamed) per dataflow code.
GEMM_OF = {0: ("k", "n", "m"), 1: ("m", "n", "k"), 2: ("k", "m", "n")}


def hand_run_cycles(df: int, R: int, C: int, m: int, k: int, n: int, shadow: bool) -> int:
    """``run_cycles`` written out from the contract's docstring (not by calling it)."""
    dr, dc, ds = {0: (k, n, m), 1: (m, n, k), 2: (k, m, n)}[df]
    folds = math.ceil(dr / R) * math.ceil(dc / C)
    if folds == 0 or ds == 0:
        return timing.RUN_OVERHEAD
    if not shadow:
        return folds * (ds + 2 * R + C - 2 + timing.FOLD_OVERHEAD) + timing.RUN_OVERHEAD
    slot = max(ds, R, 2)
    if df == 1:  # OS: every slot full length, then the marker, R + 1, R drain shifts, C lanes
        return timing.RUN_OVERHEAD + folds * slot + 2 * R + C + 1
    return timing.RUN_OVERHEAD + (folds - 1) * slot + ds + 2 * R + C  # one load, one flush


def runs(df: int, dims: dict[str, int], tile: dict[str, int], order: tuple[int, ...]):
    """Yield ``{gemm dim: (start, stop)}`` per run; ``order`` lists mapped dims outer to inner."""
    names = GEMM_OF[df]
    loops = [names[x] for x in order]
    ranges = [range(0, dims[d], tile[d]) for d in loops]
    for starts in itertools.product(*ranges):
        yield {d: (s0, min(s0 + tile[d], dims[d])) for d, s0 in zip(loops, starts, strict=True)}


def reference(df, R, C, dims, tile, order, ib, ab, bw, instances, double_buffered, shadow, resident=""):
    """``(compute, total, dram_read, dram_write)`` of an op, by brute force over its runs.

    ``resident`` (``"a"``/``"b"``): that input keeps every K tile of its current strip (its
    non-K range) in the buffer and loads each only once per strip. Every instance is its own
    program (the compiler's), so instances add up. Double buffered with K innermost, an output
    tile's store is spread evenly over the runs of the next output tile (the compiler's store
    parts); otherwise it rides on the run that completes it.
    """
    one = _reference_instance(df, R, C, dims, tile, order, ib, ab, bw, double_buffered, shadow, resident)
    return tuple(instances * v for v in one)


def _reference_instance(df, R, C, dims, tile, order, ib, ab, bw, double_buffered, shadow, resident):
    operand_dims = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
    # Raw outputs leave as the DRAM layout's accumulator lanes: 4 bytes up to 32 bits, else 8.
    elem = {"A": ib / 8, "B": ib / 8, "C": 4.0 if ab <= 32 else 8.0}
    seq = []
    k_inner = GEMM_OF[df][order[2]] == "k"
    held: dict[str, tuple] = {}
    strip: dict[str, set] = {}
    inst_runs = list(runs(df, dims, tile, order))
    for i, run in enumerate(inst_runs):
        size = {d: run[d][1] - run[d][0] for d in "mkn"}
        load = 0.0
        for op in ("A", "B"):
            key = tuple(run[d] for d in operand_dims[op])
            new = held.get(op) != key
            if op.lower() == resident:
                outer = run["m" if op == "A" else "n"]
                if held.get(op + "strip") != outer:
                    held[op + "strip"] = outer
                    strip[op] = set()
                new = key not in strip[op]
                strip[op].add(key)
            if new:
                load += elem[op] * size[operand_dims[op][0]] * size[operand_dims[op][1]]
                held[op] = key
        ckey = tuple(run[d] for d in operand_dims["C"])
        c_bytes = elem["C"] * size["m"] * size["n"]
        if held.get("C") != ckey:
            held["C"] = ckey
            if run["k"][0] > 0:  # partial sums of a revisited output tile come back
                load += c_bytes
        nxt = inst_runs[i + 1] if i + 1 < len(inst_runs) else None
        store = c_bytes if nxt is None or tuple(nxt[d] for d in operand_dims["C"]) != ckey else 0.0
        cyc = hand_run_cycles(df, R, C, size["m"], size["k"], size["n"], shadow)
        seq.append((cyc, load, store))
    compute = sum(s[0] for s in seq)
    reads = sum(s[1] for s in seq)
    writes = sum(s[2] for s in seq)
    if not double_buffered:
        return compute, compute + (reads + writes) / bw, reads, writes
    last = len(seq) - 1
    carried = [store if i < last else 0.0 for i, (_, _, store) in enumerate(seq)]  # store of run i's output
    if k_inner:  # spread each output tile's store over the next output tile's runs
        ends = [i for i, (_, _, store) in enumerate(seq) if store]
        carried = [0.0] * len(seq)
        for a, b in zip(ends, ends[1:], strict=False):
            for j in range(a + 1, b + 1):
                carried[j] = seq[a][2] / (b - a)
    total = seq[0][1] / bw + seq[-1][2] / bw
    for i, (cyc, load, _) in enumerate(seq):
        x = (load if i > 0 else 0.0) + carried[i]
        total += max(cyc, x / bw)
    return compute, total, reads, writes


def cached_figures(folder: str, key: list[Any], measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()`` (a synthesis run's JSON figures), cached under ``default_cache_dir()/folder``
    by a hash of ``key`` (everything that determines them: Verilog, tool version, script)."""
    from rtl_gen import default_cache_dir

    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]
    path = default_cache_dir() / folder / f"{digest}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    figures = measure()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(figures), encoding="utf-8")
    tmp.replace(path)
    return figures


def transfer_word_bytes(config: ArrayConfig, command: Any) -> int:
    """DRAM bytes of one word of a LOAD or STORE, from the encoding's rule (``accel_spec.isa``):
    ``lanes * dram_lane_bytes`` for a narrow transfer, the whole word's bytes when ``lanes`` is 0."""
    from accel_spec.isa import Opcode, dram_lane_bytes, dram_word_bytes

    IS = config.dataflow.value == "is"
    requant = command.opcode == Opcode.STORE and bool(command["requant"])
    kind = "requant" if requant else ("ifmap", "weight", "ofmap", "qparam")[command["buffer"]]
    if not command["lanes"]:
        return dram_word_bytes(config.rows, config.cols, IS, config.input_bits, config.acc_bits)[kind]
    return command["lanes"] * dram_lane_bytes(command["buffer"], config.input_bits, config.acc_bits, requant=requant)


#: The requantisation of the random convs below (the identity scale).
REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))


def random_ws_design(rng: random.Random, **fixed: object) -> ArrayConfig:
    bits = rng.choice([8, 8, 16])
    fields = dict(rows=rng.choice([2, 4, 8, 16, 32]), cols=rng.choice([2, 4, 8, 16]), dataflow="ws",
                  ifmap_sram_kib=rng.choice([1, 2, 8, 32]), weight_sram_kib=rng.choice([1, 4, 16]),
                  ofmap_sram_kib=rng.choice([1, 2, 8]), double_buffered=rng.random() < 0.5,
                  shadow_stationary=rng.random() < 0.5, dram_bytes_per_cycle=rng.choice([2.0, 4.0, 8.0, 16.0, 64.0]),
                  input_bits=bits, acc_bits=rng.choice([32, 48]) if bits == 8 else 48)
    fields.update(fixed)
    return ArrayConfig(**fields)  # type: ignore[arg-type]


def random_conv(rng: random.Random, most: int = 30) -> Conv2d:
    kh, kw = rng.choice([1, 3, 5, 7]), rng.choice([1, 3, 5])
    groups = rng.choice([1, 1, 2, 4])
    dil = rng.choice([1, 1, 2])
    return Conv2d(n=1, h=rng.randint(dil * (kh - 1) + 1, most), w=rng.randint(dil * (kw - 1) + 1, most),
                  c_in=groups * rng.randint(1, 40), c_out=groups * rng.randint(1, 40), kh=kh, kw=kw,
                  stride_h=rng.randint(1, 2), stride_w=rng.randint(1, 2), pad_h=rng.randint(0, kh // 2),
                  pad_w=rng.randint(0, kw // 2), pad_h_hi=rng.randint(0, kh // 2), pad_w_hi=rng.randint(0, kw // 2),
                  dilation_h=dil, dilation_w=dil, groups=groups,
                  requant=REQUANT if rng.random() < 0.4 else None, name="c")


def random_conv_batch(rng: random.Random) -> Conv2d:
    """A conv of 2 to 5 images, "same" padding on most so that whole images stack in a run."""
    kh, kw, s = rng.choice([1, 3, 5, 7]), rng.choice([1, 3, 5]), rng.randint(1, 2)
    groups = rng.choice([1, 1, 2])
    return Conv2d(n=rng.randint(2, 5), h=s * rng.randint(max(1, kh // 2), 8), w=rng.randint(kw, 12),
                  c_in=groups * rng.randint(1, 20), c_out=groups * rng.randint(1, 20), kh=kh, kw=kw, stride_h=s,
                  stride_w=rng.randint(1, 2), pad_h=kh // 2, pad_w=kw // 2, pad_w_hi=rng.randint(0, kw // 2),
                  groups=groups, requant=REQUANT if rng.random() < 0.4 else None, name="c")
