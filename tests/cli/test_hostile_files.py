"""Workload files read within bounds: nested MLIR, YAML aliases, malformed Timeloop fields, huge or
non-ASCII option values, and names with control characters (issue 24's file cases)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hostile_testlib import one_line

NESTED = 20_000
ALIAS_BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
problem:
  shape: {name: *g, dimensions: [M, N, K]}
  instance: {M: 8, N: 8, K: 8}
"""
GEMM_INSTANCE = "  instance: {M: 8, N: 8, K: 8}\n"


def _cli(cli_env, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """A separate process: a native crash (segfault) must not take the test run down with it."""
    return subprocess.run([sys.executable, "-m", "accel_dse", *argv], env=cli_env, capture_output=True,
                          timeout=300, check=False)


def _matmul_onnx(path, node_name: str = "fc"):
    """An ONNX graph of one MatMul, input ``x`` of shape ``[N, 8]``."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], [0.0] * 32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name=node_name)
    graph = helper.make_graph([node], "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("command", [("workloads", "show"), ("evaluate", "--design", "tiny", "--workload")])
def test_deeply_nested_mlir_is_refused_before_the_native_parser(cli_env, tmp_path, command):
    path = tmp_path / "nested.mlir"
    path.write_text("module attributes {x = " + "[" * NESTED + "]" * NESTED + "} {}\n")
    run = _cli(cli_env, *command, str(path))
    line = one_line(run.returncode, run.stdout.decode(), run.stderr.decode())
    assert "nested.mlir line 1: brackets nest more than 256 deep" in line, line


def test_mlir_nested_to_the_limit_reaches_the_parser(run_cli, tmp_path):
    path = tmp_path / "deep.mlir"
    depth = 255  # the attribute's brackets plus the module's {
    path.write_text("module attributes {x = " + "[" * depth + "]" * depth + "} {}\n")
    line = one_line(*run_cli("workloads", "show", str(path)))
    assert "MLIR can parse" in line and "brackets nest" not in line, line


def test_a_yaml_alias_bomb_gives_one_short_line(cli_env, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    run = _cli(cli_env, "workloads", "show", str(path))
    assert len(run.stdout) + len(run.stderr) < 64 * 1024
    line = one_line(run.returncode, run.stdout.decode(), run.stderr.decode())
    assert "bomb.yaml line 2: YAML alias *a is not read" in line, line


@pytest.mark.parametrize("dimensions, rule", [
    ("5", "must be a flat list of dimension names, not int 5"),
    ("[[M], N, K]", "must be a flat list of dimension names; item 0 is a list"),
    ("{M: 1}", "must be a flat list of dimension names, not a mapping"),
    ("*x", "YAML alias *x is not read"),
])
@pytest.mark.parametrize("command", [("workloads", "show"), ("evaluate", "--design", "tiny", "--workload")])
def test_timeloop_dimensions_that_are_not_a_flat_list(run_cli, tmp_path, dimensions, rule, command):
    path = tmp_path / "layer.yaml"
    path.write_text(f"x: &x [[1, 2], [3]]\nproblem:\n  shape: {{dimensions: {dimensions}}}\n" + GEMM_INSTANCE)
    line = one_line(*run_cli(*command, str(path)))
    assert rule in line and "layer.yaml" in line, line


@pytest.mark.parametrize("body, rule", [
    ("problem:\n  shape: [1, 2]\n" + GEMM_INSTANCE, "problem.shape must be a mapping"),
    ("problem:\n  instance: [8, 8]\n", "problem.instance must be a mapping"),
    ("problem:\n  shape: {name: [a, b], dimensions: [M, N, K]}\n" + GEMM_INSTANCE, "problem.shape.name must be a name"),
    ("problem:\n  instance: {M: [8], N: 8, K: 8}\n", "problem instance M must be a positive integer, not a list"),
    ("problem:\n  instance: {M: '８', N: 8, K: 8}\n", "problem instance M must be a positive integer, not '８'"),
])
def test_timeloop_fields_of_the_wrong_kind(run_cli, tmp_path, body, rule):
    path = tmp_path / "layer.yaml"
    path.write_text(body)
    line = one_line(*run_cli("workloads", "show", str(path)))
    assert rule in line and "layer.yaml" in line, line


def test_an_onnx_dimension_option_beyond_int64_under_json(run_cli, tmp_path):
    path = _matmul_onnx(tmp_path / "m.onnx")
    code, out, err = run_cli("workloads", "show", "--json", f"{path}:N=99999999999999999999")
    assert (code, out) == (2, "")
    error = json.loads(err)
    assert error["kind"] == "workload"
    assert "option N must be at most 2,147,483,647, not 99,999,999,999,999,999,999" in error["error"]
    line = one_line(*run_cli("evaluate", "--design", "tiny", "--workload", f"{path}:N={2**63}"))
    assert "option N must be at most 2,147,483,647" in line


@pytest.mark.parametrize("spec, shown", [
    ("gemm:m=８", "gemm option m must be a positive integer, not '８' (written with ASCII digits 0-9"),
    ("gemm:m=1_000", "gemm option m must be a positive integer, not '1_000'"),
    ("{csv}:batch=１", "option batch must be a positive integer, not '１'"),
    ("{csv}:batch=1_0", "option batch must be a positive integer, not '1_0'"),
])
def test_integers_are_ascii_digits_only(run_cli, tmp_path, spec, shown):
    csv = tmp_path / "t.csv"
    csv.write_text("name, M, N, K\nfc, 8, 8, 8\n")
    line = one_line(*run_cli("workloads", "show", spec.format(csv=csv)))
    assert shown in line, line


def test_csv_numbers_are_ascii_digits_only(run_cli, tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("name, M, N, K\nfc, 8, ８, 8\n")
    line = one_line(*run_cli("workloads", "show", str(csv)))
    assert "t.csv line 2: N must be a positive integer, not '８'" in line, line


def test_names_from_files_are_escaped_and_cut(run_cli, tmp_path):
    csv = tmp_path / "t.csv"
    name = "evil\x1b[31m\x08name" + "z" * 5000
    csv.write_text(f"name, M, N, K\n{name}, 8, 8, 8\n")
    code, out, err = run_cli("workloads", "show", str(csv))
    assert code == 0, err
    assert "\x1b" not in out and "\x08" not in out
    assert "evil\\x1b[31m\\x08name" in out
    assert max(len(line) for line in out.splitlines()) < 400
    code, out, _ = run_cli("workloads", "show", "--json", str(csv))
    (op,) = json.loads(out)["ops"]
    assert op["name"].startswith("evil\\x1b[31m\\x08name") and op["name"].endswith("...") and len(op["name"]) <= 123


def test_onnx_node_names_are_escaped(run_cli, tmp_path):
    path = _matmul_onnx(tmp_path / "m.onnx", node_name="a\nb\x1b]0;title\x07")
    code, out, err = run_cli("workloads", "show", f"{path}:N=2")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "a\\nb\\x1b]0;title\\x07" in out


@pytest.mark.parametrize("argv, shown", [
    (("sweep", "--trials", "８", "--quiet"), "--trials must be an integer, not '８' (written with ASCII digits 0-9"),
    (("sweep", "--seed", "1_0", "--quiet"), "--seed must be an integer, not '1_0' (written with ASCII digits 0-9"),
    (("workloads", "show", "gemm", "--bits", "８", "--json"), "argument --bits: must be an integer written with ASCII"),
])
def test_command_line_integers_are_ascii_digits_only(run_cli, tmp_path, monkeypatch, argv, shown):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*argv)
    assert (code, out) == (2, "")
    assert shown in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def _conv_onnx(path, op: str, **attrs):
    """An ONNX graph of one ``op`` (Conv or ConvTranspose) on a 1x3x16x16 input, with ``attrs``."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], [0.0] * 216)
    node = helper.make_node(op, ["x", "w"], ["y"], name="c", **attrs)
    graph = helper.make_graph([node], "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("op, attrs, rule", [
    ("Conv", {"group": [0, 0]}, "node #0 'c' (Conv): attribute group must be an integer, not [0, 0]"),
    ("Conv", {"group": 0}, "node #0 'c' (Conv): conv2d groups must be a positive integer, not 0"),
    ("ConvTranspose", {"auto_pad": "WHAT"}, "node #0 'c' (ConvTranspose): auto_pad must be NOTSET, SAME_UPPER"),
])
def test_malformed_onnx_attributes_name_the_node(run_cli, tmp_path, op, attrs, rule):
    path = _conv_onnx(tmp_path / "c.onnx", op, **attrs)
    line = one_line(*run_cli("workloads", "show", str(path)))
    assert line.startswith(f"{path}: ") and rule in line, line


@pytest.mark.parametrize("text", [
    "module {\n  func.func private @main(%a: tensor<4x4xi8>) -> tensor<4x4xi8>\n}\n",
    ("module {\n  func.func private @ext(%a: tensor<4x4xi8>) -> tensor<4x4xi8>\n"
     "  func.func public @main(%a: tensor<4x4xi8>) -> tensor<4x4xi8> {\n"
     "    %0 = func.call @ext(%a) : (tensor<4x4xi8>) -> tensor<4x4xi8>\n    return %0 : tensor<4x4xi8>\n  }\n}\n"),
])
def test_a_stablehlo_function_without_a_body(run_cli, tmp_path, text):
    path = tmp_path / "decl.mlir"
    path.write_text(text)
    line = one_line(*run_cli("workloads", "show", str(path)))
    assert "is declared without a body; the module must define every function it calls" in line, line
