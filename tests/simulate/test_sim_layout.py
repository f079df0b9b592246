"""Buffer word layouts against rtl_gen's port-map table, written out element by element."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accel_dse.simulate.host.layout import ofmap_words, pack_inputs, unpack_output
from accel_spec.config import ArrayConfig


def config(df: str, rows: int = 3, cols: int = 5, bits: int = 8, acc: int = 32) -> ArrayConfig:
    return ArrayConfig(rows=rows, cols=cols, dataflow=df, input_bits=bits, acc_bits=acc)


def lanes_of(words: np.ndarray, lanes: int, bits: int) -> np.ndarray:
    """Decode packed words lane by lane with Python integers (independent of the code under test)."""
    out = np.zeros((len(words), lanes), dtype=np.int64)
    for i, row in enumerate(words):
        value = int.from_bytes(row.tobytes(), "little")
        for lane in range(lanes):
            v = (value >> (lane * bits)) & ((1 << bits) - 1)
            out[i, lane] = v - (1 << bits) if v >> (bits - 1) else v
    return out


def expected_words(df: str, a: np.ndarray, b: np.ndarray, r: int, c: int) -> tuple[dict, dict]:
    """``{address: {lane: value}}`` for ifmap and weight, straight from the rtl_gen table."""
    m, k = a.shape
    n = b.shape[1]
    ifmap: dict[int, dict[int, int]] = {}
    weight: dict[int, dict[int, int]] = {}
    for mi in range(m):
        for ki in range(k):
            if df == "ws":
                ifmap.setdefault((ki // r) * m + mi, {})[ki % r] = a[mi, ki]
            elif df == "os":
                ifmap.setdefault((mi // r) * k + ki, {})[mi % r] = a[mi, ki]
            else:
                ifmap.setdefault((mi // c) * k + ki, {})[mi % c] = a[mi, ki]
    for ki in range(k):
        for ni in range(n):
            if df in ("ws", "os"):
                weight.setdefault((ni // c) * k + ki, {})[ni % c] = b[ki, ni]
            else:
                weight.setdefault((ki // r) * n + ni, {})[ki % r] = b[ki, ni]
    return ifmap, weight


@pytest.mark.parametrize("df", ["ws", "os", "is"])
@pytest.mark.parametrize("bits", [8, 16])
def test_input_words_follow_the_port_map(df, bits):
    r, c = 3, 5
    rng = np.random.default_rng(7)
    m, k, n = 7, 8, 11  # edge folds in every dimension
    dtype = np.int8 if bits == 8 else np.int16
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a = rng.integers(lo, hi, size=(m, k), endpoint=True).astype(dtype)
    b = rng.integers(lo, hi, size=(k, n), endpoint=True).astype(dtype)
    a[0, 0], b[-1, -1] = lo, hi
    cfg = config(df, r, c, bits)
    if_words, w_words = pack_inputs(cfg, a, b)
    if_lanes, w_lanes = (c, r) if df == "is" else (r, c)
    want_if, want_w = expected_words(df, a, b, r, c)
    # word counts of perf_model.timing.run_words, written out
    counts = {"ws": (m * -(-k // r), k * -(-n // c)), "os": (k * -(-m // r), k * -(-n // c)),
              "is": (k * -(-m // c), n * -(-k // r))}[df]
    assert (len(if_words), len(w_words)) == counts
    for words, lanes, want in ((if_words, if_lanes, want_if), (w_words, w_lanes, want_w)):
        got = lanes_of(words, lanes, bits)
        for address, lane_values in want.items():
            for lane, value in lane_values.items():
                assert got[address, lane] == value, (address, lane)
        padded = [(i, j) for i in range(len(got)) for j in range(lanes) if j not in want.get(i, {})]
        assert padded and all(got[i, j] == 0 for i, j in padded)  # edge folds leave lanes to pad


@pytest.mark.parametrize("df", ["ws", "os", "is"])
@pytest.mark.parametrize("acc", [32, 20, 64])
def test_output_words_are_read_back_per_the_port_map(df, acc):
    r, c = 3, 5
    m, n = 7, 11
    cfg = config(df, r, c, 8, acc)
    rng = np.random.default_rng(3)
    lo, hi = -(1 << (acc - 1)), (1 << (acc - 1)) - 1
    want = rng.integers(lo, hi, size=(m, n), endpoint=True, dtype=np.int64)
    want[0, 0], want[-1, -1] = lo, hi
    words = {}
    for mi in range(m):
        for ni in range(n):
            if df == "is":
                address, lane = (mi // c) * n + ni, mi % c
            else:
                address, lane = (ni // c) * m + mi, ni % c
            words[address] = words.get(address, 0) | ((int(want[mi, ni]) & ((1 << acc) - 1)) << (lane * acc))
    count = ofmap_words(cfg, m, n)
    assert count == (n * -(-m // c) if df == "is" else m * -(-n // c))
    size = (c * acc + 7) // 8
    garbage = (1 << (c * acc)) - 1  # pad lanes are unspecified: fill them with ones
    raw = np.zeros((count, size), dtype=np.uint8)
    for address in range(count):
        value = words.get(address, 0)
        used = 0
        for lane in range(c):
            if df == "is":
                idx = (address // n) * c + lane
            else:
                idx = (address // m) * c + lane
            limit = m if df == "is" else n
            if idx < limit:
                used |= ((1 << acc) - 1) << (lane * acc)
        value |= garbage & ~used
        raw[address] = np.frombuffer(value.to_bytes(size, "little"), dtype=np.uint8)
    got = unpack_output(cfg, raw, m, n)
    np.testing.assert_array_equal(got, want)


def test_ofmap_words_match_perf_model_run_words():
    from perf_model import timing

    for df in ("ws", "os", "is"):
        cfg = dataclasses.replace(config(df), rows=4, cols=3)
        for m, k, n in ((1, 1, 1), (5, 9, 7), (12, 3, 6)):
            code = timing.dataflow_code(df)
            words = timing.run_words(code, cfg.rows, cfg.cols, m, k, n)
            a = np.zeros((m, k), np.int8)
            b = np.zeros((k, n), np.int8)
            if_words, w_words = pack_inputs(cfg, a, b)
            assert (len(if_words), len(w_words), ofmap_words(cfg, m, n)) == tuple(int(x) for x in words)
