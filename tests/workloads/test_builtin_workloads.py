"""Builtin workloads: MAC totals against published figures and the architectures, both forms, options."""

from __future__ import annotations

import dataclasses

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

import workloads
from accel_spec.errors import WorkloadError
from workloads import builtin_model, builtin_names, resolve, trace


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


def test_resnet18_matches_the_published_figure_and_the_architecture():
    w = resolve("resnet18")
    # He et al. 2016, Table 1: 1.8e9 multiply-adds; the usual quoted figure is 1.82 GMACs.
    assert _rel(w.total_macs, 1.82e9) < 0.01
    # From the architecture: conv1, 4 stages of 2 basic blocks, 1x1 projections, fc.
    expected = 112 * 112 * 64 * 3 * 49
    size, c_in = 56, 64
    for c, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        out = size // stride
        expected += out * out * c * c_in * 9 + 3 * out * out * c * c * 9  # 4 3x3 convs per stage
        if stride == 2:
            expected += out * out * c * c_in  # projection shortcut
        size, c_in = out, c
    expected += 512 * 1000
    assert w.total_macs == expected
    assert sum(op.kind == "conv2d" for op in w.ops) == 20 and w.ops[-1].kind == "gemm"


def test_mobilenet_v2_matches_the_published_figure():
    w = resolve("mobilenet_v2")
    assert _rel(w.total_macs, 300e6) < 0.01  # Sandler et al. 2018: 300M multiply-adds at 224, width 1.0
    depthwise = [op for op in w.ops if op.kind == "conv2d" and op.groups > 1]
    assert len(depthwise) == 17 and all(op.groups == op.c_in == op.c_out for op in depthwise)


def test_batch_and_resolution_options_scale_cnn_work():
    base = resolve("resnet18").total_macs
    assert resolve("resnet18:batch=4").total_macs == 4 * base
    # every spatial size halves at 112 input except where flooring bites: check conv1 by hand
    conv1 = resolve("resnet18:res=112").ops[0]
    assert conv1.macs == 56 * 56 * 64 * 3 * 49


def bert_layer_macs(seq: int, batch: int = 1, d: int = 768, heads: int = 12, ffn: int = 3072) -> int:
    """MACs of one BERT encoder layer from the architecture (Devlin et al. 2019)."""
    dh = d // heads
    projections = 4 * seq * d * d  # Q, K, V, output
    attention = 2 * heads * seq * seq * dh  # Q K^T and P V
    feed_forward = 2 * seq * d * ffn
    return batch * (projections + attention + feed_forward)


@pytest.mark.parametrize(("spec", "seq", "batch", "layers"),
                         [("bert_base", 512, 1, 1), ("bert_base:seq=128", 128, 1, 1),
                          ("bert_base:seq=64,batch=3,layers=2", 64, 3, 2)])
def test_bert_base_matches_the_architecture(spec, seq, batch, layers):
    w = resolve(spec)
    assert w.total_macs == layers * bert_layer_macs(seq, batch)
    assert len(w.ops) == 8 and set(w.counts) == {layers}
    scores = next(op for op in w.ops if op.name.endswith("scores"))
    assert (scores.m, scores.k, scores.n, scores.batch) == (seq, 64, seq, batch * 12)


def test_gpt2_decode_matches_the_architecture():
    kv, d, ffn, vocab, layers = 100, 768, 3072, 50257, 12
    per_layer = d * 3 * d + 2 * 12 * (kv + 1) * 64 + d * d + 2 * d * ffn
    w = resolve(f"gpt2_decode:kv={kv}")
    assert w.total_macs == layers * per_layer + d * vocab
    assert resolve("gpt2_decode:kv=100,batch=2").total_macs == 2 * w.total_macs


@pytest.mark.parametrize(("spec", "seq", "kv"), [("llama_block:seq=256", 256, 0),
                                                 ("llama_decode:kv=1000", 1, 1000),
                                                 ("llama_block:seq=8,kv=24", 8, 24)])
def test_llama_block_matches_the_architecture(spec, seq, kv):
    d, heads, ffn = 4096, 32, 11008
    expected = 4 * seq * d * d + 2 * heads * seq * (seq + kv) * (d // heads) + 3 * seq * d * ffn
    assert resolve(spec).total_macs == expected


def test_llama_dimensions_are_parameters():
    w = resolve("llama_block:seq=4,d=512,heads=8,ffn=1024")
    assert w.total_macs == 4 * 4 * 512 * 512 + 2 * 8 * 4 * 4 * 64 + 3 * 4 * 512 * 1024


def test_dlrm_and_mlp_match_the_architecture():
    b = 128
    bottom = [13, 512, 256, 128]
    top = [128 + 27 * 26 // 2, 1024, 1024, 512, 256, 1]
    dense = sum(bottom[i] * bottom[i + 1] for i in range(3)) + sum(top[i] * top[i + 1] for i in range(5))
    assert resolve("dlrm_mlp").total_macs == b * dense + b * 27 * 27 * 128
    assert resolve("mlp:batch=2,d_in=10,hidden=20,layers=2,d_out=3").total_macs == 2 * (10 * 20 + 20 * 20 + 20 * 3)
    assert resolve("gemm:m=3,k=5,n=7,batch=2").gemms()[0][0].to_gemm().macs == 2 * 3 * 5 * 7


def _matmul_eqns(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("dot_general", "conv_general_dilated"):
            yield eqn
        for sub in jex_core.jaxprs_in_params(eqn.params):
            yield from _matmul_eqns(sub)


@pytest.mark.parametrize("name", builtin_names())
def test_int8_form_is_int8_by_int8_to_int32_and_float_form_has_the_same_ops(name):
    int8, flt = builtin_model(name, "int8"), builtin_model(name, "float")
    jaxpr = jax.make_jaxpr(int8.fn)(*int8.example_args()).jaxpr
    eqns = list(_matmul_eqns(jaxpr))
    assert eqns
    for eqn in eqns:
        assert [str(v.aval.dtype) for v in eqn.invars] == ["int8", "int8"]
        assert str(eqn.outvars[0].aval.dtype) == "int32"
    a = trace(int8.fn, *int8.example_args())
    b = trace(flt.fn, *flt.example_args())
    built = resolve(name)

    def raw(ops):
        return tuple(dataclasses.replace(op, requant=None) for op in ops)

    assert a.counts == b.counts and a.ops == raw(b.ops) == raw(built.ops)
    if name != "gemm":  # a float model's ops are requantised and chained as the builtin's (the raw gemm is not)
        assert b.ops == built.ops
        assert [op.a_from_previous for op in b.ops] == [op.a_from_previous for op in built.ops]


def test_int8_gemm_runs_bit_exactly():
    model = builtin_model("gemm:m=16,k=300,n=8,batch=2")
    b, a = model.make_args(3)
    c = np.asarray(model.fn(b, a))
    assert c.dtype == np.int32
    assert np.array_equal(c, np.asarray(a, np.int64) @ np.asarray(b, np.int64))


def test_small_models_run_in_both_forms_deterministically():
    for form in ("int8", "float"):
        model = builtin_model("mlp:batch=2,d_in=8,hidden=16,layers=1,d_out=4", form)
        first = np.asarray(model.fn(*model.make_args(0)))
        again = np.asarray(model.fn(*model.make_args(0)))
        other = np.asarray(model.fn(*model.make_args(1)))
        assert first.shape == (2, 4) and np.array_equal(first, again) and not np.array_equal(first, other)
        assert first.dtype == (np.int8 if form == "int8" else np.float32)
        assert np.isfinite(first.astype(np.float64)).all()


def test_builtins_list_with_descriptions():
    names = builtin_names()
    assert {"gemm", "mlp", "resnet18", "mobilenet_v2", "bert_base", "gpt2_decode", "llama_block",
            "dlrm_mlp"} <= set(names)
    descriptions = workloads.builtin_descriptions()
    assert set(descriptions) == set(names) and all(d and "\n" not in d for d in descriptions.values())


def test_spec_name_is_canonical_and_cached():
    a = resolve("bert_base: seq = 128 ")
    assert a.name == "bert_base:seq=128" and a is resolve("bert_base:seq=128")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuch", r"unknown workload 'nosuch'; builtins are gemm, mlp, resnet18"),
        ("resnet", r"did you mean resnet18\?"),
        ("bert_base:sq=128", r"bert_base has no option 'sq'; its options are batch, seq, layers"),
        ("bert_base:seq=abc", r"bert_base option seq must be a positive integer, not 'abc'"),
        ("bert_base:seq=0", r"bert_base option seq must be a positive integer, not 0"),
        ("bert_base:seq=-4", r"must be a positive integer, not -4"),
        ("bert_base:seq=1.5", r"not '1.5'"),
        ("bert_base:seq", r"options must be k=v pairs"),
        ("bert_base:seq=1,seq=2", r"option seq is given twice"),
        ("gpt2_decode:kv=-1", r"gpt2_decode option kv must be a non-negative integer, not -1"),
        ("llama_block:d=100", r"d=100 must be divisible by heads=32"),
        ("bert_base:d=100", r"bert_base option d=100 must be divisible by heads=12"),
        ("some.module", r"names no function"),
        ("", r"workload must be"),
    ],
)
def test_bad_specs_raise_one_clear_line(spec, message):
    with pytest.raises(WorkloadError, match=message) as info:
        resolve(spec)
    assert "\n" not in str(info.value)


def test_zero_kv_cache_is_allowed():
    assert resolve("gpt2_decode:kv=0,layers=1").total_macs > 0


def test_int8_output_dtype_of_models():
    model = builtin_model("bert_base:seq=8")
    out = jax.eval_shape(model.fn, *model.example_args())
    assert out.dtype == jnp.int8 and out.shape == (1, 8, 768)
    with pytest.raises(WorkloadError,
                       match="form must be one of int8, float, float_ref, int8_float_vector, not 'int4'"):
        builtin_model("gemm", "int4")
