"""The im2col form (``perf_model.compiler.im2col_form``): a conv as a 1x1 conv over its windows,
exact on random shapes, and the form a network's first conv runs in when it beats the others."""

from __future__ import annotations

import dataclasses

import numpy as np

from accel_dse.design_files import load_design
from perf_model import gemm_program_cycles
from perf_model.compiler.conv_forms import form_conv, host_writes, reshape_input, reshape_weights
from perf_model.compiler.conv_network import compile_conv_network, input_steps
from perf_model.compiler.conv_score import conv_figures, conv_steps
from perf_model.compiler.im2col_form import im2col_conv
from workloads._reference import im2col
from workloads.ops import Conv2d, Requant

RQ = Requant(multiplier=(1 << 30,), shift=(0,))


def _conv(op: Conv2d, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The conv as the references' im2col GEMM, in int64."""
    a = im2col(x.astype(np.int64), dataclasses.replace(op, n=x.shape[0]))
    return (a @ w.astype(np.int64).reshape(-1, w.shape[3])).reshape(x.shape[0], op.out_h, op.out_w, w.shape[3])


def test_the_im2col_conv_gives_the_convs_outputs_exactly_on_random_shapes():
    """Kernels 1-7, strides 1-3, dilations 1-2, asymmetric pads: a 1x1 stride-1 conv over ``out_h x
    out_w`` pixels of ``kh * kw * c_in`` channels, every output equal (the reshape as ``conv_forms``
    runs it for ``simulate``); a 1x1 stride-1 conv without pads has no such form."""
    rng = np.random.default_rng(5)
    checked = 0
    while checked < 120:
        kh, kw, sh, sw, dh, dw = (int(v) for v in rng.integers(1, [8, 8, 4, 4, 3, 3]))
        h, w = int(rng.integers(dh * (kh - 1) + 1, 16)), int(rng.integers(dw * (kw - 1) + 1, 16))
        op = Conv2d(n=2, h=h, w=w, c_in=int(rng.integers(1, 4)), c_out=3, kh=kh, kw=kw, stride_h=sh, stride_w=sw,
                    dilation_h=dh, dilation_w=dw, pad_h=int(rng.integers(kh)), pad_w=int(rng.integers(kw)),
                    pad_h_hi=int(rng.integers(kh)), pad_w_hi=int(rng.integers(kw)))
        new = im2col_conv(op)
        if new is None:
            assert (op.kh, op.kw, op.stride_h, op.stride_w, op.pad_h, op.pad_w, op.pad_h_hi, op.pad_w_hi) == (
                1, 1, 1, 1, 0, 0, 0, 0)
            continue
        assert (new.kh, new.kw, new.stride_h, new.stride_w, new.pad_h, new.pad_w_hi) == (1, 1, 1, 1, 0, 0)
        assert (new.h, new.w, new.c_in) == (op.out_h, op.out_w, op.kh * op.kw * op.c_in)
        assert (new.out_h, new.out_w) == (op.out_h, op.out_w)
        x = rng.integers(-128, 128, (2, op.h, op.w, op.c_in))
        wt = rng.integers(-128, 128, (op.kh, op.kw, op.c_in, 3))
        xs, ws = reshape_input(x, op, ("im2col",)), reshape_weights(wt, op, ("im2col",))
        assert form_conv(op, ("im2col",)) == new and xs.shape == (2, new.h, new.w, new.c_in)
        assert np.array_equal(_conv(new, xs, ws), _conv(op, x, wt)), (op, new)
        assert host_writes(op, ("im2col",)) == (("im2col", xs.size),)
        checked += 1
    assert im2col_conv(Conv2d(n=1, h=4, w=4, c_in=4, c_out=4, kh=3, kw=3, groups=4)) is None  # depthwise


def test_a_networks_stem_runs_as_im2col_where_that_beats_its_windows():
    """ResNet's 7x7/2 stem on 3 channels on an 8x8 array: no reshape the per-op plan scores on chip
    fits a word (``conv_steps`` is ``()``: 3 of 8 rows filled), while its 147-channel windows fill the
    rows; the network's input is the host's to write, so the one program runs the stem over them
    (``input_steps == ("im2col",)``, ``a0`` laid out as the 1x1 conv's input) and is faster than
    over the raw image. On ``edge`` (128 rows) space-to-depth and row stacking win: they stay."""
    config = dataclasses.replace(load_design("tiny"), rows=8, cols=8, vector_unit=True, ifmap_sram_kib=256,
                                 weight_sram_kib=64, ofmap_sram_kib=64, dram_bytes_per_cycle=16.0)
    stem = Conv2d(n=1, h=32, w=32, c_in=3, c_out=8, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3,
                  requant=RQ)
    nxt = Conv2d(n=1, h=16, w=16, c_in=8, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ)
    flat = im2col_conv(stem)
    assert conv_figures(config, flat, True).total < conv_figures(config, stem, True).total
    assert input_steps(config, stem) == ("im2col",)
    raw = compile_conv_network(config, [stem, nxt], [None])
    formed = compile_conv_network(config, [stem, nxt], [None], input_form=True)
    assert formed.input_steps == ("im2col",) and raw.input_steps == ()
    assert formed.tensors["a0"].shape == (16 * 16, 147)
    assert gemm_program_cycles(config, formed).total < gemm_program_cycles(config, raw).total
    edge = load_design("edge")
    assert input_steps(edge, stem) == conv_steps(edge, stem, True) != ()
