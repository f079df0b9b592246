"""Print post-training quantisation figures of float JAX models: trace time, quantisation time, SQNR.

Run: ``PYTHONPATH=. .venv/bin/python bench/ptq_float_models.py``. Figures only, no pass/fail.
Two float models with fixed seeded weights (a GELU MLP whose first layer's columns are 400x
apart, undone by a folded per-channel scale; a pre-norm transformer block: layer norm, causal
softmax attention, GELU FFN, residual adds), each quantised (``workloads._ptq.quantise_model``)
per tensor and per channel to int8, W4A8, int4, fp8_e4m3, fp8_e5m2 and bf16, 4 seeded
calibration samples, the SQNR on a held-out one. Times are wall seconds on this machine (the
first quantisation of a model includes JAX's compilation of its primitives).
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from workloads._ptq import quantise_model
from workloads._tracer import trace

S, F32 = jax.ShapeDtypeStruct, jnp.float32
T, D, F = 64, 128, 512
PAIRS = (("int8", "int8"), ("int4", "int8"), ("int4", "int4"), ("fp8_e4m3", "fp8_e4m3"),
         ("fp8_e5m2", "fp8_e5m2"), ("bf16", "bf16"))


def _w(shape: tuple[int, int], seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)


def _models() -> dict[str, tuple]:
    cols = np.exp(np.linspace(-3, 3, F)).astype(np.float32)
    w1, w2 = _w((D, F), 1) * cols, _w((F, D), 2)

    def mlp(x, w1, w2):
        return x + jax.nn.gelu((x @ w1) / cols) @ w2

    wq, wk, wv, wo, f1, f2 = _w((D, D), 3), _w((D, D), 4), _w((D, D), 5), _w((D, D), 6), _w((D, F), 7), _w((F, D), 8)

    def ln(x):
        m = jnp.mean(x, -1, keepdims=True)
        return (x - m) / jnp.sqrt(jnp.mean((x - m) ** 2, -1, keepdims=True) + 1e-5)

    def block(x, wq, wk, wv, wo, f1, f2):
        h = ln(x)
        s = (h @ wq) @ (h @ wk).T / math.sqrt(D)
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
        x = x + (jax.nn.softmax(s, axis=-1) @ (h @ wv)) @ wo
        return x + jax.nn.gelu(ln(x) @ f1) @ f2

    return {"mlp (folded scale)": (mlp, (S((T, D), F32), w1, w2)),
            "transformer block": (block, (S((T, D), F32), wq, wk, wv, wo, f1, f2))}


def main() -> None:
    print(f"{'model':20s} {'trace s':>8s} {'W':>9s} {'A':>9s} {'quant':>8s} {'SQNR dB':>8s} {'PTQ s':>6s}")
    for name, (fn, args) in _models().items():
        t = time.perf_counter()
        wl = trace(fn, *args, name="m")
        traced = time.perf_counter() - t
        for w, a in PAIRS:
            for gran in ("tensor", "channel"):
                t = time.perf_counter()
                r = quantise_model(fn, args, w, a, granularity=gran)
                print(f"{name:20s} {traced:8.3f} {w:>9s} {a:>9s} {gran:>8s} {r.sqnr_db:8.1f} "
                      f"{time.perf_counter() - t:6.2f}")
        print(f"{'':20s} {wl.total_macs:,} MACs, {len(wl.vector_ops)} vector ops, "
              f"{r.matrix_ops} matrix ops quantised")


if __name__ == "__main__":
    main()
