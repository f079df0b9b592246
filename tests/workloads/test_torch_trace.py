"""PyTorch models through torch.export give the records the same model written in float JAX gives."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from accel_spec.errors import WorkloadError
from workloads import resolve
from workloads._tracer import trace
from workloads.accuracy import sqnr_source
from workloads.host_work import host_work

torch = pytest.importorskip("torch", reason="the [torch] extra (scripts/setup.sh installs it)")
nn, F = torch.nn, torch.nn.functional

from workloads._torch_trace import TORCH_MISSING, import_torch, lower_module, trace_torch  # noqa: E402

S, F32 = jax.ShapeDtypeStruct, jnp.float32


def _records(wl):
    """Ops without names/origins, vector ops by kind/shape/params: what must agree across front ends."""
    ops = [(type(op).__name__, {k: v for k, v in dataclasses.asdict(op).items() if k not in ("name", "origin")})
           for op in wl.ops]
    # an element-wise record keeps its tensor's layout (PyTorch's NCHW): its elements must agree
    vec = [(v.kind, math.prod(v.shape) if v.kind in ("add", "relu") else v.shape, v.out_shape
            if v.kind not in ("add", "relu") else None, v.params) for v in wl.vector_ops]
    return ops, vec, list(wl.counts)


def _no_host_arithmetic(wl):
    return host_work(wl.other_primitives, wl.other_elements).arithmetic == ()


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(16, 16, 3, padding=1)
        self.pool, self.fc = nn.MaxPool2d(2), nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = self.pool(F.relu(self.c2(x)))
        x = F.relu(x + self.c3(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _jax_cnn(p, x):  # the same network in NHWC, as a JAX user writes it
    def conv(x, w, s):
        return lax.conv_general_dilated(x, w, (s, s), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))

    x = jax.nn.relu(conv(x, p["c1"], 1) * p["s1"] + p["t1"])
    x = jax.nn.relu(conv(x, p["c2"], 2) + p["b2"])
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = jax.nn.relu(x + (conv(x, p["c3"], 1) + p["b3"]))
    return jnp.mean(x, axis=(1, 2)) @ p["fc"] + p["bfc"]


def test_a_torch_cnn_gives_the_float_jax_cnns_records():
    torch.manual_seed(0)
    wl = trace_torch(lower_module(CNN(), (torch.randn(2, 3, 16, 16),), "cnn"), name="cnn")
    p = {"c1": S((3, 3, 3, 8), F32), "s1": S((8,), F32), "t1": S((8,), F32), "c2": S((3, 3, 8, 16), F32),
         "b2": S((16,), F32), "c3": S((3, 3, 16, 16), F32), "b3": S((16,), F32), "fc": S((16, 10), F32),
         "bfc": S((10,), F32)}
    ref = trace(_jax_cnn, p, S((2, 16, 16, 3), F32))
    assert _records(wl) == _records(ref)
    assert [v.kind for v in wl.vector_ops] == ["maxpool", "add", "relu", "avgpool"]
    assert [op.name for op in wl.ops] == ["c1", "c2", "c3", "fc"]  # the module paths
    # each op's origin is the model's own line (CNN.forward here), not PyTorch's or the lowering's
    assert wl.ops[0].origin.startswith("aten.conv2d.default at ") and __file__ in wl.ops[0].origin
    assert wl.ops[3].origin.startswith("aten.linear.default at ") and wl.ops[3].origin.endswith("(forward)")
    assert _no_host_arithmetic(wl) and _no_host_arithmetic(ref)


class Block(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.h = h

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.f2(F.gelu(self.f1(self.ln2(x))))


B, T, D, H = 2, 8, 32, 4


def _ln(x, g, b):
    m = jnp.mean(x, -1, keepdims=True)
    return (x - m) / jnp.sqrt(jnp.mean((x - m) ** 2, -1, keepdims=True) + 1e-5) * g + b


def _jax_block(p, x):
    q, k, v = jnp.split(_ln(x, p["g1"], p["n1"]) @ p["qkv"] + p["bqkv"], 3, -1)
    q, k, v = (z.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for z in (q, k, v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(D // H)
    s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -jnp.inf)
    a = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    x = x + (a @ p["o"] + p["bo"])
    return x + (jax.nn.gelu(_ln(x, p["g2"], p["n2"]) @ p["f1"] + p["b1"], approximate=False) @ p["f2"] + p["b2"])


def test_a_torch_transformer_block_gives_the_float_jax_blocks_records():
    wl = trace_torch(lower_module(Block(), (torch.randn(B, T, D),), "block"), name="block")
    shapes = {"g1": (D,), "n1": (D,), "qkv": (D, 3 * D), "bqkv": (3 * D,), "o": (D, D), "bo": (D,), "g2": (D,),
              "n2": (D,), "f1": (D, 4 * D), "b1": (4 * D,), "f2": (4 * D, D), "b2": (D,)}
    ref = trace(_jax_block, {k: S(v, F32) for k, v in shapes.items()}, S((B, T, D), F32))
    assert _records(wl) == _records(ref)
    assert [v.kind for v in wl.vector_ops] == ["layernorm", "softmax", "add", "layernorm", "gelu", "add"]
    assert dict(wl.vector_ops[1].params)["causal_offset"] == 0
    assert _no_host_arithmetic(wl)


def test_a_transformer_encoder_layer_maps_its_attention_and_ffn():
    layer = nn.TransformerEncoderLayer(D, H, 64, batch_first=True)
    wl = trace_torch(lower_module(layer, (torch.randn(B, T, D),), "enc"), name="enc")
    tokens = B * T
    assert wl.total_macs == tokens * D * 3 * D + 2 * B * H * T * T * (D // H) + tokens * D * D + 2 * tokens * D * 64
    assert sorted(v.kind for v in wl.vector_ops) == ["add", "add", "layernorm", "layernorm", "softmax"]
    assert dict(next(v for v in wl.vector_ops if v.kind == "softmax").params)["causal_offset"] == -1
    assert _no_host_arithmetic(wl)


class GQA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def test_sdpa_with_grouped_key_heads_counts_every_query_head():
    q, kv = torch.randn(1, 8, 16, 32), torch.randn(1, 2, 16, 32)
    wl = trace_torch(lower_module(GQA(), (q, kv, kv), "gqa"), name="gqa")
    assert wl.total_macs == 2 * 8 * 16 * 16 * 32


class Sorts(nn.Module):
    def forward(self, x):
        return torch.sort(x @ x.T).values


def test_sigmoid_is_host_work_with_its_reason_and_silu_the_units():
    class Acts(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

        def forward(self, x):
            return self.b(torch.sigmoid(self.a(x))) + F.silu(self.a(x))

    wl = trace_torch(lower_module(Acts(), (torch.randn(2, 16),), "acts"), name="acts")
    assert [v.kind for v in wl.vector_ops] == ["silu", "add"]
    logistic = [(name, n) for name, n in wl.other_primitives if name.startswith("logistic")]
    assert logistic == [("logistic[sigmoid: the vector unit has no sigmoid kind (its silu is x * sigmoid(x))]", 1)]


def test_an_op_without_lowering_is_named():
    with pytest.raises(WorkloadError, match=r"aten\.sort.* has no lowering"):
        trace_torch(lower_module(Sorts(), (torch.randn(4, 4),), "sorts"), name="sorts")


def test_a_module_on_the_meta_device_traces_from_shapes():
    with torch.device("meta"):
        block = Block(d=64)
    model = lower_module(block, (torch.empty(1, 4, 64, device="meta"),), "meta")
    assert model.on_meta
    assert trace_torch(model, name="meta").total_macs == 4 * 64 * 64 * 4 + 2 * 4 * 4 * 4 * 16 + 2 * 4 * 64 * 256


def test_without_torch_the_way_in_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(WorkloadError) as info:
        import_torch()
    assert str(info.value) == TORCH_MISSING and "[torch]" in TORCH_MISSING or ".[torch]" in TORCH_MISSING


MODULE = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return x + self.b(nn.functional.gelu(self.a(x)))


def net():
    torch.manual_seed(0)
    return Net(), (torch.randn(4, 16),)


def bare():
    return Net()
'''


@pytest.fixture
def torch_file(tmp_path, monkeypatch):
    (tmp_path / "tnet.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "tnet.py"


def test_evaluate_runs_a_torch_model_from_file_py_fn(run_cli, torch_file):
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{torch_file}:net", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["accuracy"]["sqnr_db"] > 15.0
    wl = resolve(f"{torch_file}:net")
    assert "quantised float model" in sqnr_source(wl, "int8", "int8")
    assert wl.source == "torch" and wl.total_macs == 2 * 4 * 16 * 32
    assert [v.kind for v in wl.vector_ops] == ["gelu", "add"]


def test_a_pt2_file_and_a_pickled_file(run_cli, torch_file, tmp_path):
    sys.path.insert(0, str(tmp_path))
    try:
        from tnet import net  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    module, args = net()
    torch.export.save(torch.export.export(module.eval(), args), tmp_path / "net.pt2")
    code, out, err = run_cli("workloads", "show", str(tmp_path / "net.pt2"), "--json")
    assert code == 0, err
    assert resolve(str(tmp_path / "net.pt2")).total_macs == 2 * 4 * 16 * 32
    torch.save(module.state_dict(), tmp_path / "net.pt")
    code, out, err = run_cli("workloads", "show", str(tmp_path / "net.pt"))
    assert code == 2 and "file.py:fn" in err and "torch.export.save" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli("workloads", "show", f"{torch_file}:bare")
    assert code == 2 and "without example inputs" in err
