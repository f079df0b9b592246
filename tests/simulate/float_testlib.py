"""The float formats' chained network computed by hand: the independent check of
``workloads.chained_references`` for bf16 and fp8_e5m2 (``test_sim_bf16`` and ``test_sim_e5m2``).

Each output element: every K fold summed by a scalar float32 loop from +0 in ascending ``k``, the
folds' sums added in order, the total scaled by ``2**-shift`` (exact: no float32 subnormal
arises on this data, checked), a ReLU (a negative value, -0 included, becomes +0) and the
format's own conversion (``code``). The operands' values come from ``value``, the format's own
decoder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import workloads


def network_by_hand(ops, folds: Sequence[tuple[int, ...]], seed: int, number_format: str,
                    value: Callable[[int], np.float32], code: Callable[[np.float32], int]) -> list[np.ndarray]:
    a = workloads.reference(ops[0], seed, number_format=number_format).a
    outs = []
    for i, op in enumerate(ops):
        b = workloads.reference(op, seed + i, number_format=number_format).b
        starts = (*folds[i], b.shape[0])
        rq = op.requant
        q = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
        for r in range(a.shape[0]):
            for c in range(b.shape[1]):
                total = None
                for first, end in zip(starts, starts[1:], strict=False):
                    part = np.float32(0.0)
                    for k in range(first, end):
                        part = np.float32(part + np.float32(value(a[r, k]) * value(b[k, c])))
                    total = part if total is None else np.float32(total + part)
                v = np.float32(np.float64(total) * 2.0 ** -rq.shift[0])
                assert v == 0 or abs(v) >= 2.0 ** -126  # the scaling was exact
                if rq.bounds[0] >= 0 and np.signbit(v):
                    v = np.float32(0.0)
                q[r, c] = code(v)
        outs.append(q)
        a = q
    return outs
