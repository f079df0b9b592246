"""ONNX files as workloads: small graphs against hand counts, three CNNs against the JAX builtins.

Every graph is built here with ``onnx.helper`` and saved shape-only (initializers point at an
absent external file), so loading must not read weights. Expected MACs are worked out by hand
in the comments; the CNNs are compared op by op with the builtin JAX models traced by
:func:`workloads.trace` (a different importer and a different layout: NHWC/HWIO there).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import onnx
import onnx_graphs
import pytest
from onnx import TensorProto, helper

import workloads
from accel_spec.errors import WorkloadError


def _model(tmp_path, nodes, inputs, weights, name="g.onnx", opset=17, outputs=("y",)):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=[onnx_graphs.stripped_weight(n, d) for n, d in weights])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def _geometry(op):
    """Everything about an op but its labels (name, origin), output-stage parameters and the link to the op
    before (a file has neither: only the tracer of a requantised model finds them)."""
    return (op.kind, {f.name: getattr(op, f.name) for f in dataclasses.fields(op)
                      if f.name not in ("name", "origin", "requant", "a_from_previous")})


def test_grouped_padded_strided_conv_by_hand(tmp_path):
    # N=2, C=4, 9x9, 6 filters of 2 channels (group=2), 3x3, stride 2, pad 1: out (9+2-3)//2+1 = 5.
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="block.conv", group=2, strides=[2, 2],
                            pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    wl = workloads.resolve(str(_model(tmp_path, [conv], [("x", [2, 4, 9, 9])], [("w", [6, 2, 3, 3])])))
    (op,) = wl.ops
    assert op.kind == "conv2d" and (op.groups, op.out_h, op.out_w) == (2, 5, 5)
    assert wl.total_macs == 2 * 5 * 5 * 6 * 2 * 3 * 3 == 5400
    assert op.name == "block.conv" and op.origin == "node #0 'block.conv' (Conv)" and wl.source == "onnx"


def test_auto_pad_same_upper_and_dilation(tmp_path):
    # 8x8, k=3, stride 2, SAME_UPPER: out 4, total pad (4-1)*2+3-8 = 1 -> (0 top, 1 bottom).
    same = helper.make_node("Conv", ["x", "w"], ["h"], name="same", strides=[2, 2], auto_pad="SAME_UPPER")
    # then 4x4, k=3, dilation 2 (span 5), SAME_LOWER stride 1: total pad 4 -> (2, 2), out 4.
    dil = helper.make_node("Conv", ["h", "w2"], ["y"], name="dil", dilations=[2, 2], auto_pad="SAME_LOWER")
    path = _model(tmp_path, [same, dil], [("x", [1, 3, 8, 8])], [("w", [5, 3, 3, 3]), ("w2", [2, 5, 3, 3])])
    first, second = workloads.resolve(str(path)).ops
    assert (first.pad_h, first.pad_h_hi, first.pad_w, first.pad_w_hi, first.out_h) == (0, 1, 0, 1, 4)
    assert (second.pad_h, second.pad_h_hi, second.dilation_h, second.out_h) == (2, 2, 2, 4)
    assert first.macs == 4 * 4 * 5 * 3 * 9 and second.macs == 4 * 4 * 2 * 5 * 9


@pytest.mark.parametrize(("attrs", "a", "b"), [({"transB": 1}, [5, 7], [3, 7]), ({"transA": 1}, [7, 5], [7, 3]),
                                                ({}, [5, 7], [7, 3])])
def test_gemm_transposes(tmp_path, attrs, a, b):
    node = helper.make_node("Gemm", ["a", "b"], ["y"], name="fc", **attrs)
    (op,) = workloads.resolve(str(_model(tmp_path, [node], [("a", a)], [("b", b)]))).ops
    assert (op.m, op.k, op.n, op.batch) == (5, 7, 3, 1)


def test_matmul_broadcasts_batch_dims_and_folds_shared_weights(tmp_path):
    # A [2,1,4,6] @ B [3,6,5]: batch dims (2,1) and (3,) broadcast to (2,3): 6 GEMMs of 4x6x5.
    batched = helper.make_node("MatMul", ["a", "b"], ["y"], name="bmm")
    # A [2,3,4,6] @ W [6,5]: one weight for all rows: M = 2*3*4 = 24.
    shared = helper.make_node("MatMul", ["a2", "w"], ["y2"], name="proj")
    path = _model(tmp_path, [batched, shared], [("a", [2, 1, 4, 6]), ("a2", [2, 3, 4, 6])],
                  [("b", [3, 6, 5]), ("w", [6, 5])], outputs=("y", "y2"))
    bmm, proj = workloads.resolve(str(path)).ops
    assert (bmm.batch, bmm.m, bmm.k, bmm.n) == (6, 4, 6, 5)
    assert (proj.batch, proj.m, proj.k, proj.n) == (1, 24, 6, 5)


def test_conv_transpose_matches_jax_conv_transpose(tmp_path):
    # 5x5 -> stride 2, pads 1, output_padding 1, k=3: out 2*4 + 1 + 3 - 2 = 10.
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2], pads=[1, 1, 1, 1],
                            output_padding=[1, 1])
    (op,) = workloads.resolve(str(_model(tmp_path, [node], [("x", [1, 4, 5, 5])], [("w", [4, 3, 3, 3])]))).ops
    assert (op.out_h, op.out_w, op.c_in, op.c_out) == (10, 10, 4, 3)
    assert op.macs == 10 * 10 * 3 * 4 * 3 * 3  # the direct conv over the zero-stuffed input

    def up(x, w):  # the same transposed conv in JAX: padding applies to the dilated input
        return jax.lax.conv_transpose(x, w, (2, 2), ((1, 2), (1, 2)), dimension_numbers=("NHWC", "HWIO", "NHWC"))

    ref = workloads.trace(up, jax.ShapeDtypeStruct((1, 5, 5, 4), jnp.float32),
                          jax.ShapeDtypeStruct((3, 3, 4, 3), jnp.float32))
    assert _geometry(ref.ops[0]) == _geometry(op)


@pytest.mark.parametrize(("attrs", "pads"), [({"output_shape": [10, 10]}, (1, 2)),
                                             ({"output_shape": [10, 10], "auto_pad": "SAME_UPPER"}, (2, 1)),
                                             ({"auto_pad": "SAME_UPPER"}, (2, 1))])
def test_conv_transpose_output_shape_and_auto_pad(tmp_path, attrs, pads):
    # 5x5, k=3, stride 2 -> 10x10: total padding 2*4 + 3 - 10 = 1. ONNX puts the odd one at the
    # start unless SAME_UPPER; on the zero-stuffed input that is padding (2 - start, 2 - end).
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2], **attrs)
    (op,) = workloads.resolve(str(_model(tmp_path, [node], [("x", [1, 2, 5, 5])], [("w", [2, 3, 3, 3])]))).ops
    assert (op.h, op.pad_h, op.pad_h_hi, op.out_h, op.out_w) == (9, *pads, 10, 10)


def test_missing_external_data_is_not_read(tmp_path):
    path = onnx_graphs.alexnet(tmp_path / "alexnet.onnx", batch=1)
    with pytest.raises(Exception, match="weights.bin"):  # the weights really are absent
        onnx.load(str(path))
    assert workloads.resolve(str(path)).total_macs > 0


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "alexnet"])
def test_shape_only_cnns_match_the_jax_builtins(tmp_path, name):
    path = getattr(onnx_graphs, name)(tmp_path / f"{name}.onnx")  # batch is the symbolic dim "N"
    for options, builtin in ((":N=1", name), (":batch=2", f"{name}:batch=2")):
        onnx_wl, jax_wl = workloads.resolve(f"{path}{options}"), workloads.resolve(builtin)
        assert onnx_wl.total_macs == jax_wl.total_macs
        assert [_geometry(o) for o in onnx_wl.ops] == [_geometry(o) for o in jax_wl.ops]
        # ReLU/ReLU6 after a conv or dense layer is its output stage's; residual adds, the ReLUs
        # after them and the pools are the same vector records, NHWC, at the same program points
        assert [_vector_geometry(v) for v in onnx_wl.vector_ops] == [_vector_geometry(v) for v in jax_wl.vector_ops]
        assert onnx_wl.vector_after == jax_wl.vector_after
        assert dict(onnx_wl.other_primitives) == {"Flatten": 1}  # layout only: no arithmetic left to the host


def _vector_geometry(v):
    window = tuple(p for p in v.params if p[0].split("_")[0] in ("window", "stride", "pad"))
    return v.kind, v.shape, v.out_shape, v.axis, window


def test_published_mac_totals():
    # ImageNet figures at 224 (torchvision's counts of multiply-accumulates, convs and FCs only).
    assert workloads.resolve("alexnet").total_macs == 714_188_480
    assert round(workloads.resolve("resnet18").total_macs / 1e9, 2) == 1.81


def _error(tmp_path, nodes, inputs, weights, spec_suffix="", **kw):
    path = _model(tmp_path, nodes, inputs, weights, **kw)
    with pytest.raises(WorkloadError) as info:
        workloads.resolve(f"{path}{spec_suffix}")
    return str(info.value)


def test_symbolic_dim_without_a_value_is_named(tmp_path):
    node = helper.make_node("MatMul", ["a", "w"], ["y"])
    message = _error(tmp_path, [node], [("a", ["seq", 8])], [("w", [8, 4])])
    assert "'seq'" in message and ":seq=SIZE" in message
    message = _error(tmp_path, [node], [("a", ["seq", 8])], [("w", [8, 4])], ":sequence=4", name="h.onnx")
    assert "no symbolic dimension 'sequence'" in message and "seq" in message
    ok = _model(tmp_path, [node], [("a", ["seq", 8])], [("w", [8, 4])], name="ok.onnx")
    assert workloads.resolve(f"{ok}:seq=16").ops[0].m == 16


def test_unsupported_op_and_opset_are_named_with_where(tmp_path):
    einsum = helper.make_node("Einsum", ["a", "b"], ["y"], name="attn_scores", equation="ij,jk->ik")
    message = _error(tmp_path, [einsum], [("a", [4, 8])], [("b", [8, 4])])
    assert "Einsum" in message and "'attn_scores'" in message and "node #0" in message
    relu = helper.make_node("Relu", ["a"], ["y"])
    assert "opset 5" in _error(tmp_path, [relu], [("a", [4])], [], opset=5, name="old.onnx")


def test_graph_without_matmul_lists_what_it_has(tmp_path):
    relu = helper.make_node("Relu", ["a"], ["y"])
    message = _error(tmp_path, [relu], [("a", [4])], [])
    assert "contains no matmul or convolution" in message and "vector op relu x1" in message


def test_custom_domain_matrix_op_is_refused_not_dropped(tmp_path):
    fused = helper.make_node("FusedConv", ["x", "w"], ["y"], name="fc1", domain="com.microsoft")
    path = tmp_path / "ms.onnx"
    graph = helper.make_graph([fused], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[onnx_graphs.stripped_weight("w", [4, 3, 3, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("com.microsoft", 1)]), str(path))
    with pytest.raises(WorkloadError, match=r"'fc1' \(FusedConv\): op FusedConv of domain com.microsoft"):
        workloads.resolve(str(path))


def test_onnx_without_its_suffix_is_recognised(tmp_path):
    path = onnx_graphs.alexnet(tmp_path / "alexnet.onnx", batch=1)
    renamed = path.rename(tmp_path / "alexnet.pb")
    assert workloads.resolve(str(renamed)).total_macs == workloads.resolve("alexnet").total_macs
