"""ONNX import: which nodes a matrix op's output stage absorbs, and how ReLUs and pools become
vector records (NHWC, with their windows) or stay named host work."""

from __future__ import annotations

import onnx
import onnx_graphs
import pytest
from onnx import TensorProto, helper

import workloads


def _resolve(tmp_path, nodes, weights, x=(1, 4, 8, 8), outputs=("y",)):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=[onnx_graphs.stripped_weight(n, d) for n, d in weights])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return workloads.resolve(str(path))


CONV = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
W = [("w", [6, 4, 3, 3])]


def test_conv_bias_relu_chain_is_fused(tmp_path):
    nodes = [CONV, helper.make_node("Add", ["c", "b"], ["cb"]), helper.make_node("Relu", ["cb"], ["y"])]
    w = _resolve(tmp_path, nodes, W + [("b", [6, 1, 1])])
    assert w.vector_ops == () and w.other_primitives == ()
    clip = [CONV, helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    w = _resolve(tmp_path, clip, W + [("lo", []), ("hi", [])])
    assert w.vector_ops == () and w.other_primitives == ()


def test_a_relu_the_stage_cannot_take_is_a_vector_record(tmp_path):
    # the conv's output is used twice (the pre-ReLU value is needed): the ReLU is the unit's
    nodes = [CONV, helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["c", "r"], ["y"])]
    w = _resolve(tmp_path, nodes, W)
    assert [(v.kind, v.shape) for v in w.vector_ops] == [("relu", (1, 8, 8, 6)), ("add", (1, 8, 8, 6))]
    # a ReLU of the graph input: no matrix op before it
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    w = _resolve(tmp_path, nodes, W)
    assert [(v.kind, v.shape) for v in w.vector_ops] == [("relu", (1, 8, 8, 4))] and w.vector_after == (0,)
    # a Clip no matrix op feeds is not known to be a ReLU6 (its bounds are not read): host work, named
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    w = _resolve(tmp_path, nodes, W + [("lo", []), ("hi", [])])
    assert w.vector_ops == () and dict(w.other_primitives) == {"Clip": 1}


@pytest.mark.parametrize(("node", "record"), [
    (helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 0]),
     ("maxpool", (1, 8, 8, 6), (1, 4, 7, 6), (3, 2, 2, 1, 1, 0))),
    (helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
     ("avgpool", (1, 8, 8, 6), (1, 4, 4, 6), (2, 2, 2, 2, 0, 0))),
    (helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
     ("avgpool", (1, 8, 8, 6), (1, 8, 8, 6), (3, 3, 1, 1, 1, 1))),
    (helper.make_node("GlobalAveragePool", ["c"], ["y"]), ("avgpool", (1, 8, 8, 6), (1, 1, 1, 6), (8, 8, 1, 1, 0, 0))),
    (helper.make_node("GlobalMaxPool", ["c"], ["y"]), ("maxpool", (1, 8, 8, 6), (1, 1, 1, 6), (8, 8, 1, 1, 0, 0))),
])
def test_pools_are_nhwc_records_with_their_window(tmp_path, node, record):
    (pool,) = _resolve(tmp_path, [CONV, node], W).vector_ops
    keys = ("window_h", "window_w", "stride_h", "stride_w", "pad_h", "pad_w")
    assert (pool.kind, pool.shape, pool.out_shape, tuple(pool.param(k) for k in keys)) == record


@pytest.mark.parametrize("node", [
    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),  # asymmetric
    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], dilations=[2, 2]),
    helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # pads not counted
    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
])
def test_pools_the_reference_does_not_define_stay_named_host_work(tmp_path, node):
    w = _resolve(tmp_path, [CONV, node], W)
    assert w.vector_ops == () and dict(w.other_primitives) == {node.op_type: 1}


def test_an_onnx_graphs_vector_ops_run_on_the_unit_with_the_builtins_parameters(tmp_path, run_cli):
    import json

    path = onnx_graphs.attention_mix(tmp_path / "mix.onnx", batch=1, seq=8, d=16)
    w = workloads.resolve(str(path))
    add, ln, softmax, gelu = w.vector_ops
    assert dict(add.params) == {"mult_a": 1 << 14, "mult_b": 1 << 14, "shift": 14}  # a same-scale add
    # n = 16: rsqrt_bits = 15 - ceil(4 / 2) = 13, sqrt(16) * 2**13, eps * n * 2**22 = 671.09
    assert dict(ln.params) == {"rsqrt_const": 32768, "rsqrt_bits": 13, "eps": 671}
    assert softmax.param("causal_offset") == -1 and gelu.params
    from accel_dse.design_files import load_design

    design = tmp_path / "edge_vec.toml"  # edge with the vector unit
    design.write_text("[design]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in
                                            {**load_design("edge").to_dict(), "vector_unit": True}.items()))
    code, out, err = run_cli("evaluate", "--design", str(design), "--workload", str(path), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert [v["kind"] for v in result["vector_ops"]] == ["add", "layernorm", "softmax", "gelu"]
    assert all(v["cycles"] > 0 for v in result["vector_ops"]) and result["host_work"] == []
    assert result["total"]["vector_cycles"] == sum(v["cycles"] * v["runs"] for v in result["vector_ops"])
