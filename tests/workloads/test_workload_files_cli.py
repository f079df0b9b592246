"""Workload files through the commands: show --json, evaluate, sweep, simulate; bad input; zero-argument functions."""

from __future__ import annotations

import json
import textwrap

import onnx
import onnx_graphs
import pytest
from onnx import TensorProto, helper

import workloads
from tests.cli_testlib import assert_one_line_error


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _small_onnx(path, nodes, inputs, weights, opset=17):
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx_graphs.stripped_weight(n, d) for n, d in weights])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def test_show_json_gives_source_and_origin(run_cli, in_tmp):
    onnx_graphs.resnet18(in_tmp / "r.onnx", batch=1, res=64)
    code, out, err = run_cli("workloads", "show", "r.onnx", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["source"] == "onnx"
    assert data["ops"][0]["origin"] == "node #0 'conv1' (Conv)" and data["ops"][0]["name"] == "conv1"
    assert "origin" not in data["ops"][0]["conv"]
    code, out, _ = run_cli("workloads", "show", "mlp", "--json")
    data = json.loads(out)
    assert data["source"] == "builtin" and data["ops"][0]["origin"].startswith("dot_general at ")


def _op_figures(result: dict) -> list[dict]:
    """The matrix ops' figures without their names (the file names its nodes, the tracer its layers)."""
    return [{k: v for k, v in op.items() if k not in ("name", "conv_note")} for op in result["ops"]]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "alexnet"])
def test_evaluate_an_onnx_cnn_as_its_builtin(run_cli, in_tmp, name):
    getattr(onnx_graphs, name)(in_tmp / f"{name}.onnx")
    results = []
    for spec in (f"{name}.onnx:N=1", f"{name}:requant=0"):  # a file's ops carry no output-stage parameters
        # edge: its ifmap holds every conv's band (tiny's 4 KiB does not hold a 224-pixel row)
        code, out, err = run_cli("evaluate", "--design", "edge", "--workload", spec, "--json")
        assert code == 0, err
        results.append(json.loads(out))
    onnx_result, jax_result = results
    assert onnx_result["status"] == jax_result["status"] == "ok"
    assert onnx_result["total"]["macs"] == jax_result["total"]["macs"] == workloads.resolve(name).total_macs
    # the same matrix ops and the same vector work (the ReLUs after convs in their output stages,
    # the residual adds, ReLUs and pools on the vector unit or named host work) give the same figures
    assert _op_figures(onnx_result) == _op_figures(jax_result)
    assert onnx_result["total"] == jax_result["total"]
    assert _vector_figures(onnx_result) == _vector_figures(jax_result)


def _vector_figures(result: dict) -> list[list[dict]]:
    return [[{k: v for k, v in entry.items() if k != "name"} for entry in result[part]]
            for part in ("vector_ops", "host_work")]


SPACE = """name = "files"
objectives = ["edp"]
workloads = [WORKLOADS]
[params]
rows = [8, 16]
cols = [8, 16]
dataflow = ["ws", "os"]
"""


def test_sweep_a_space_of_onnx_files_as_of_builtins(run_cli, in_tmp):
    for name in ("resnet18", "mobilenet_v2", "alexnet"):
        getattr(onnx_graphs, name)(in_tmp / f"{name}.onnx")
    best = []
    for tag, specs in (("onnx", '"resnet18.onnx:N=1", "mobilenet_v2.onnx:batch=1", "alexnet.onnx:N=1"'),
                       ("jax", '"resnet18:requant=0", "mobilenet_v2:requant=0", "alexnet:requant=0"')):
        (in_tmp / f"{tag}.toml").write_text(SPACE.replace("WORKLOADS", specs))
        code, out, err = run_cli("sweep", "--space", f"{tag}.toml", "--sampler", "random", "--trials", "4",
                                 "--seed", "5", "--json", "--quiet", "--out-dir", str(in_tmp / tag))
        assert code == 0, err
        best.append([(b["params"], b["metrics"]) for b in json.loads(out)["best"]])
    assert best[0] and len(best[0]) == len(best[1])
    onnx, jax = (sorted(b, key=lambda pm: sorted(pm[0].items())) for b in best)
    macs = sum(workloads.resolve(n).total_macs for n in ("resnet18", "mobilenet_v2", "alexnet")) / 3
    for (p_onnx, m_onnx), (p_jax, m_jax) in zip(onnx, jax, strict=True):
        assert p_onnx == p_jax  # the same designs drawn and scored
        assert m_onnx["macs"] == pytest.approx(macs) == m_jax["macs"]
        assert m_onnx == m_jax  # the same work, matrix and vector: the same metrics


def test_simulate_an_onnx_file_on_random_int8_data(run_cli, in_tmp):
    conv = helper.make_node("Conv", ["x", "w"], ["h"], name="gconv", group=2, pads=[1, 1, 1, 1], strides=[2, 2])
    flat = helper.make_node("Flatten", ["h"], ["f"])
    fc = helper.make_node("Gemm", ["f", "fcw"], ["y"], name="fc", transB=1)
    path = _small_onnx(in_tmp / "s.onnx", [conv, flat, fc], [("x", [1, 4, 6, 6])],
                       [("w", [6, 2, 3, 3]), ("fcw", [5, 6 * 3 * 3])])
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", path, "--simulator", "icarus",
                             "--work-dir", str(in_tmp / "sim"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(o["name"], o["status"]) for o in report["ops"]] == [("gconv", "pass"), ("fc", "pass")]


ZERO_ARG_MODULE = '''
import jax.numpy as jnp

W = jnp.ones((32, 16), jnp.int8)

def forward():
    """Constants captured: nothing to pass."""
    x = jnp.ones((8, 32), jnp.int8)
    return jnp.matmul(x, W, preferred_element_type=jnp.int32)

def needs(x):
    return x @ x
'''


def test_zero_argument_function_needs_no_example_args(run_cli, in_tmp):
    (in_tmp / "zero_arg_wl.py").write_text(textwrap.dedent(ZERO_ARG_MODULE))
    wl = workloads.resolve("zero_arg_wl:forward")
    assert [(o.m, o.k, o.n) for o in wl.ops] == [(8, 32, 16)] and wl.source == "jax"
    assert wl.description == "Constants captured: nothing to pass."
    assert_one_line_error(*run_cli("workloads", "show", "zero_arg_wl:needs"), r"gives no example arguments")


BAD = [
    (lambda d: "nothere.onnx", r"workload file 'nothere.onnx' does not exist"),
    (lambda d: (d / "adir.onnx").mkdir() or "adir.onnx", r"workload file 'adir.onnx' is not a file"),
    (lambda d: (d / "junk.onnx").write_bytes(b"\x00\xffnot a protobuf at all") and "junk.onnx",
     r"junk.onnx is not an ONNX model"),
    (lambda d: (d / "junk.bin").write_bytes(bytes(range(256)) * 3) and "junk.bin",
     r"workload file 'junk.bin' is not ONNX, StableHLO .*SCALE-Sim CSV, a Timeloop YAML or a Hugging Face config.json"),
    (lambda d: _small_onnx(d / "e.onnx", [helper.make_node("Einsum", ["a", "b"], ["y"], name="mix",
                                                           equation="ij,jk->ik")],
                           [("a", [2, 3])], [("b", [3, 4])]), r"node #0 'mix' \(Einsum\): op Einsum is not supported"),
    (lambda d: _small_onnx(d / "o.onnx", [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [2, 3])],
                           [("b", [3, 4])], opset=4), r"uses ONNX opset 4; supported opsets are 7 to"),
    (lambda d: _small_onnx(d / "s.onnx", [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", ["rows", 3])],
                           [("b", [3, 4])]), r"dimension 0 is symbolic \('rows'\) and has no value.*:rows=SIZE"),
    (lambda d: (d / "t.csv").write_text("Layer, M, N, K\nA, 4, 4, 4\nB, 4, four, 4\n") and "t.csv",
     r"t.csv line 3: N must be a positive integer, not 'four'"),
    (lambda d: (d / "t.csv").write_text("Layer, M, N, K\nA, 4, 4, 4\n") and "t.csv:batch=2",
     r"t.csv takes no options"),
    (lambda d: "model.onnx:batch=zero", r"model.onnx option batch must be a positive integer, not 'zero'"),
]


@pytest.mark.parametrize(("make", "pattern"), BAD)
def test_bad_workload_files_are_one_line_exit_2(run_cli, in_tmp, make, pattern):
    spec = make(in_tmp)
    assert_one_line_error(*run_cli("workloads", "show", spec), pattern)
    assert_one_line_error(*run_cli("evaluate", "--design", "tiny", "--workload", spec), pattern)
