"""A constant softmax mask is read for its values: causal with its offset on the unit, anything else
(a sliding window) host work with the reason, never recorded as causal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from workloads._float_patterns import NONCAUSAL_MASK
from workloads._tracer import trace

S, F32 = jax.ShapeDtypeStruct, jnp.float32
T, DH = 8, 16


def _attention(mask_fn, keys=T, additive=False):
    def f(q, k):
        s = q @ k.T
        m = mask_fn()
        s = s + jnp.where(m, 0.0, -1e9) if additive else jnp.where(m, s, -jnp.inf)
        return jax.nn.softmax(s, axis=-1) @ k

    return trace(f, S((q_rows(keys), DH), F32), S((keys, DH), F32))


def q_rows(keys):
    return 1 if keys == 13 else T


WINDOW = np.tril(np.ones((T, T), bool)) & np.triu(np.ones((T, T), bool), -3)


@pytest.mark.parametrize(("mask_fn", "keys", "offset"), [
    (lambda: jnp.tril(jnp.ones((T, T), bool)), T, 0),
    (lambda: jnp.tril(jnp.ones((T, T + 2), bool), 2), T + 2, 2),  # 2 cached keys before the block
    (lambda: jnp.asarray(np.tril(np.ones((T, T), bool))), T, 0),  # a constant array, not iota-built
    (lambda: jnp.ones((1, 13), bool), 13, 12),  # one query after 12 cached keys: a decode step
    (lambda: jnp.ones((T, T), bool), T, -1),  # keeps everything: no mask
])
def test_a_causal_mask_gives_its_offset(mask_fn, keys, offset):
    for additive in (False, True):
        wl = _attention(mask_fn, keys, additive)
        assert [(v.kind, v.param("causal_offset")) for v in wl.vector_ops] == [("softmax", offset)]
        assert not any(NONCAUSAL_MASK in name for name, _ in wl.other_primitives)


@pytest.mark.parametrize("mask_fn", [
    lambda: jnp.tril(jnp.ones((T, T), bool)) & jnp.triu(jnp.ones((T, T), bool), -3),  # a sliding window of 4
    lambda: jnp.asarray(WINDOW),
    lambda: jnp.triu(jnp.ones((T, T), bool)),  # anti-causal
])
def test_a_mask_that_is_not_causal_is_host_work_with_the_reason(mask_fn):
    wl = _attention(mask_fn)
    assert [(v.kind, v.param("causal_offset")) for v in wl.vector_ops] == [("softmax", -1)]
    assert dict(wl.other_primitives)[f"select_n[{NONCAUSAL_MASK}]"] == 1
