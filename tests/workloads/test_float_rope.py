"""Float rotary embeddings written with jnp (either pairing) become the vector unit's rope records."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from workloads._ptq import quantise_model
from workloads._tracer import trace

S, F32 = jax.ShapeDtypeStruct, jnp.float32
B, T, H, DH = 1, 8, 2, 16
X, W = S((B, T, H * DH), F32), S((H * DH, H * DH), F32)


def _angles(start, theta):
    inv = 1.0 / (theta ** (jnp.arange(0, DH, 2, dtype=F32) / DH))
    return jnp.outer(jnp.arange(start, start + T, dtype=F32), inv)


def _halves(x, start=0, theta=10000.0):  # LLaMA / Hugging Face: rotate the two halves
    ang = jnp.concatenate([_angles(start, theta)] * 2, -1)[None, :, None, :]
    x1, x2 = x[..., : DH // 2], x[..., DH // 2:]
    return x * jnp.cos(ang) + jnp.concatenate([-x2, x1], -1) * jnp.sin(ang)


def _pairs(x, start=0, theta=10000.0):  # Meta's: rotate interleaved pairs
    ang = _angles(start, theta)[None, :, None, :]
    c, s = jnp.cos(ang), jnp.sin(ang)
    xr = x.reshape(B, T, H, DH // 2, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    return jnp.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(B, T, H, DH)


def _qk(rope, **kw):
    def f(x, wq, wk):
        q = rope((x @ wq).reshape(B, T, H, DH), **kw)
        k = rope((x @ wk).reshape(B, T, H, DH), **kw)
        return jnp.einsum("bqhd,bkhd->bhqk", q, k)

    return f


def _ropes(wl):
    return [(v.kind, v.shape, dict(v.params)) for v in wl.vector_ops]


def test_both_pairings_become_rope_records_and_leave_no_host_work():
    for rope in (_halves, _pairs):
        wl = trace(_qk(rope), X, W, W)
        want = ("rope", (B, T, H, DH), {"start": 0, "theta": 10000})
        assert _ropes(wl) == [want, want], rope.__name__
        assert not wl.other_primitives, rope.__name__  # the cos/sin tables go with the records


def test_theta_and_the_first_position_are_read_from_the_tables():
    wl = trace(_qk(_pairs, start=4, theta=500000.0), X, W, W)
    assert {tuple(sorted(v.params)) for v in wl.vector_ops} == {(("start", 4), ("theta", 500000))}


def test_look_alikes_stay_host_work():
    def data_angles(x, wq):  # the angle depends on the data: not a position's rotation
        h = (x @ wq).reshape(B, T, H, DH)
        return h * jnp.cos(h) + h[..., ::-1] * jnp.sin(h)

    def cos_only(x, wq):
        h = (x @ wq).reshape(B, T, H, DH)
        ang = jnp.concatenate([_angles(0, 1e4)] * 2, -1)[None, :, None, :]
        return h * jnp.cos(ang) + h[..., ::-1] * jnp.cos(2 * ang)

    for f in (data_angles, cos_only):
        wl = trace(f, X, W)
        assert "rope" not in [v.kind for v in wl.vector_ops], f.__name__
        assert "mul" in dict(wl.other_primitives), f.__name__


def test_a_rotated_attention_quantises():
    rng = np.random.default_rng(0)
    wq, wk = ((rng.standard_normal((H * DH, H * DH)) / np.sqrt(H * DH)).astype(np.float32) for _ in range(2))
    f = _qk(_halves)
    int8 = quantise_model(lambda x: f(x, wq, wk), (X,), "int8", "int8")
    int4 = quantise_model(lambda x: f(x, wq, wk), (X,), "int4", "int4")
    assert int8.vector_ops == 2
    assert int8.sqnr_db > 25.0 > int4.sqnr_db
