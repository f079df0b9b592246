"""Dense builtins: a single GEMM, a plain MLP and the DLRM MLPs with their feature interaction.

DLRM follows Naumov et al., "Deep Learning Recommendation Model for Personalization and
Recommendation Systems" (2019) in the MLPerf Criteo Terabyte configuration: 13 dense features,
26 embedding tables of dimension 128, bottom MLP 13-512-256-128, pairwise dot-product
interaction of the 27 vectors (351 pairs) concatenated with the bottom output (479 features),
top MLP 479-1024-1024-512-256-1. The embedding lookups are not part of this workload: the 26
looked-up vectors are an input.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from workloads._layers import Form, ParamMaker
from workloads._model import Model
from workloads._requant import output_stage
from workloads.ops import Requant

__all__ = ["gemm", "mlp", "dlrm_mlp"]


def gemm(form: Form, *, m: int, k: int, n: int, batch: int, requant: int = 0, multiplier: int = 1 << 30,
         shift: int = 0, bias: int = 0, zero_point: int = 0, act_min: int = -128, act_max: int = 127) -> Model:
    """``C = A @ B`` (``batch`` independent products when ``batch > 1``); int8 form returns int32.

    ``fn(b, a)``: ``b`` is ``(k, n)`` (or ``(batch, k, n)``), ``a`` is ``(m, k)`` (or ``(batch, m, k)``).
    With ``requant=1`` the int8 form's result goes through the output stage with the given
    (per-tensor) parameters and is int8.
    """
    lead = (batch,) if batch > 1 else ()
    rq = Requant(multiplier=(multiplier,), shift=(shift,), bias=(bias,), zero_point=zero_point, act_min=act_min,
                 act_max=act_max) if requant else None

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        return pm.weight(lead + (k, n), k), pm.activation(lead + (m, k))

    def fn(b: jax.Array, a: jax.Array) -> jax.Array:
        batch_dims = ((0,), (0,)) if lead else ((), ())
        with jax.named_scope("gemm"):
            acc = lax.dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), batch_dims),
                                  preferred_element_type=form.acc_dtype)
        return output_stage(acc, rq) if rq is not None and form.is_int8 else acc

    return Model(fn, make_args)


def _dense_stack(pm: ParamMaker, dims: tuple[int, ...]) -> list[jax.Array]:
    return [pm.weight((dims[i], dims[i + 1]), dims[i]) for i in range(len(dims) - 1)]


def _run_stack(form: Form, x: jax.Array, weights: list[jax.Array], prefix: str,
               last_relu: bool) -> jax.Array:
    for i, w in enumerate(weights):
        with jax.named_scope(f"{prefix}.{i}"):
            x = form.dense(x, w, "relu" if i + 1 < len(weights) or last_relu else None)
    return x


def mlp(form: Form, *, batch: int, d_in: int, hidden: int, layers: int, d_out: int) -> Model:
    """``layers`` hidden ReLU layers of width ``hidden`` between ``d_in`` inputs and ``d_out`` outputs."""
    dims = (d_in,) + (hidden,) * layers + (d_out,)

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        return _dense_stack(pm, dims), pm.activation((batch, d_in))

    def fn(weights: list[jax.Array], x: jax.Array) -> jax.Array:
        return _run_stack(form, x, weights, "fc", last_relu=False)

    return Model(fn, make_args)


_BOTTOM_HIDDEN = (512, 256)
_TOP_HIDDEN = (1024, 1024, 512, 256)


def dlrm_mlp(form: Form, *, batch: int, dense: int, tables: int, dim: int) -> Model:
    """DLRM bottom MLP, dot-product interaction and top MLP for ``batch`` samples.

    ``fn(params, dense_x, emb)``: ``dense_x`` is ``(batch, dense)``, ``emb`` the looked-up
    embedding vectors ``(batch, tables, dim)``; returns the click logits ``(batch, 1)``.
    """
    vectors = tables + 1
    rows, cols = np.tril_indices(vectors, k=-1)  # the vectors*(vectors-1)/2 distinct pairs
    top_in = dim + len(rows)

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        params = {
            "bottom": _dense_stack(pm, (dense,) + _BOTTOM_HIDDEN + (dim,)),
            "top": _dense_stack(pm, (top_in,) + _TOP_HIDDEN + (1,)),
        }
        return params, pm.activation((batch, dense)), pm.activation((batch, tables, dim))

    def fn(params: dict[str, Any], dense_x: jax.Array, emb: jax.Array) -> jax.Array:
        z = _run_stack(form, dense_x, params["bottom"], "bottom", last_relu=True)
        t = jnp.concatenate([z[:, None, :], emb], axis=1)
        with jax.named_scope("interaction"):
            pairs = form.einsum("bid,bjd->bij", t, t, dim)
        flat = pairs[:, rows, cols]
        x = jnp.concatenate([z, flat], axis=1)
        return _run_stack(form, x, params["top"], "top", last_relu=False)

    return Model(fn, make_args)
