"""SQNR cost of the vector unit's door (accel_spec.vector_door): fp8, int4 and bf16 activations through int8.

A design whose activations are fp8_e4m3, fp8_e5m2, int4 or bf16 runs the int8 vector unit behind a door:
codes in -> int8 (value * 16, nearest even, saturated) -> the integer op -> back to the format
(nearest even). This prints, per vector op and activation format, the SQNR (dB) of the op's output
against its float64 definition evaluated on the same input values the op receives (the format's
values: the input's own rounding to the format is not counted, the door's and the op's are):

* ``int8``: the unit on int8 inputs, no door (the int8 design's figure);
* each other format: its values through the door, the op and back;

and, as a floor, the float64 result rounded once to each format (on the unit's output grid: value
= int8 code / 16, softmax ``127 p / 16``): what any vector unit writing that format would lose.

The cost of the conversion is the difference to the ``int8`` column. Data: rows of standard normal
values times a per-row scale in {0.5, 1, 2} (softmax: scores of scale 2), 512 rows of 64.

    .venv/bin/python bench/vector_door_accuracy.py [--rows N]
"""

from __future__ import annotations

import argparse
import math

import jax.numpy as jnp
import numpy as np

from workloads import vector_params as vp
from workloads._int_ops import _run
from workloads.format_codes import from_codes, to_codes
from workloads.formats import quantise
from workloads.vector_door import door_vector_op

FORMATS = ("int8", "fp8_e4m3", "fp8_e5m2", "int4", "bf16")
N = 64
erf = np.vectorize(math.erf)


def _float(kind: str, x: np.ndarray, y: np.ndarray, scale: float) -> np.ndarray:
    """The op's float64 definition on real values (softmax: probabilities)."""
    if kind == "add":
        return x + y
    if kind == "gelu":
        return x * 0.5 * (1 + erf(x / math.sqrt(2)))
    if kind == "silu":
        return x / (1 + np.exp(-x))
    if kind == "layernorm":
        c = x - x.mean(-1, keepdims=True)
        return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)
    if kind == "rmsnorm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    z = x * scale
    p = np.exp(z - z.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def _params(kind: str, scale: float) -> dict[str, int]:
    return {"add": vp.add_params(1 / 16, 1 / 16, 1 / 16), "gelu": vp.GELU_PARAMS, "silu": {"gated": 0},
            "layernorm": vp.norm_params(N, 1e-5), "rmsnorm": vp.norm_params(N, 1e-6),
            "softmax": vp.softmax_params(scale, None)}[kind]


def _to_format(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, values)`` of real ``x`` in ``fmt`` (int8: value = code / 16; int4: value = code)."""
    if fmt == "int8":
        q = np.clip(np.rint(x * 16), -128, 127).astype(np.int64)
        return q, q / 16
    if fmt == "int4":
        q = np.clip(np.rint(x), -8, 7).astype(np.int64)
        return q, q.astype(np.float64)
    v = quantise(x, fmt)
    return to_codes(v, fmt).astype(np.int64), v


def _values(codes: np.ndarray, fmt: str, kind: str) -> np.ndarray:
    """Real values of output codes (softmax: probabilities, the unit's codes being round(127 p))."""
    if fmt == "int8":
        v = codes / 16
    elif fmt == "int4":
        v = codes.astype(np.float64)
    else:
        v = from_codes(codes, fmt)
    return v * 16 / 127 if kind == "softmax" else v


def sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(((ref - got) ** 2).sum())
    return 300.0 if noise == 0 else 10 * math.log10(float((ref ** 2).sum()) / noise)


def table(rows: int, seed: int = 0) -> list[tuple[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    out = []
    for kind in ("add", "gelu", "silu", "layernorm", "rmsnorm", "softmax"):
        sigma = rng.choice([0.5, 1.0, 2.0], size=(rows, 1)) if kind != "softmax" else 2.0
        x = rng.standard_normal((rows, N)) * sigma
        y = rng.standard_normal((rows, N)) * sigma
        scale = 1.0
        params = _params(kind, scale)
        figures = {}
        for fmt in FORMATS:
            (xc, xv), (yc, yv) = _to_format(x, fmt), _to_format(y, fmt)
            ref = _float(kind, xv, yv, scale)
            args = (xc, yc) if kind == "add" else (xc,)
            if fmt == "int8":
                got = np.asarray(_run(kind, params, *(jnp.asarray(a.astype(np.int8)) for a in args))).astype(np.int64)
            else:
                got = door_vector_op(kind, params, fmt, *args)
            figures[fmt] = sqnr(ref, _values(got, fmt, kind))
            # the floor: the float result rounded once to the format (on the unit's output grid)
            unit = ref * 127 / 16 if kind == "softmax" else ref
            figures[f"{fmt} floor"] = sqnr(ref, _values(_to_format(unit, fmt)[0], fmt, kind))
        out.append((kind, figures))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512)
    args = parser.parse_args()
    print(f"SQNR (dB) of each vector op against float64 on its input values, {args.rows} rows of {N}")
    print(f"{'op':<10}" + "".join(f"{f:>12}" for f in FORMATS) + "   door cost fp8_e4m3 / e5m2 (dB)")
    rows = table(args.rows)
    for kind, fig in rows:
        cells = "".join(f"{fig[f]:>12.2f}" for f in FORMATS)
        print(f"{kind:<10}{cells}   {fig['int8'] - fig['fp8_e4m3']:>6.2f} / {fig['int8'] - fig['fp8_e5m2']:.2f}")
    print("\nfloor: the float64 result rounded once to the format (what any unit writing that format loses)")
    print(f"{'op':<10}" + "".join(f"{f:>12}" for f in FORMATS))
    for kind, fig in rows:
        print(f"{kind:<10}" + "".join(f"{fig[f + ' floor']:>12.2f}" for f in FORMATS))


if __name__ == "__main__":
    main()
