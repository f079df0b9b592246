"""SCALE-Sim topology CSVs and Timeloop problem YAML: hand counts, round trips, bad rows."""

from __future__ import annotations

import pytest

import workloads
from accel_spec.errors import WorkloadError

CONV_CSV = """Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,

Conv1     ,224 ,224 ,11 ,11 ,3  ,96  ,4 ,
\tConv2   ,27  ,27  ,5  ,5  ,96 ,256 ,1,#a comment
DP_conv3, 112, 112, 3, 3, 32, 1, 1, 2,
FC, 1, 1, 1, 1, 1024, 1000, 1
"""

GEMM_CSV = """Layer Name, M, N, K,
QKT,1024,1024,64
PW-FF-L1, 1024, 3072, 1600,
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_scalesim_conv_form_by_hand(tmp_path):
    wl = workloads.resolve(_write(tmp_path, "alex.csv", CONV_CSV))
    conv1, conv2, dp, fc = wl.ops
    assert wl.source == "scalesim" and [o.name for o in wl.ops] == ["Conv1", "Conv2", "DP_conv3", "FC"]
    assert conv1.macs == 54 * 54 * 11 * 11 * 3 * 96  # out (224-11)//4+1 = 54, no padding
    assert conv2.macs == 23 * 23 * 5 * 5 * 96 * 256  # out 27-5+1 = 23
    # DP: depthwise, one filter per channel; strides 1 (height) and 2 (width): out 110 x 55.
    assert (dp.groups, dp.c_out, dp.out_h, dp.out_w) == (32, 32, 110, 55)
    assert dp.macs == 110 * 55 * 3 * 3 * 32
    assert fc.macs == 1024 * 1000
    assert conv2.origin.endswith("alex.csv:4")  # its line in the file


def test_scalesim_gemm_form_by_hand(tmp_path):
    qkt, ff = workloads.resolve(_write(tmp_path, "gpt2.csv", GEMM_CSV)).ops
    assert (qkt.m, qkt.n, qkt.k) == (1024, 1024, 64) and (ff.m, ff.n, ff.k) == (1024, 3072, 1600)


def _to_scalesim(wl):
    """A SCALE-Sim conv-form CSV of a workload's convs, padding folded into the ifmap (as SCALE-Sim wants)."""
    rows = ["Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,"]
    for op in wl.ops:
        if op.kind == "conv2d":
            rows.append(f"{op.name}, {op.h + op.pad_h + op.pad_h_hi}, {op.w + op.pad_w + op.pad_w_hi}, {op.kh}, "
                        f"{op.kw}, {op.c_in}, {op.c_out}, {op.stride_h}, {op.stride_w},")
        else:
            rows.append(f"{op.name}, {op.m}, {op.k}, 1, {op.k}, 1, {op.n}, 1,")  # SCALE-Sim's own GEMM-as-conv
    return "\n".join(rows) + "\n"


def test_resnet18_round_trip_through_a_scalesim_csv(tmp_path):
    traced = workloads.resolve("resnet18")
    back = workloads.resolve(_write(tmp_path, "resnet18.csv", _to_scalesim(traced)))
    assert back.total_macs == traced.total_macs and len(back.ops) == len(traced.ops)


CONV_YAML = """problem:
  shape:
    name: CNN-Layer
    dimensions: [ C, M, R, S, N, P, Q ]
    coefficients:
      - name: Wstride
        default: 1
  instance:
    C: 64
    M: 128
    R: 3
    S: 3
    N: 2
    P: 28
    Q: 14
    Wstride: 2
    Hstride: 2
"""


def test_timeloop_cnn_layer_by_hand(tmp_path):
    wl = workloads.resolve(_write(tmp_path, "layer.yaml", CONV_YAML))
    (op,) = wl.ops
    assert wl.source == "timeloop" and op.name == "CNN-Layer"
    assert (op.out_w, op.out_h, op.w, op.h) == (28, 14, 27 * 2 + 3, 13 * 2 + 3)  # P, Q; unpadded input
    assert op.macs == 64 * 128 * 3 * 3 * 2 * 28 * 14


def test_timeloop_gemm_and_grouped_layers(tmp_path):
    gemm = "problem:\n  shape: {name: gemm, dimensions: [M, N, K]}\n  instance: {M: 64, N: 32, K: 128}\n"
    (op,) = workloads.resolve(_write(tmp_path, "g.yml", gemm)).ops
    assert (op.m, op.n, op.k) == (64, 32, 128)
    # R is the filter width, S its height (R pairs with Wstride and P, the output width).
    grouped = "problem:\n  instance: {G: 8, C: 4, M: 2, R: 5, S: 3, N: 1, P: 10, Q: 12}\n"
    (op,) = workloads.resolve(_write(tmp_path, "dw.yaml", grouped)).ops
    assert (op.groups, op.c_in, op.c_out) == (8, 32, 16) and op.macs == 8 * 4 * 2 * 5 * 3 * 10 * 12
    assert (op.kw, op.kh, op.w, op.h, op.out_w, op.out_h) == (5, 3, 14, 14, 10, 12)


def test_timeloop_round_trip_of_each_resnet_conv(tmp_path):
    traced = workloads.resolve("resnet18:res=64")
    for i, op in enumerate(o for o in traced.ops if o.kind == "conv2d"):
        text = (f"problem:\n  instance: {{C: {op.c_in}, M: {op.c_out}, R: {op.kw}, S: {op.kh}, N: {op.n}, "
                f"P: {op.out_w}, Q: {op.out_h}, Hstride: {op.stride_h}, Wstride: {op.stride_w}}}\n")
        (back,) = workloads.resolve(_write(tmp_path, f"l{i}.yaml", text)).ops
        assert back.macs == op.macs, op.name


@pytest.mark.parametrize(("text", "pattern"), [
    (CONV_CSV.replace("27  ,5", "x  ,5"), r"bad\.csv line 4: ifmap width must be a positive integer, not 'x'"),
    (CONV_CSV.replace("FC, 1, 1, 1, 1, 1024, 1000, 1", "FC, 1, 1"), r"bad\.csv line 6: a conv row must be .* not 2"),
    (CONV_CSV.replace("Conv1     ,224 ,224 ,11", "Conv1 ,8 ,8 ,11"), r"bad\.csv line 3: conv2d kh=11 .* must fit"),
    (GEMM_CSV.replace("QKT,1024,1024,64", "QKT,1024,0,64"), r"bad\.csv line 2: N must be a positive integer, not 0"),
    ("Layer name, IFMAP Height\n", r"bad\.csv has a header but no layer rows"),
])
def test_bad_csv_rows_name_their_line(tmp_path, text, pattern):
    with pytest.raises(WorkloadError, match=pattern):
        workloads.resolve(_write(tmp_path, "bad.csv", text))


@pytest.mark.parametrize(("text", "pattern"), [
    ("problem: [1, 2", r"bad\.yaml is not YAML"),
    ("problem:\n  shape: {name: x}\n", r"not a Timeloop problem"),
    ("problem:\n  instance: {A: 1, B: 2}\n", r"neither a CNN layer .* nor a GEMM"),
    (CONV_YAML.replace("C: 64", "C: -1"), r"instance C must be a positive integer, not -1"),
])
def test_bad_timeloop_files(tmp_path, text, pattern):
    with pytest.raises(WorkloadError, match=pattern):
        workloads.resolve(_write(tmp_path, "bad.yaml", text))
