# amaranth: UnusedElaboratable=no
"""The vector unit in Amaranth's simulator: every op it runs bit-exact against its JAX integer
definition (``workloads._int_ops``), edge values included, and its busy cycles equal to the
model's (``perf_model.vector_timing``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accel_spec.errors import ConfigError, ModelError
from perf_model.compiler.vector import vector_registers
from perf_model.vector_timing import vector_cycles, vector_plan
from rtl_gen.core.vector_unit import VectorUnit
from tests.rtl_gen.vector_testlib import run_vector
from workloads import _int_ops as io
from workloads.vector_ops import VectorOp

LANES = 4
_Q = 1.0 / 16


def _op(kind: str, shape: tuple[int, ...], params: dict[str, int], axis: int | None = None) -> VectorOp:
    return VectorOp(kind=kind, shape=shape, axis=axis, params=tuple(params.items()))


def _check(op: VectorOp, ref: object, x: np.ndarray, y: np.ndarray | None = None, lanes: int = LANES) -> None:
    got, cycles = run_vector(op, lanes, x, y)
    want = np.asarray(ref).astype(np.int64)
    assert got.shape == want.shape
    bad = np.argwhere(got != want)
    first = tuple(bad[0]) if bad.size else ()
    assert bad.size == 0, f"{op.kind}: {len(bad)} mismatches, first at {first}: {got[first]} vs {want[first]}"
    assert cycles == vector_cycles(op, lanes)


def _int8(rng: np.random.Generator, shape: tuple[int, ...], low: int = -128, high: int = 128) -> np.ndarray:
    return rng.integers(low, high, shape, dtype=np.int8)


EDGE = np.array([[-128, -128, 127, 127, 0, -1, 1, 96, 97, -127, 64]], np.int8)


@pytest.mark.parametrize("scales", [(_Q, _Q, _Q), (_Q, 2 * _Q, _Q / 2), (_Q / 4, _Q, _Q * 3)])
def test_add_rescale_saturates(scales):
    rng = np.random.default_rng(1)
    x = np.concatenate([EDGE, _int8(rng, (2, 11))])
    y = np.concatenate([EDGE[:, ::-1], _int8(rng, (2, 11))])
    a, b, out = scales
    _check(_op("add", x.shape, io.add_params(a, b, out)), io.add(x, y, scale_a=a, scale_b=b, scale_out=out), x, y)


@pytest.mark.parametrize("kind", ["relu", "relu6", "gelu", "silu", "silu_gated", "mul"])
def test_elementwise_every_code(kind):
    """All 256 codes (the most negative and saturating ones among them), on an edge-size row."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)
    y = np.roll(x, 37)
    if kind == "relu":
        _check(_op("relu", x.shape, {}), io.relu(x), x)
    elif kind == "relu6":
        _check(_op("relu6", x.shape, {"act_max": 96}), io.relu6(x), x)
    elif kind == "gelu":
        _check(_op("gelu", x.shape, io.GELU_PARAMS), io.gelu(x), x)
    elif kind == "silu":
        _check(_op("silu", x.shape, {"gated": 0}), io.silu(x), x)
    elif kind == "silu_gated":
        _check(_op("silu", x.shape, {"gated": 1}), io.silu(x, y), x, y)
    else:
        _check(_op("mul", x.shape, {"shift": 4}), io.mul(x, y), x, y)


def _norm_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.stack([
        np.full(n, 37, np.int8),                       # zero variance
        np.full(n, -128, np.int8),                     # the most negative input, zero variance
        np.where(np.arange(n) % 2, 127, -128).astype(np.int8),  # the widest spread
        _int8(rng, (n,)),
        _int8(rng, (n,), -3, 3),                       # small values: no row shift
        np.eye(1, n, n - 1, dtype=np.int8)[0] * 127,   # one outlier in the last (partial) word
    ])


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("n", [1, 7, 48])
def test_norm_rows(kind, n):
    rng = np.random.default_rng(n)
    x = _norm_rows(rng, n)
    eps = 1e-5 if kind == "layernorm" else 1e-6
    ref = (io.layernorm if kind == "layernorm" else io.rmsnorm)(x, eps)
    _check(_op(kind, x.shape, io.norm_params(n, eps), axis=1), ref, x)


def _scores(rng: np.random.Generator, q: int, k: int) -> np.ndarray:
    s = _int8(rng, (1, 2, q, k))
    s[0, 0, 0] = 5          # an all-equal row
    s[0, 0, 1] = -128       # all the most negative
    s[0, 1, 0, ::2] = 127   # saturated keys
    return s


@pytest.mark.parametrize("scale", [0.125, 1.0, 16.0])
def test_softmax_rows(scale):
    rng = np.random.default_rng(int(scale * 8))
    s = _scores(rng, 3, 9)
    _check(_op("softmax", s.shape, io.softmax_params(scale, None), axis=3), io.softmax(s, scale=scale), s)


@pytest.mark.parametrize("offset", [0, 2, 7])
def test_softmax_causal_mask(offset):
    """Masked keys give 0; with offset 0 the first query sees a single key (probability 127)."""
    rng = np.random.default_rng(offset)
    s = _scores(rng, 4, 6)
    ref = io.softmax(s, scale=0.5, causal_offset=offset)
    _check(_op("softmax", s.shape, io.softmax_params(0.5, offset), axis=3), ref, s)


def test_lane_counts_agree():
    """One LayerNorm and one softmax on 1 and 8 lanes: the same codes, each at its own cycles."""
    rng = np.random.default_rng(7)
    x = _int8(rng, (2, 20))
    s = _scores(rng, 2, 20)
    for lanes in (1, 8):
        _check(_op("layernorm", x.shape, io.norm_params(20, 1e-5), axis=1), io.layernorm(x), x, lanes=lanes)
        _check(_op("softmax", s.shape, io.softmax_params(0.25, 1), axis=3), io.softmax(s, scale=0.25, causal_offset=1),
               s, lanes=lanes)


@pytest.mark.parametrize("kind, register, delta", [("layernorm", 4, 1 << 20), ("softmax", 2, 20000), ("gelu", 2, 500)])
def test_a_wrong_unit_fails(kind, register, delta):
    """A fault in one parameter register shows up as a mismatch: the comparison can fail."""
    rng = np.random.default_rng(3)
    if kind == "layernorm":
        x = _int8(rng, (2, 8), -2, 2)
        op, ref = _op(kind, x.shape, io.norm_params(8, 1e-5), axis=1), io.layernorm(x)
    elif kind == "softmax":
        x = _int8(rng, (1, 1, 2, 8))
        op, ref = _op(kind, x.shape, io.softmax_params(1.0, None), axis=3), io.softmax(x)
    else:
        x = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)
        op, ref = _op(kind, x.shape, io.GELU_PARAMS), io.gelu(x)
    good, _ = run_vector(op, LANES, x)
    bad, _ = run_vector(op, LANES, x, tamper=(register, delta))
    assert (good == np.asarray(ref)).all()
    assert (bad != np.asarray(ref)).any()


def _pool(kind: str, shape: tuple[int, ...], window: tuple[int, int], stride: tuple[int, int],
          pad: tuple[int, int]) -> VectorOp:
    return _op(kind, shape, {"window_h": window[0], "window_w": window[1], "stride_h": stride[0],
                             "stride_w": stride[1], "pad_h": pad[0], "pad_w": pad[1]})


def _pool_ref(op: VectorOp, x: np.ndarray) -> np.ndarray:
    return np.asarray(io._run(op.kind, dict(op.params), x))


# (NHWC shape, window, stride, padding, lanes): ResNet's 3x3/2 pad 1 stem pool, a 2x2/2 pool
# over two images with channels that leave the last word part-filled, a non-square window with
# unequal strides, a padded 3x3/1 pool (every border window clipped), a global pool (the whole
# map, one output pixel), and one lane (a word per channel)
POOL_CASES = [((1, 6, 5, 3), (3, 3), (2, 2), (1, 1), 2), ((2, 4, 4, 5), (2, 2), (2, 2), (0, 0), LANES),
              ((1, 5, 7, 4), (2, 3), (1, 2), (0, 1), LANES), ((1, 4, 4, 6), (3, 3), (1, 1), (1, 1), LANES),
              ((2, 3, 4, 9), (3, 4), (1, 1), (0, 0), LANES), ((1, 3, 3, 2), (2, 2), (1, 1), (0, 0), 1)]


@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_pool_windows(kind, case):
    """Windowed and global pooling on random codes, bit-exact, at the model's cycles."""
    shape, window, stride, pad, lanes = POOL_CASES[case]
    x = _int8(np.random.default_rng(case), shape)
    op = _pool(kind, shape, window, stride, pad)
    _check(op, _pool_ref(op, x), x, lanes=lanes)


@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
def test_pool_edge_values(kind):
    """The most negative codes (padding never wins a max; an average of -128s stays -128), the
    largest ones (127 averages to 127: no overflow in the sum or the divide), and rounding
    halves (a 2x2 average of 1, 2, 1, 2 is 1.5 and rounds up to 2; of -1, -2, -1, -2, -1.5 to -1)."""
    x = np.full((3, 4, 4, 5), -128, np.int8)
    x[1] = 127
    x[2, :2, :2] = np.array([[1, 2], [1, 2]])[:, :, None]
    x[2, 2:, 2:] = np.array([[-1, -2], [-1, -2]])[:, :, None]
    for window, stride, pad in (((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1))):
        op = _pool(kind, x.shape, window, stride, pad)
        _check(op, _pool_ref(op, x), x)


def test_pool_register_fault_fails():
    """A wrong stride register gives wrong windows: the comparison sees it."""
    x = _int8(np.random.default_rng(5), (1, 6, 6, 4))
    op = _pool("maxpool", x.shape, (2, 2), (2, 2), (0, 0))
    good, _ = run_vector(op, LANES, x)
    bad, _ = run_vector(op, LANES, x, tamper=(3, -1))  # stride_h 2 -> 1
    assert (good == _pool_ref(op, x)).all()
    assert (bad != _pool_ref(op, x)).any()


def test_pool_limits_are_named():
    big = _pool("avgpool", (1, 64, 65, 8), (64, 65), (1, 1), (0, 0))
    assert vector_plan(big, LANES) == "avgpool: a 64x65 window averages 4160 codes, the unit's exact divide takes 4095"
    assert not isinstance(vector_plan(dataclasses.replace(big, kind="maxpool"), LANES), str)
    flat = _pool("maxpool", (8, 8), (2, 2), (2, 2), (0, 0))
    assert vector_plan(flat, LANES) == "maxpool: the vector unit pools NHWC images, not a 2-d input"
    still = _pool("maxpool", (1, 4, 4, 8), (2, 2), (0, 1), (0, 0))
    assert vector_plan(still, LANES) == ("maxpool: window 2x2, stride 0x1 and padding 0x0 must be positive "
                                         "(padding >= 0)")


def _rope(shape: tuple[int, ...], start: int) -> VectorOp:
    return _op("rope", shape, {"start": start, "theta": 10000})


# ((batch, seq, heads, dh), lanes, start): position 0 (every angle 0: cos = 2**14, sin = 0, the
# identity) and 1 on 2 lanes with 3 heads sharing a table row; two batches of one position (the
# host repeats the table per batch) on 4 lanes; one head a position (a table row per row) on one
# lane at positions 2047..2049; 16-element heads on 4 lanes (two word pairs a row)
ROPE_CASES = [((1, 2, 3, 8), 2, 0), ((2, 1, 2, 8), 4, 5), ((1, 3, 1, 4), 1, 2047), ((1, 2, 2, 16), 4, 1)]


@pytest.mark.parametrize("case", range(len(ROPE_CASES)))
def test_rope_rows(case):
    """RoPE bit-exact on random codes with the extremes (rows of -128 and of 127: the rotations of
    those saturate away from angle 0), its table laid out by the host, at the model's cycles."""
    from tests.rtl_gen.vector_testlib import rope_table

    shape, lanes, start = ROPE_CASES[case]
    x = _int8(np.random.default_rng(case), shape)
    x[0, 0, 0] = -128
    x[-1, -1, -1] = 127
    op = _rope(shape, start)
    _check(op, io.rope(x, start=start), x, rope_table(op, lanes), lanes=lanes)
    sat = np.asarray(io.rope(x, start=start)).astype(np.int64)
    if case == 0:  # the edges are exercised: position 0 is the identity, position 1 saturates
        assert (sat[0, 0] == x[0, 0]).all() and (np.abs(sat[0, 1:]) >= 127).any()


def test_rope_cycles_by_hand():
    """Two positions of three heads of 8 on 2 lanes: 6 rows of 4 words, each 2 * 4 reads, the
    last pair's first word written 2 cycles after its last read and its second 1 after that."""
    from tests.rtl_gen.vector_testlib import rope_table

    op = _rope((1, 2, 3, 8), 3)
    x = np.full(op.shape, 127, np.int8)
    _, cycles = run_vector(op, 2, x, rope_table(op, 2))
    assert cycles == 1 + 6 * (8 + 2 + 1) == 67


def test_rope_with_a_wrong_table_fails():
    """The table of the next positions gives other codes: the comparison sees the table."""
    from tests.rtl_gen.vector_testlib import rope_table

    shape, lanes, start = ROPE_CASES[1]
    x = _int8(np.random.default_rng(9), shape)
    good, _ = run_vector(_rope(shape, start), lanes, x, rope_table(_rope(shape, start), lanes))
    bad, _ = run_vector(_rope(shape, start), lanes, x, rope_table(_rope(shape, start + 1), lanes))
    assert (good == np.asarray(io.rope(x, start=start))).all()
    assert (bad != np.asarray(io.rope(x, start=start))).any()


def test_unsupported_ops_are_named():
    rope = _rope((1, 4, 2, 12), 0)  # half a head is 6 elements: not whole words of 4 lanes
    reason = vector_plan(rope, LANES)
    assert reason == "rope: half the head size (12 / 2) is not whole words of 4 lanes"
    assert vector_cycles(rope, LANES) is None
    assert not isinstance(vector_plan(rope, 2), str)  # 3 words of 2 lanes
    with pytest.raises(ModelError, match="^rope: "):
        vector_registers(rope, LANES)
    flat = "rope: the vector unit rotates (batch, seq, heads, dh) inputs, not a 2-d one"
    assert vector_plan(_rope((4, 8), 0), 1) == flat
    inner = VectorOp(kind="softmax", shape=(4, 6), axis=0, params=tuple(io.softmax_params(1.0, None).items()))
    assert vector_plan(inner, LANES) == "softmax: the vector unit reduces over the last axis, not axis 0"


@pytest.mark.parametrize("lanes", [0, True, 2048])
def test_bad_lanes(lanes):
    with pytest.raises(ConfigError, match="lanes"):
        VectorUnit(lanes=lanes, addr_bits=8)


def test_exported_verilog_in_icarus():
    """The unit exported to Verilog (what Yosys prices) in Icarus, on a padded average pool, a
    LayerNorm with a zero-variance row, a causal softmax, the i-GELU of every code and a RoPE
    with its table: bit-exact, and the model's cycles."""
    from pathlib import Path

    from accel_dse.simulate import find_simulator
    from tests.rtl_gen.vector_testlib import rope_table, run_vector_icarus

    iverilog = find_simulator("icarus").executable
    vvp = str(Path(iverilog).with_name("vvp")) if Path(iverilog).with_name("vvp").exists() else "vvp"
    rng = np.random.default_rng(11)
    x = _norm_rows(rng, 9)
    s = _scores(rng, 3, 7)
    codes = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    image = _int8(rng, (1, 5, 5, 3))
    pool = _pool("avgpool", image.shape, (3, 3), (2, 2), (1, 1))
    heads = _int8(rng, (1, 2, 2, 8))
    heads[0, 1, 0] = -128
    rope = _rope(heads.shape, 1)
    cases = [(pool, _pool_ref(pool, image), image, None),
             (_op("layernorm", x.shape, io.norm_params(9, 1e-5), axis=1), io.layernorm(x), x, None),
             (_op("softmax", s.shape, io.softmax_params(0.5, 1), axis=3), io.softmax(s, scale=0.5, causal_offset=1), s,
              None),
             (_op("gelu", codes.shape, io.GELU_PARAMS), io.gelu(codes), codes, None),
             (rope, io.rope(heads, start=1), heads, rope_table(rope, 2))]
    for op, ref, data, table in cases:
        got, cycles = run_vector_icarus(op, 2, data, table, iverilog, vvp)
        assert (got == np.asarray(ref)).all(), op.kind
        assert cycles == vector_cycles(op, 2), op.kind


def test_verilog_grows_linearly_with_lanes():
    """Each lane adds the same logic: the Verilog for 8 lanes adds about twice what 4 add over 2.
    A reduction written as one nested expression (each max step repeating its operand) doubled
    the text every lane or two, which put 81 MB of Verilog into a 16-lane design."""
    from amaranth.back import verilog

    size = {lanes: len(verilog.convert(VectorUnit(lanes=lanes, addr_bits=8), name="vu")) for lanes in (2, 4, 8)}
    assert size[8] - size[4] <= 1.25 * 2 * (size[4] - size[2]), size
