# amaranth: UnusedElaboratable=no
"""The systolic array alone, driven through its x/y/shift ports, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from rtl_testlib import lanes_of, run_bench, word_of, wrap

from accel_spec.errors import ConfigError
from rtl_gen import Fault, SystolicArray

SHAPES = [(2, 2), (3, 5), (4, 4)]


def _operands(rng: np.random.Generator, shape_a: tuple[int, int], shape_b: tuple[int, int]):  # type: ignore[no-untyped-def]
    """Operand pairs: all -128 x all -128, all 127 x all -128, all 127 x all 127, two random
    pairs with -128 and 127 sprinkled at random positions."""
    out = []
    for va, vb in ((-128, -128), (127, -128), (127, 127)):
        out.append((np.full(shape_a, va, dtype=np.int64), np.full(shape_b, vb, dtype=np.int64)))
    for _ in range(2):
        a = rng.integers(-128, 128, shape_a)
        b = rng.integers(-128, 128, shape_b)
        for x in (a, b):
            mask = rng.random(x.shape)
            x[mask < 0.2] = -128
            x[mask > 0.8] = 127
        out.append((a, b))
    return out


def _ws_products(rows: int, cols: int, cases, dataflow: str = "ws", fault: Fault | None = None):  # type: ignore[no-untyped-def]
    """For each ``(A (M x rows), W (rows x cols))``: load W, stream A, return the results."""
    array = SystolicArray(rows=rows, cols=cols, dataflow=dataflow, input_bits=8, acc_bits=32, fault=fault)
    outputs: list[np.ndarray] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, w in cases:
            ctx.set(array.shift, 1)
            for r in range(rows - 1, -1, -1):
                ctx.set(array.y, word_of(w[r], 8))
                await ctx.tick()
            ctx.set(array.shift, 0)
            ctx.set(array.y, 0)
            got = []
            for t in range(len(a) + array.latency):
                ctx.set(array.x, word_of(a[t], 8) if t < len(a) else 0)
                if t >= array.latency:
                    got.append(lanes_of(ctx.get(array.result), cols, 32))
                await ctx.tick()
            outputs.append(np.array(got, dtype=np.int64))

    run_bench(array, bench)
    return outputs


@pytest.mark.parametrize("dataflow", ["ws", "is"])
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_ws_array_matches_numpy(rows: int, cols: int, dataflow: str) -> None:
    rng = np.random.default_rng(rows * 10 + cols)
    cases = _operands(rng, (6, rows), (rows, cols))
    for (a, w), got in zip(cases, _ws_products(rows, cols, cases, dataflow), strict=True):
        np.testing.assert_array_equal(got, wrap(a @ w, 32))


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_os_array_matches_numpy(rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows * 7 + cols)
    k = 5
    cases = _operands(rng, (rows, k), (k, cols))
    array = SystolicArray(rows=rows, cols=cols, dataflow="os", input_bits=8, acc_bits=32)
    outputs: list[np.ndarray] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, b in cases:
            # garbage before the fold: the first-operand marker must discard it
            for _ in range(3):
                ctx.set(array.x, int(rng.integers(0, 1 << (8 * rows))))
                ctx.set(array.y, int(rng.integers(0, 1 << (8 * cols))))
                await ctx.tick()
            for j in range(k):
                ctx.set(array.x, word_of(a[:, j], 8))
                ctx.set(array.y, word_of(b[j], 8))
                ctx.set(array.first, int(j == 0))
                await ctx.tick()
            ctx.set(array.first, 0)
            ctx.set(array.x, 0)
            ctx.set(array.y, 0)
            for _ in range(rows + cols - 2):  # the wavefront reaches the bottom-right PE
                await ctx.tick()
            ctx.set(array.shift, 1)
            got = {}
            for step in range(rows):
                await ctx.tick()
                got[rows - 1 - step] = lanes_of(ctx.get(array.result), cols, 32)
            ctx.set(array.shift, 0)
            outputs.append(np.array([got[r] for r in range(rows)], dtype=np.int64))

    run_bench(array, bench)
    for (a, b), got in zip(cases, outputs, strict=True):
        np.testing.assert_array_equal(got, wrap(a @ b, 32))


def test_faulty_array_differs_from_numpy_at_the_faulty_column() -> None:
    rows, cols = 3, 5
    a = np.full((4, rows), 2, dtype=np.int64)
    w = np.full((rows, cols), 3, dtype=np.int64)  # every product 6: bit 0 clear
    [got] = _ws_products(rows, cols, [(a, w)], fault=Fault(row=1, col=3, bit=0, stuck=1))
    want = wrap(a @ w, 32)
    want[:, 3] += 1
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "fault,field", [(Fault(row=3, col=0), "row"), (Fault(row=0, col=-1), "col"), (Fault(row=0, col=0, bit=16), "bit")]
)
def test_fault_outside_the_array_is_rejected(fault: Fault, field: str) -> None:
    with pytest.raises(ConfigError, match=f"fault {field}"):
        SystolicArray(rows=3, cols=3, fault=fault)
