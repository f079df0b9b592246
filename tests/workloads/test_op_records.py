"""Op records: checks on construction, the im2col lowering, MACs and byte counts (by hand)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from accel_spec.errors import WorkloadError
from workloads import Conv2d, Gemm, Workload


def test_gemm_counts_by_hand():
    g = Gemm(m=3, k=5, n=7, batch=2, name="x")
    assert g.macs == 2 * 3 * 5 * 7
    assert g.input_bytes(8) == 2 * 3 * 5
    assert g.weight_bytes(16) == 2 * 5 * 7 * 2
    assert g.output_bytes(32) == 2 * 3 * 7 * 4
    assert g.weight_bytes(4) == (2 * 5 * 7 * 4 + 7) // 8  # 35 bytes, rounded up
    assert g.to_gemm() is g


@pytest.mark.parametrize("field", ["m", "k", "n", "batch"])
@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "4"])
def test_gemm_rejects_bad_dimensions(field, bad):
    dims = {"m": 1, "k": 1, "n": 1, "batch": 1, field: bad}
    with pytest.raises(WorkloadError, match=rf"gemm {field} must be a positive integer, not {bad!r}"):
        Gemm(**dims)


def test_gemm_is_frozen_and_keyword_only():
    g = Gemm(m=1, k=2, n=3)
    with pytest.raises(AttributeError):
        g.m = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        Gemm(1, 2, 3)  # type: ignore[misc]


def test_conv_output_size_and_lowering_by_hand():
    # ResNet-18 conv1: 224x224x3, 7x7/2, pad 3 -> 112x112x64.
    c = Conv2d(n=1, h=224, w=224, c_in=3, c_out=64, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3)
    assert (c.out_h, c.out_w) == (112, 112)
    assert c.to_gemm() == Gemm(m=112 * 112, k=3 * 7 * 7, n=64, batch=1)
    assert c.macs == 112 * 112 * 64 * 3 * 49
    assert c.input_bytes(8) == 224 * 224 * 3
    assert c.weight_bytes(8) == 7 * 7 * 3 * 64
    assert c.output_bytes(32) == 112 * 112 * 64 * 4


def test_conv_asymmetric_padding_and_dilation():
    # JAX "SAME" with stride 2 on an even input pads (0, 1); dilation 2 spans 5 pixels for k=3.
    c = Conv2d(n=2, h=8, w=9, c_in=4, c_out=6, kh=3, kw=3, stride_h=2, stride_w=1, pad_h=0, pad_h_hi=1,
               pad_w=2, dilation_w=2)
    assert c.pad_w_hi == 2  # symmetric unless given
    assert c.out_h == (8 + 0 + 1 - 3) // 2 + 1
    assert c.out_w == (9 + 2 + 2 - 5) // 1 + 1
    assert Conv2d(n=1, h=4, w=4, c_in=1, c_out=1, kh=1, kw=1, pad_h=1) == Conv2d(
        n=1, h=4, w=4, c_in=1, c_out=1, kh=1, kw=1, pad_h=1, pad_h_hi=1)


def test_depthwise_conv_lowers_to_groups_gemms():
    c = Conv2d(n=1, h=14, w=14, c_in=96, c_out=96, kh=3, kw=3, pad_h=1, pad_w=1, groups=96)
    assert c.to_gemm() == Gemm(m=14 * 14, k=9, n=1, batch=96)
    assert c.macs == 14 * 14 * 96 * 9
    assert c.weight_bytes(8) == 3 * 3 * 1 * 96


def test_conv_rejects_bad_values():
    base = dict(n=1, h=8, w=8, c_in=4, c_out=4, kh=3, kw=3)
    with pytest.raises(WorkloadError, match="conv2d kh must be a positive integer, not 0"):
        Conv2d(**{**base, "kh": 0})
    with pytest.raises(WorkloadError, match="conv2d pad_h must be a non-negative integer, not -1"):
        Conv2d(**{**base, "pad_h": -1})
    with pytest.raises(WorkloadError, match="conv2d c_in must be divisible by groups=3, not 4"):
        Conv2d(**{**base, "groups": 3})
    with pytest.raises(WorkloadError, match="conv2d kh=9"):
        Conv2d(**{**base, "kh": 9})


def test_workload_totals_and_counts():
    g = Gemm(m=2, k=3, n=4)
    c = Conv2d(n=1, h=4, w=4, c_in=2, c_out=2, kh=3, kw=3, pad_h=1, pad_w=1)
    w = Workload("w", (g, c), (5, 1))
    assert w.total_macs == 5 * 24 + 16 * 2 * 18
    assert w.weight_bytes(8) == 5 * 12 + 9 * 2 * 2
    assert Workload("w", [g]).counts == (1,)
    assert w.gemms()[1] == (c.to_gemm(), 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ops": ()}, "at least one op"),
        ({"ops": (Gemm(m=1, k=1, n=1),), "counts": (1, 2)}, "one entry per op"),
        ({"ops": (Gemm(m=1, k=1, n=1),), "counts": (0,)}, "count must be a positive integer, not 0"),
        ({"ops": ("gemm",)}, "must be Gemm or Conv2d"),
    ],
)
def test_workload_rejects_bad_input(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        Workload("w", **kwargs)


def test_importing_ops_does_not_import_jax():
    code = "import sys, workloads, workloads.ops; print('jax' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
