"""StableHLO as workloads: ``jax.export`` of the builtins read back as text, bytecode and artefact.

The expected ops are the JAX trace of the same model (a different walker over a different
representation); ``lax.scan`` lowers to a ``stablehlo.while``, so the transformer builtins
also check the counted-loop trip count.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from jax import export

import workloads
from accel_spec.errors import WorkloadError

SPECS = ["resnet18:res=64", "mobilenet_v2:res=64", "alexnet:res=96", "bert_base:seq=16,layers=2",
         "gpt2_decode:kv=16,layers=3", "llama_block:seq=8,d=64,heads=2,ffn=96", "dlrm_mlp"]


def _shapes(wl):
    """Per op: its geometry and run count, without labels, output-stage parameters and the link to the op
    before (a file has neither: only the tracer of a requantised model finds them)."""
    return [(op.kind, {f.name: getattr(op, f.name) for f in dataclasses.fields(op)
                       if f.name not in ("name", "origin", "requant", "a_from_previous")}, c)
            for op, c in zip(wl.ops, wl.counts, strict=True)]


def _exported(spec):
    model = workloads.builtin_model(spec)
    return export.export(jax.jit(model.fn))(*model.example_args()), model


@pytest.mark.parametrize("spec", SPECS)
def test_export_of_each_builtin_reads_back_as_its_trace(tmp_path, spec):
    exp, model = _exported(spec)
    traced = workloads.resolve(spec)
    files = {"m.mlir": exp.mlir_module().encode(), "m.mlirbc": bytes(exp.mlir_module_serialized),
             "m.bin": bytes(exp.serialize())}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        wl = workloads.resolve(str(tmp_path / name))
        assert wl.source == "stablehlo" and wl.total_macs == traced.total_macs, name
        assert _shapes(wl) == _shapes(traced), name
    assert workloads.trace(exp.call, *model.example_args()).total_macs == traced.total_macs  # call_exported


def test_names_and_origins_come_from_the_module(tmp_path):
    exp, _ = _exported("resnet18:res=32")
    (tmp_path / "r.mlir").write_text(exp.mlir_module())
    wl = workloads.resolve(str(tmp_path / "r.mlir"))
    assert wl.ops[0].name == "conv1" and wl.ops[-1].name == "fc"
    assert wl.ops[0].origin.startswith("stablehlo.convolution #1 in @main (") and "conv1" in wl.ops[0].origin


def test_call_exported_inside_a_users_function():
    w = jax.ShapeDtypeStruct((16, 8), jnp.float32)
    inner = export.export(jax.jit(lambda x, w: x @ w))(jax.ShapeDtypeStruct((4, 16), jnp.float32), w)

    def outer(x, w):
        return jnp.tanh(inner.call(x, w)) @ jnp.ones((8, 2))

    wl = workloads.trace(outer, jax.ShapeDtypeStruct((4, 16), jnp.float32), w)
    assert [(op.m, op.k, op.n) for op in wl.ops] == [(4, 16, 8), (4, 8, 2)]
    assert wl.total_macs == 4 * 16 * 8 + 4 * 8 * 2


def test_a_while_loop_that_is_not_counted_runs_once(tmp_path):
    def fn(x):
        return jax.lax.while_loop(lambda c: jnp.sum(c) < 100.0, lambda c: c @ jnp.ones((4, 4)), x)

    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((4, 4), jnp.float32))
    (tmp_path / "w.mlir").write_text(exp.mlir_module())
    wl = workloads.resolve(str(tmp_path / "w.mlir"))
    assert wl.counts == (1,) and wl.total_macs == 64


def test_of_a_conds_branches_the_costliest_counts(tmp_path):
    def fn(p, x):
        big = lambda x: x @ jnp.ones((4, 64)) @ jnp.ones((64, 4))  # noqa: E731
        return jax.lax.cond(p, big, lambda x: x @ jnp.ones((4, 4)), x)

    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((), jnp.bool_), jax.ShapeDtypeStruct((4, 4), jnp.float32))
    (tmp_path / "c.mlir").write_text(exp.mlir_module())
    assert workloads.resolve(str(tmp_path / "c.mlir")).total_macs == 4 * 4 * 64 + 4 * 64 * 4


def test_fori_loop_counts_its_trips(tmp_path):
    def fn(x):
        return jax.lax.fori_loop(2, 7, lambda i, c: c @ jnp.ones((4, 4)), x)

    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((4, 4), jnp.float32))
    (tmp_path / "f.mlir").write_text(exp.mlir_module())
    assert workloads.resolve(str(tmp_path / "f.mlir")).counts == (5,)


def test_shape_polymorphic_export_is_refused_clearly(tmp_path):
    (b,) = export.symbolic_shape("b")
    exp = export.export(jax.jit(lambda x: x @ jnp.ones((8, 3))))(jax.ShapeDtypeStruct((b, 8), jnp.float32))
    (tmp_path / "p.mlir").write_text(exp.mlir_module())
    with pytest.raises(WorkloadError, match="dynamic dimension.*static shapes"):
        workloads.resolve(str(tmp_path / "p.mlir"))


def test_text_that_is_not_mlir_is_refused(tmp_path):
    (tmp_path / "x.mlir").write_text("func.func @main( this is not MLIR")
    with pytest.raises(WorkloadError, match=r"x\.mlir is not a StableHLO module MLIR can parse"):
        workloads.resolve(str(tmp_path / "x.mlir"))
