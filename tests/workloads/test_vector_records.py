"""Vector op records: traced from the builtins' integer ops and read from ONNX, carried beside the
matrix ops, listed by ``workloads show``, ignored by the performance model's cycles."""

from __future__ import annotations

import dataclasses
import json

import onnx_graphs
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.errors import WorkloadError
from workloads.ops import VectorOp, Workload


def summary(w: Workload) -> list[tuple]:
    return [(v.kind, v.shape, v.out_shape, v.axis, count, after)
            for v, count, after in zip(w.vector_ops, w.vector_counts, w.vector_after, strict=True)]


def test_bert_base_layer_records():
    w = workloads.resolve("bert_base:seq=16,layers=2")
    tokens = (1, 16, 768)
    # per layer: Q, K, V, scores | softmax | context, output | add, LN | ffn_in | GELU | ffn_out | add, LN
    assert summary(w) == [
        ("softmax", (1, 12, 16, 16), (1, 12, 16, 16), 3, 2, 4),
        ("add", tokens, tokens, None, 2, 6), ("layernorm", tokens, tokens, 2, 2, 6),
        ("gelu", (1, 16, 3072), (1, 16, 3072), None, 2, 7),
        ("add", tokens, tokens, None, 2, 8), ("layernorm", tokens, tokens, 2, 2, 8),
    ]
    softmax = w.vector_ops[0]
    assert softmax.param("causal_offset") == -1 and softmax.rows == 12 * 16 and softmax.elements == 12 * 16 * 16
    assert softmax.name == "attention/softmax" and "_models_transformer.py" in softmax.origin
    # the float primitives the int8 form used to run between requantisations are gone
    others = dict(w.other_primitives)
    assert not {"exp", "tanh", "rsqrt", "erf", "reduce_sum", "reduce_max", "div"} & set(others)


def test_llama_decode_records():
    kv, d, heads, ffn = 64, 256, 4, 512
    w = workloads.resolve(f"llama_decode:kv={kv},d={d},heads={heads},ffn={ffn}")
    tok, head = (1, 1, d), (1, 1, heads, d // heads)
    assert summary(w) == [
        ("rmsnorm", tok, tok, 2, 1, 0), ("rope", head, head, None, 1, 1), ("rope", head, head, None, 1, 2),
        ("softmax", (1, heads, 1, kv + 1), (1, heads, 1, kv + 1), 3, 1, 4),
        ("add", tok, tok, None, 1, 6), ("rmsnorm", tok, tok, 2, 1, 6),
        ("silu", (1, 1, ffn), (1, 1, ffn), None, 1, 8), ("add", tok, tok, None, 1, 9),
    ]
    softmax, silu = w.vector_ops[3], w.vector_ops[6]
    assert softmax.param("causal_offset") == kv and silu.param("gated") == 1
    assert [v.param("start") for v in w.vector_ops[1:3]] == [kv, kv]


def test_resnet18_records():
    w = workloads.resolve("resnet18:res=32")
    kinds = [v.kind for v in w.vector_ops]
    assert kinds == ["maxpool"] + ["add", "relu"] * 8 + ["avgpool"]
    pool = w.vector_ops[0]
    assert (pool.shape, pool.out_shape) == ((1, 16, 16, 64), (1, 8, 8, 64))
    assert [pool.param(k) for k in ("window_h", "stride_h", "pad_h")] == [3, 2, 1]
    adds = [v.elements for v in w.vector_ops if v.kind == "add"]
    assert adds == [8 * 8 * 64] * 2 + [4 * 4 * 128] * 2 + [2 * 2 * 256] * 2 + [1 * 1 * 512] * 2
    gap = w.vector_ops[-1]
    assert (gap.shape, gap.out_shape, gap.param("window_h")) == ((1, 1, 1, 512), (1, 1, 1, 512), 1)
    assert w.vector_after[0] == 1 and w.vector_after[-1] == len(w.ops) - 1  # after conv1; before fc


def test_onnx_graph_maps_layernorm_softmax_gelu_add(tmp_path):
    path = onnx_graphs.attention_mix(tmp_path / "mix.onnx", batch=2, seq=8, d=16)
    w = workloads.resolve(str(path))
    assert [op.name for op in w.ops] == ["proj", "scores", "context"]
    # the bias add right after proj is proj's output stage's work; the residual add is the unit's
    assert summary(w) == [
        ("add", (2, 8, 16), (2, 8, 16), None, 1, 1),
        ("layernorm", (2, 8, 16), (2, 8, 16), 2, 1, 1), ("softmax", (2, 8, 8), (2, 8, 8), 2, 1, 2),
        ("gelu", (2, 8, 16), (2, 8, 16), None, 1, 3),
    ]
    assert [v.name for v in w.vector_ops] == ["residual", "ln", "softmax", "gelu"]
    assert not {"Add", "LayerNormalization", "Softmax", "Gelu"} & set(dict(w.other_primitives))


def test_show_json_lists_vector_ops_as_host_work(run_cli):
    code, out, _ = run_cli("workloads", "show", "llama_decode:kv=64,d=256,heads=4,ffn=512", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["vector_elements"] == {"rmsnorm": 2 * 256, "rope": 2 * 256, "softmax": 4 * 65, "add": 2 * 256,
                                       "silu": 512}
    silu = next(v for v in data["vector_ops"] if v["kind"] == "silu")
    assert silu["params"] == {"gated": 1} and silu["after"] == 8 and silu["count"] == 1


def test_vector_records_add_the_vector_units_work_and_leave_the_matrix_ops_alone():
    w = workloads.resolve("bert_base:seq=16")
    bare = dataclasses.replace(w, vector_ops=(), vector_counts=(), vector_after=())
    config = dataclasses.replace(load_design("tiny"), vector_unit=True)
    # op by op (every op its own program): the vector ops' programs add to the matrix ops'
    a, b = perf_model.evaluate(config, w, reuse=False), perf_model.evaluate(config, bare, reuse=False)
    assert a.to_dict()["ops"] == b.to_dict()["ops"]  # the matrix ops' figures do not change
    vector = a.to_dict()["vector_ops"]
    assert {v["kind"] for v in vector} == {"softmax", "add", "layernorm", "gelu"} and not a.to_dict()["host_work"]
    assert a.total["vector_cycles"] == sum(v["total_cycles"] for v in vector) > 0
    stall = a.total["stall_cycles"] - b.total["stall_cycles"]  # the vector ops' DRAM waits
    assert a.total["total_cycles"] == b.total["total_cycles"] + a.total["vector_cycles"] + stall
    # as one program (the figure the sweep records), the totals are that program's walk
    one = perf_model.evaluate(config, w)
    assert one.network is not None and one.total["total_cycles"] == one.network["total_cycles"]
    assert one.total["vector_cycles"] == one.network["vector_cycles"] > 0
    assert a.total["dram_read_bytes"] - b.total["dram_read_bytes"] == sum(v["dram_read_bytes"] for v in vector) > 0


@pytest.mark.parametrize("kwargs,message", [
    ({"kind": "tanh", "shape": (4,)}, "vector op kind must be one of add, mul"),
    ({"kind": "add", "shape": (4, 0)}, "vector op add shape must hold positive integers"),
    ({"kind": "softmax", "shape": (4, 8), "axis": 2}, r"vector op softmax axis must be an integer in \[0, 1\], not 2"),
    ({"kind": "gelu", "shape": (4,), "params": (("a", 1.5),)}, "params must be \\(name, integer\\) pairs"),
])
def test_bad_vector_records(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        VectorOp(**kwargs)


def test_bad_workload_vector_fields():
    gemm = workloads.Gemm(m=2, k=2, n=2)
    add = VectorOp(kind="add", shape=(2, 2))
    with pytest.raises(WorkloadError, match=r"vector_counts must have one entry per vector op \(1\), not 2"):
        Workload(name="w", ops=(gemm,), vector_ops=(add,), vector_counts=(1, 1))
    with pytest.raises(WorkloadError, match=r"vector_after entries must each be an integer in \[0, 1\], not 2"):
        Workload(name="w", ops=(gemm,), vector_ops=(add,), vector_after=(2,))
    with pytest.raises(WorkloadError, match="vector_ops must be VectorOp records"):
        Workload(name="w", ops=(gemm,), vector_ops=(gemm,))
    w = Workload(name="w", ops=(gemm,), vector_ops=(add,))
    assert (w.vector_counts, w.vector_after, add.elements, add.rows) == ((1,), (1,), 4, 1)


def _with_unit(path, preset: str) -> str:
    """A design file: ``preset`` with ``vector_unit = true``."""
    path.write_text("[design]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in
                                          {**load_design(preset).to_dict(), "vector_unit": True}.items()))
    return str(path)


def test_evaluate_lists_vector_ops_with_their_cycles(run_cli, tmp_path):
    design = _with_unit(tmp_path / "tiny_vec.toml", "tiny")
    code, out, _ = run_cli("evaluate", "--design", design, "--workload", "bert_base:seq=16", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["host_work"] == []  # every vector op of the encoder runs on the vector unit
    by_kind: dict[str, list[int]] = {}
    for v in data["vector_ops"]:
        runs, elements = by_kind.setdefault(v["kind"], [0, 0])
        by_kind[v["kind"]] = [runs + v["runs"], elements + v["runs"] * v["elements"]]
        assert v["cycles"] > 0
    assert by_kind == {"softmax": [1, 12 * 16 * 16], "add": [2, 2 * 16 * 768], "layernorm": [2, 2 * 16 * 768],
                       "gelu": [1, 16 * 3072]}
    code, out, _ = run_cli("evaluate", "--design", design, "--workload", "bert_base:seq=16")
    table = out[out.index("vector ops, on the vector unit"):]
    kinds = [line.split()[0] for line in table.splitlines()[3:3 + len(data["vector_ops"])]]
    assert sorted(set(kinds)) == ["add", "gelu", "layernorm", "softmax"]


def test_the_gated_silu_is_named_for_the_gemm_it_follows_not_the_one_it_feeds():
    import workloads

    names = [op.name for op in workloads.resolve("llama_decode").vector_ops]
    assert "ffn/w_up/silu" in names and not any(n.startswith("ffn/w_down/silu") for n in names)
    assert "ffn/w_down/add" in names  # the residual add follows w_down
