"""``accel-dse workloads`` and ``accel-dse workloads show``; a user's own module:function."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from workloads import builtin_names, resolve

USER_MODULE = '''
import jax
import jax.numpy as jnp
import workloads

@workloads.with_example_args(jax.ShapeDtypeStruct((4, 32), jnp.int8), jax.ShapeDtypeStruct((32, 16), jnp.int8))
def layer(x, w):
    """A dense layer."""
    return jax.nn.relu(jnp.matmul(x, w, preferred_element_type=jnp.int32))

def two(x):
    return jnp.tanh(x @ x) @ x

RQ = workloads.Requant(multiplier=(1 << 30,), shift=(7,), bias=tuple(range(16)), zero_point=-1, act_min=-1)

@workloads.with_example_args(jax.ShapeDtypeStruct((4, 32), jnp.int8), jax.ShapeDtypeStruct((32, 16), jnp.int8))
def quantised(x, w):
    """A dense layer through the output stage."""
    return workloads.output_stage(jnp.matmul(x, w, preferred_element_type=jnp.int32), RQ)

def nothing(x):
    return jnp.sin(x) * 2.0

def broken(x):
    raise RuntimeError("cannot build this model")

def no_args(x):
    return x @ x

def example_args(name):
    return (jax.ShapeDtypeStruct((8, 8), jnp.float32),) if name != "no_args" else None
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch, request):
    """A fresh module (unique name) in the current directory, as a user would have it."""
    name = f"user_wl_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.chdir(tmp_path)
    return name


def test_list_names_every_builtin(run_cli):
    code, out, err = run_cli("workloads")
    assert code == 0 and err == ""
    for name in builtin_names():
        assert f"\n{name} " in out
    code, out, _ = run_cli("workloads", "list", "--json")
    data = json.loads(out)
    assert set(data) == set(builtin_names()) and data["bert_base"]["options"]["seq"] == 512


def test_show_resnet18_json(run_cli):
    code, out, err = run_cli("workloads", "show", "resnet18", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert {"workload", "ops", "total_macs"} <= set(data) and data["workload"] == "resnet18"
    assert abs(data["total_macs"] - 1.82e9) / 1.82e9 < 0.01
    assert sum(op["macs"] for op in data["ops"]) == data["total_macs"]
    conv1 = data["ops"][0]
    assert {k: conv1[k] for k in ("name", "kind", "m", "k", "n", "batch")} == {
        "name": "conv1", "kind": "conv2d", "m": 112 * 112, "k": 147, "n": 64, "batch": 1}
    assert conv1["macs"] == 112 * 112 * 147 * 64


def test_show_bert_text(run_cli):
    code, out, _ = run_cli("workloads", "show", "bert_base:seq=128")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("# bert_base:seq=128")
    scores = next(line.split() for line in lines if line.startswith("attention/scores"))
    assert scores[1:7] == ["gemm", "128", "64", "128", "12", "1"]
    total = resolve("bert_base:seq=128").total_macs
    assert f"{total:,} MACs" in out
    # The work between matrix ops: by kind, with runs and elements (12 heads x 128 x 128 scores,
    # two residual adds and LayerNorms of 128 x 768, GELU of 128 x 3072), named as host work.
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.split()[:1] in
            (["softmax"], ["add"], ["layernorm"], ["gelu"])}
    assert rows == {"softmax": ["1", f"{12 * 128 * 128:,}"], "add": ["2", f"{2 * 128 * 768:,}"],
                    "layernorm": ["2", f"{2 * 128 * 768:,}"], "gelu": ["1", f"{128 * 3072:,}"]}
    assert "vector ops run on the vector unit where it can" in out
    assert "exp x" not in out and "tanh x" not in out and "rsqrt x" not in out  # no float op left
    # what is left is data layout, named as free; the requantisation is the output stage's
    assert "not run on the array" not in out and "data layout, free (no arithmetic) (" in out


def test_show_json_counts_the_host_elements(run_cli):
    _, out, _ = run_cli("workloads", "show", "bert_base:seq=128", "--json")
    data = json.loads(out)
    assert data["vector_elements"]["softmax"] == 12 * 128 * 128
    assert data["vector_elements"]["gelu"] == 128 * 3072  # GELU over the FFN's hidden layer
    assert set(data["other_elements"]) == set(data["other_primitives"])
    assert "exp" not in data["other_elements"] and "tanh" not in data["other_elements"]


def test_show_counts_scanned_layers(run_cli):
    _, out, _ = run_cli("workloads", "show", "bert_base:seq=16,layers=3", "--json")
    data = json.loads(out)
    assert {op["count"] for op in data["ops"]} == {3}
    assert {v["count"] for v in data["vector_ops"]} == {3}
    assert data["vector_elements"]["layernorm"] == 3 * 2 * 16 * 768
    assert data["total_macs"] == sum(op["macs"] for op in data["ops"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuch", "unknown workload 'nosuch'"),
        ("bert_base:seq=0", "bert_base option seq must be a positive integer, not 0"),
        ("bert_base:foo=1", "bert_base has no option 'foo'"),
        ("no_such_pkg.models:f", "module 'no_such_pkg.models' cannot be imported"),
        ("json:no_such_function", "module 'json' has no attribute 'no_such_function'"),
    ],
)
def test_bad_workloads_exit_2_with_one_line(run_cli, spec, message):
    code, out, err = run_cli("workloads", "show", spec)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("accel-dse: error: ") and message in err


def test_user_function_traces(run_cli, user_module):
    code, out, _ = run_cli("workloads", "show", f"{user_module}:layer", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["workload"] == f"{user_module}:layer" and data["description"] == "A dense layer."
    assert [(o["m"], o["k"], o["n"], o["batch"]) for o in data["ops"]] == [(4, 32, 16, 1)]
    assert data["other_primitives"] == {"max": 1}


def test_user_function_through_the_output_stage_carries_its_parameters(run_cli, user_module):
    (op,) = resolve(f"{user_module}:quantised").ops
    assert op.requant is not None and op.requant.bias == tuple(range(16)) and op.requant.act_min == -1
    assert resolve(f"{user_module}:layer").ops[0].requant is None
    code, out, _ = run_cli("workloads", "show", f"{user_module}:quantised", "--json")
    assert code == 0 and json.loads(out)["ops"][0]["requant"]["shift"] == [7]


def test_module_level_hook_gives_arguments(user_module):
    w = resolve(f"{user_module}:two")
    assert [(g.m, g.k, g.n) for g, _ in w.gemms()] == [(8, 8, 8), (8, 8, 8)]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("nothing", r"contains no matmul or convolution .*it has: mul x1, sin x1"),
        ("broken", r"tracing .*:broken failed: RuntimeError: cannot build this model"),
        ("missing", r"has no attribute 'missing'"),
    ],
)
def test_user_function_errors(run_cli, user_module, function, message):
    code, _, err = run_cli("workloads", "show", f"{user_module}:{function}")
    assert code == 2 and err.count("\n") == 1
    assert re.search(message, err)


def test_hook_returning_none_is_an_error(user_module):
    from accel_spec.errors import WorkloadError

    with pytest.raises(WorkloadError, match="example_args gave None"):
        resolve(f"{user_module}:no_args")
