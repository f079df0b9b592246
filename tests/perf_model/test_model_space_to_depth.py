"""Space-to-depth (``perf_model.compiler.space_to_depth``): a strided conv as a stride-1 conv over its
reshaped input gives the conv's outputs exactly, and the model scores the faster of the two forms."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax import lax

import perf_model
from accel_dse.design_files import load_design
from perf_model.compiler import conv_score
from perf_model.compiler.space_to_depth import s2d_conv, s2d_input, s2d_weights
from workloads import resolve
from workloads._reference import im2col
from workloads.ops import Conv2d, Requant, Workload

RQ = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)


def _lax(op: Conv2d, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.asarray(lax.conv_general_dilated(
        jnp.asarray(x, jnp.int32), jnp.asarray(w, jnp.int32), (op.stride_h, op.stride_w),
        ((op.pad_h, op.pad_h_hi), (op.pad_w, op.pad_w_hi)), dimension_numbers=("NHWC", "HWIO", "NHWC")))


def _conv(op: Conv2d, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The conv as the references' im2col GEMM, in int64 (a lax compile per random shape would take a
    minute)."""
    a = im2col(x.astype(np.int64), dataclasses.replace(op, n=x.shape[0]))
    return (a @ w.astype(np.int64).reshape(-1, w.shape[3])).reshape(x.shape[0], op.out_h, op.out_w, w.shape[3])


def test_the_reference_conv_is_laxs():
    rng = np.random.default_rng(1)
    for op in (Conv2d(n=1, h=9, w=10, c_in=3, c_out=4, kh=7, kw=5, stride_h=2, stride_w=3, pad_h=3, pad_w=1,
                      pad_h_hi=2, pad_w_hi=0),
               Conv2d(n=2, h=8, w=8, c_in=2, c_out=3, kh=3, kw=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1)):
        x = rng.integers(-128, 128, (op.n, op.h, op.w, op.c_in))
        w = rng.integers(-128, 128, (op.kh, op.kw, op.c_in, op.c_out))
        assert np.array_equal(_conv(op, x, w), _lax(op, x, w))


def test_the_reshaped_conv_gives_the_convs_outputs_exactly_on_random_shapes():
    """Strides 1-3 per axis, kernels 1-7, asymmetric pads, sizes not a multiple of the stride; one
    shape through lax too."""
    rng = np.random.default_rng(0)
    checked = refused = 0
    while checked < 150:
        sh, sw, kh, kw = (int(v) for v in rng.integers(1, [4, 4, 8, 8]))
        h, w = int(rng.integers(kh, 20)), int(rng.integers(kw, 20))
        op = Conv2d(n=2, h=h, w=w, c_in=3, c_out=5, kh=kh, kw=kw, stride_h=sh, stride_w=sw,
                    pad_h=int(rng.integers(kh)), pad_w=int(rng.integers(kw)), pad_h_hi=int(rng.integers(kh)),
                    pad_w_hi=int(rng.integers(kw)))
        new = s2d_conv(op)
        if new is None:
            refused += 1
            continue
        assert (new.stride_h, new.stride_w, new.c_in) == (1, 1, 3 * sh * sw)
        assert (new.out_h, new.out_w) == (op.out_h, op.out_w)
        x, wt = rng.integers(-128, 128, (2, h, w, 3)), rng.integers(-128, 128, (kh, kw, 3, 5))
        xs = s2d_input(x, op)
        assert xs.shape == (2, -(-h // sh), -(-w // sw), 3 * sh * sw)
        assert np.count_nonzero(xs) == np.count_nonzero(x)  # every input value once, and zeros
        assert np.array_equal(_conv(new, xs, s2d_weights(wt, op)), _conv(op, x, wt)), (op, new)
        checked += 1
    assert refused > 20
    op = Conv2d(n=1, h=11, w=9, c_in=3, c_out=4, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3)
    x, wt = rng.integers(-128, 128, (1, 11, 9, 3)), rng.integers(-128, 128, (7, 7, 3, 4))
    assert np.array_equal(_lax(s2d_conv(op), s2d_input(x, op), s2d_weights(wt, op)), _lax(op, x, wt))


def test_grouped_dilated_and_unstrided_convs_are_not_reshaped():
    base = Conv2d(n=1, h=16, w=16, c_in=4, c_out=4, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1)
    assert s2d_conv(base) is not None
    for change in ({"groups": 2}, {"dilation_h": 2}, {"stride_h": 1, "stride_w": 1}, {"kh": 1, "kw": 1}):
        assert s2d_conv(dataclasses.replace(base, **change)) is None, change


def test_the_scorer_keeps_the_faster_form():
    """On ``tiny``, a 1-channel 7x7 stride-2 conv runs faster reshaped (4 channels a pixel, one
    window of 16 taps instead of 49 one-tap words), and the figures are the reshaped program's; a
    64-channel 3x3 stride-2 conv keeps its own form (reshaped, 256 channels and 4 taps a pixel)."""
    tiny = load_design("tiny")
    stem = Conv2d(n=1, h=12, w=12, c_in=1, c_out=6, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3,
                  requant=RQ)
    own, reshaped = conv_score._figures(tiny, stem, True), conv_score._figures(tiny, s2d_conv(stem), True)
    assert reshaped.total < own.total
    got = conv_score.conv_figures(tiny, stem, True)
    assert got.form.startswith("space-to-depth 2x2: 4 channels") and got.total == reshaped.total
    assert conv_score.conv_form(tiny, stem, True) == s2d_conv(stem)
    report = perf_model.evaluate(tiny, Workload(name="stem", ops=(stem,), counts=(1,))).ops[0]
    assert report.conv_path == "chip" and report.total_cycles == reshaped.total
    assert report.conv_note.startswith("space-to-depth")

    tpu = load_design("tpu-v1")
    down = Conv2d(n=1, h=56, w=56, c_in=64, c_out=128, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1,
                  requant=RQ)
    own, reshaped = conv_score._figures(tpu, down, True), conv_score._figures(tpu, s2d_conv(down), True)
    assert own.total <= reshaped.total
    assert conv_score.conv_figures(tpu, down, True).form == ""
    assert conv_score.conv_form(tpu, down, True) is down


def test_resnets_stem_runs_reshaped_on_a_256_row_array():
    """ResNet-18's stem (3 channels, 7x7, stride 2) on ``tpu-v1``: the host's im2col GEMM was the
    faster path until now; reshaped it runs on chip in fewer cycles and reads fewer DRAM bytes."""
    config = load_design("tpu-v1")
    wl = resolve("resnet18:batch=8")
    stem = wl.ops[0]
    gemm = perf_model.evaluate(config, Workload(name="g", ops=(stem.to_gemm(),), counts=(1,))).ops[0]
    report = perf_model.evaluate(config, Workload(name="s", ops=(stem,), counts=(1,))).ops[0]
    assert report.conv_path == "chip" and report.conv_note.startswith("space-to-depth 2x2: 12 channels")
    assert report.total_cycles < gemm.total_cycles
    assert report.dram_read_bytes < gemm.dram_read_bytes
    whole = perf_model.evaluate(config, wl)
    (reshape,) = [h for h in whole.host_work if h["kind"] == "space_to_depth"]
    assert reshape["name"] == "conv1" and reshape["elements"] == 8 * 224 * 224 * 3  # the host's work, named
