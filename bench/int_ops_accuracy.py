"""Accuracy of the integer vector ops (workloads/_int_ops.py) against their float versions.

Prints, per op, the max abs error on its input range in output LSBs (codes with 4 fractional
bits; softmax: probability codes 127 p), against the float function of the same int8 input,
with the float result clamped to the int8 range (saturation is the format's, not the op's
error); then the SQNR (dB) of each int8 builtin's output against its ``float_ref`` form (the
same int8 weights and inputs in float32, nothing rounded), for a BERT-base layer, a LLaMA block
and ResNet-18 at small sizes.

    .venv/bin/python bench/int_ops_accuracy.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import workloads
from workloads import _int_ops as iops

CODES = np.arange(-128, 128)
erf = np.vectorize(math.erf)


def _err(got: object, want: np.ndarray) -> float:
    return float(np.abs(np.asarray(got, np.float64) - np.clip(want, -128, 127)).max())


def _rows(rng: np.random.Generator, count: int, n: int, sigmas: tuple[float, ...]) -> np.ndarray:
    """Rows of int8 codes of standard deviations ``sigmas`` (codes, before rounding), with offsets."""
    sigma = rng.choice(sigmas, size=(count, 1))
    centre = rng.integers(-64, 64, size=(count, 1))
    return np.clip(np.round(centre + sigma * rng.standard_normal((count, n))), -128, 127).astype(np.int8)


def _norm_ref(x: np.ndarray, centre: bool, eps: float) -> np.ndarray:
    v = x.astype(np.float64) / 16
    m = v.mean(-1, keepdims=True) if centre else 0.0
    return (v - m) / np.sqrt(((v - m) ** 2).mean(-1, keepdims=True) + eps) * 16


def _softmax_ref(s: np.ndarray, scale: float, offset: int | None) -> np.ndarray:
    z = s.astype(np.float64) / 16 * scale
    if offset is not None:
        q, k = np.arange(s.shape[-2])[:, None], np.arange(s.shape[-1])[None, :]
        z = np.where(k <= q + offset, z, -np.inf)
    p = np.exp(z - z.max(-1, keepdims=True))
    return 127 * p / p.sum(-1, keepdims=True)


def op_errors(rng: np.random.Generator, quick: bool) -> list[tuple[str, str, float]]:
    """``(op, input range, max abs error in output LSBs)``."""
    a, b = (x.reshape(-1).astype(np.int8) for x in np.meshgrid(CODES, CODES))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    c = CODES.astype(np.int8)
    v = CODES / 16
    out = [
        ("add (equal scales)", "all int8 pairs", _err(iops.add(a, b), af + bf)),
        ("add (rescale 1/16, 3/64 -> 1/16)", "all int8 pairs",
         _err(iops.add(a, b, scale_b=3 / 64), af + bf * 3 / 4)),
        ("mul", "all int8 pairs", _err(iops.mul(a, b), af * bf / 16)),
        ("relu6", "all int8", _err(iops.relu6(c), np.clip(CODES, 0, 96))),
        ("gelu (i-GELU)", "all int8", _err(iops.gelu(c), v * 0.5 * (1 + erf(v / math.sqrt(2))) * 16)),
        ("silu (table)", "all int8", _err(iops.silu(c), v / (1 + np.exp(-v)) * 16)),
        ("silu x gate", "all int8 pairs", _err(iops.silu(a, b), af / 16 / (1 + np.exp(-af / 16)) * bf)),
    ]
    x = rng.integers(-128, 128, size=(2, 16, 16, 8), dtype=np.int8)
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x.astype(float), ((0, 0), (1, 1), (1, 1), (0, 0))),
                                                   (3, 3), axis=(1, 2))[:, ::2, ::2]
    out.append(("maxpool 3x3/2 pad 1", "random int8", _err(iops.maxpool(x, window=3, stride=2, pad=1),
                                                         np.where(win == 0, -128, win).max(axis=(-2, -1)))))
    out.append(("avgpool 3x3/2 pad 1", "random int8", _err(iops.avgpool(x, window=3, stride=2, pad=1),
                                                         win.mean(axis=(-2, -1)))))
    out.append(("avgpool global 16x16", "random int8", _err(iops.global_avgpool(x), x.mean(axis=(1, 2)))))
    count = 64 if quick else 512
    for n in (64, 768, 4096):
        for label, sigmas in (("sigma 1..200 codes", (1, 2, 4, 16, 32, 64, 200)), ("sigma 0.3 codes", (0.3,))):
            rows = _rows(rng, count, n, sigmas)
            out.append((f"layernorm n={n}", f"rows of {label}", _err(iops.layernorm(rows),
                                                                     _norm_ref(rows, True, 1e-5))))
            out.append((f"rmsnorm n={n}", f"rows of {label}", _err(iops.rmsnorm(rows),
                                                                   _norm_ref(rows, False, 1e-6))))
    for keys, scale, offset in ((128, 1 / 8, None), (128, 1 / math.sqrt(128), 0), (2049, 1 / math.sqrt(128), 2048),
                                (64, 1.0, None), (64, 4.0, None)):
        queries = 1 if offset == 2048 else keys
        s = rng.integers(-128, 128, size=(4, queries, keys), dtype=np.int8)
        mask = "causal" if offset == 0 else f"kv cache {offset}" if offset else "none"
        out.append((f"softmax {queries}x{keys} scale {scale:.3g} mask {mask}", "random int8 scores",
                    _err(iops.softmax(s, scale=scale, causal_offset=offset), _softmax_ref(s, scale, offset))))
    x = rng.integers(-128, 128, size=(1, 64, 2, 128), dtype=np.int8)
    for start in (0, 2048):
        half = 64
        ang = np.arange(start, start + 64)[:, None] * 10000.0 ** (-np.arange(half) / half)
        cos, sin = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
        x1, x2 = x[..., :half].astype(float), x[..., half:].astype(float)
        want = np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
        out.append((f"rope dh=128 positions {start}..{start + 63}", "random int8", _err(iops.rope(x, start=start),
                                                                                      want)))
    return out


def sqnr_db(got: np.ndarray, ref: np.ndarray) -> float:
    noise = float(((got.astype(np.float64) - ref) ** 2).sum())
    return 10 * math.log10(float((ref.astype(np.float64) ** 2).sum()) / noise) if noise else math.inf


def builtin_sqnr(spec: str) -> tuple[float, float, float, float]:
    """SQNR (dB) against the float_ref form of the int8 builtin's first output and of the int8 form
    with float vector ops; RMS of the reference (codes); share of int8 outputs at +-127/-128."""
    outs = []
    for form in ("int8", "int8_float_vector", "float_ref"):
        model = workloads.builtin_model(spec, form)
        out = model.fn(*model.make_args(0))
        outs.append(np.asarray(out[0] if isinstance(out, tuple) else out, np.float64))
    got, floatvec, ref = outs
    return (sqnr_db(got, ref), sqnr_db(floatvec, ref), float(np.sqrt((ref**2).mean())),
            float(np.mean((got >= 127) | (got <= -128))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows, smaller builtins")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("op | input | max abs error (output LSBs)")
    for name, where, err in op_errors(rng, args.quick):
        print(f"{name} | {where} | {err:.3f}")
    specs = ["bert_base:seq=16", "llama_block:seq=16,d=512,heads=4,ffn=1376", "resnet18:res=32"] if args.quick else [
        "bert_base:seq=64", "llama_block:seq=64,d=1024,heads=8,ffn=2752",
        "llama_decode:kv=256,d=1024,heads=8,ffn=2752", "resnet18:res=64"]
    print()
    print("builtin | SQNR int8 vs float_ref (dB) | SQNR int8 with float vector ops (dB) | reference RMS (codes) "
          "| int8 outputs saturated | seconds")
    for spec in specs:
        t0 = time.perf_counter()
        db, db_float, rms, sat = builtin_sqnr(spec)
        print(f"{spec} | {db:.1f} | {db_float:.1f} | {rms:.1f} | {sat:.4f} | {time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
