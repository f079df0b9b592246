"""Post-training quantisation of float JAX models: the SQNR against numpy by hand, and its properties."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from accel_spec.errors import WorkloadError
from workloads._ptq import NotQuantisable, quantise_model

S, F32 = jax.ShapeDtypeStruct, jnp.float32
T, D, F = 8, 32, 64


def _gauss(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _db(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return 10 * math.log10(np.sum(ref**2) / np.sum((ref - got) ** 2))


def _int8(x, scale):
    return np.clip(np.rint(x / scale), -128, 127)


@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
def test_one_linear_layer_matches_numpy_by_hand(tmp_path, per_channel):
    # calibration and evaluation both on the file's 3 samples: every scale is the largest magnitude
    # over them divided by 127; the output is the exact integer product rescaled, rounded to int8 at
    # the output's own scale
    x = _gauss((3, T, D), 1)
    w = _gauss((D, F), 2) * np.exp(np.linspace(-2, 2, F)).astype(np.float32)  # columns 55x apart
    path = tmp_path / "cal.npz"
    np.savez(path, x, w)
    ref = np.einsum("std,df->stf", x.astype(np.float64), w.astype(np.float64))
    sa = np.abs(x).max() / 127
    sb = (np.abs(w).max(axis=0) if per_channel else np.abs(w).max()) / 127
    real = np.einsum("std,df->stf", _int8(x, sa), _int8(w, sb)) * sa * sb
    so = np.abs(ref).max() / 127
    want = _db(ref, _int8(real, so) * so)
    got = quantise_model(lambda a, b: a @ b, (S((T, D), F32), S((D, F), F32)), "int8", "int8",
                         granularity="channel" if per_channel else "tensor", calibration=str(path))
    assert got.sqnr_db == pytest.approx(want, abs=0.01)
    assert got.matrix_ops == 1 and got.vector_ops == 0


def test_fp8_scales_are_powers_of_two_by_hand(tmp_path):
    x, w = _gauss((T, D), 3, 10.0), _gauss((D, F), 4, 0.01)
    path = tmp_path / "cal.npz"
    np.savez(path, x, w)
    e4m3 = ml_dtypes.float8_e4m3fn

    def fp8(v, amax):
        s = 2.0 ** math.ceil(math.log2(amax / 448))
        return np.clip(v / s, -448, 448).astype(e4m3).astype(np.float64) * s

    ref = x.astype(np.float64) @ w.astype(np.float64)
    want = _db(ref, fp8(fp8(x, np.abs(x).max()) @ fp8(w, np.abs(w).max()), np.abs(ref).max()))
    got = quantise_model(lambda a, b: a @ b, (S((T, D), F32), S((D, F), F32)), "fp8_e4m3", "fp8_e4m3",
                         granularity="tensor", calibration=str(path))
    assert got.sqnr_db == pytest.approx(want, abs=0.01)


def _mlp_args(column_spread=0.0):
    cols = np.exp(np.linspace(-column_spread, column_spread, F)).astype(np.float32)
    return (S((T, D), F32), _gauss((D, F), 5, D**-0.5) * cols, _gauss((F, D), 6, F**-0.5))


def _mlp(x, w1, w2):
    h = x @ w1
    return x + jax.nn.gelu(h) @ w2


def test_a_float_mlp_in_int8_per_channel_clears_the_formats_bound():
    # one int8 rounding of a Gaussian tensor whose largest magnitude is ~3.5 sigma (a few hundred
    # values) keeps 10 log10(12 * 127**2 / 3.5**2) = 42.2 dB; the MLP rounds x, w1, h, gelu(h), w2,
    # the product and the residual add's result: seven independent noises, 42.2 - 10 log10(7) = 33.7 dB
    r = quantise_model(_mlp, _mlp_args(), "int8", "int8", granularity="channel")
    assert r.sqnr_db > 30.0
    assert r.vector_ops == 2  # the GELU and the residual add


def test_int4_is_worse_than_int8_and_fp8_lies_between_on_the_same_model():
    args = _mlp_args()
    db = {f: quantise_model(_mlp, args, w, a).sqnr_db
          for f, (w, a) in {"int8": ("int8", "int8"), "int4": ("int4", "int4"), "w4a8": ("int4", "int8")}.items()}
    # each bit is ~6 dB: 4 bits fewer on every tensor cost ~24 dB, on the weights only less
    assert db["int4"] < db["w4a8"] < db["int8"]
    assert db["int8"] - db["int4"] > 15.0


def test_per_channel_beats_per_tensor_when_columns_differ():
    # w1's columns e**6 = 400x apart, undone by a per-channel scale after the product (a folded
    # batch norm: the output stage's): per tensor, the small columns keep a few codes of int8
    x, w1, w2 = _mlp_args(column_spread=3.0)
    inv = np.exp(-np.linspace(-3.0, 3.0, F)).astype(np.float32)

    def folded(x, w1, w2):
        return x + jax.nn.gelu((x @ w1) * inv) @ w2

    tensor = quantise_model(folded, (x, w1, w2), "int8", "int8", granularity="tensor").sqnr_db
    channel = quantise_model(folded, (x, w1, w2), "int8", "int8", granularity="channel").sqnr_db
    assert channel > 30.0 > tensor + 5.0


def test_an_attention_block_with_a_causal_mask_and_layernorm():
    wq, wk, wv = (_gauss((D, D), s, D**-0.5) for s in (7, 8, 9))

    def block(x):
        m = jnp.mean(x, -1, keepdims=True)
        h = (x - m) / jnp.sqrt(jnp.mean((x - m) ** 2, -1, keepdims=True) + 1e-5)
        s = (h @ wq) @ (h @ wk).T / math.sqrt(D)
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
        return x + jax.nn.softmax(s, axis=-1) @ (h @ wv)

    int8 = quantise_model(block, (S((T, D), F32),), "int8", "int8")
    int4 = quantise_model(block, (S((T, D), F32),), "int4", "int4")
    assert int8.vector_ops == 3  # layernorm, softmax (its mask taken in), residual add
    assert int8.sqnr_db > 25.0 > int4.sqnr_db


def test_models_it_does_not_take_are_named():
    with pytest.raises(NotQuantisable, match="integer matrix ops"):
        quantise_model(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32),
                       (S((4, 4), jnp.int8), S((4, 4), jnp.int8)), "int8", "int8")

    def scanned(x, w):
        return jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=2)[0]

    with pytest.raises(NotQuantisable, match="scan"):
        quantise_model(scanned, (S((4, 4), F32), S((4, 4), F32)), "int8", "int8")


def test_bad_options_and_files_are_one_line_errors(tmp_path):
    args = (S((T, D), F32), S((D, F), F32))
    with pytest.raises(WorkloadError, match="granularity must be one of tensor, channel, not 'row'"):
        quantise_model(lambda a, b: a @ b, args, "int8", "int8", granularity="row")
    with pytest.raises(WorkloadError, match="one format for both"):
        quantise_model(lambda a, b: a @ b, args, "fp8_e4m3", "bf16")
    bad = tmp_path / "bad.npz"
    np.savez(bad, np.zeros((T, D), np.float32), np.zeros((3, 3), np.float32))
    with pytest.raises(WorkloadError, match=r"arr_1 must have shape \(32, 64\)"):
        quantise_model(lambda a, b: a @ b, args, "int8", "int8", calibration=str(bad))
    with pytest.raises(WorkloadError, match="existing .npz file"):
        quantise_model(lambda a, b: a @ b, args, "int8", "int8", calibration=str(tmp_path / "none.npz"))
