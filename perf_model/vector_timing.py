"""The vector unit's timing contract, and what it cannot run (the RTL meets it cycle for cycle).

A :class:`~workloads.vector_ops.VectorOp` runs on the unit as ``rows`` rows of ``words`` words
of ``lanes`` int8 lanes (:func:`vector_plan`): an element-wise op (``add``, ``mul``, ``relu``,
``relu6``, ``gelu``, ``silu``) as one row of all its elements, a normalisation or softmax as one
row per reduction (over the last axis; ``n`` elements, ``ceil(n / lanes)`` words). An element-wise
op too long for one row (``2**24`` elements) runs as a row per vector of its last axis; an op of
more rows than one run takes (``MAX_ROWS``) runs as several VECTOR commands, each a whole number
of a causal mask's query periods. Busy cycles of one run (``accel_spec.vector_isa`` has the
constants and the phases of each kind)::

    1 + rows * (passes * (words + PASS_TAIL) + sum of the row's scalar steps)

element-wise: one pass; layernorm/rmsnorm: three passes (sum and extremes, squares, output)
with ``MEAN`` and ``RSQRT`` between them; softmax: three passes (max, sum of exponentials,
output) with ``RECIP`` before the last; RoPE: one rotation phase of ``2 * words + PASS_TAIL + 1``
cycles (``accel_spec.vector_isa``'s docstring has its schedule), i.e.
``1 + rows * (2 * words + PASS_TAIL + 1)``: a row per (token, head) of ``dh / lanes`` words, its
table (``cos``, ``sin``: ``2 * words`` words per position, shared by the position's ``heads`` rows,
``qrows``) read again for each row. Pooling (``maxpool``, ``avgpool``, global or windowed)
runs as ``rows`` NHWC images of ``words = in_h * in_w * ceil(C / lanes)`` words each, its output
``out_h * out_w * ceil(C / lanes)`` words an image, in the window walk of
``accel_spec.vector_isa.pool_cycles``. A RoPE whose half head is not whole words of the lanes
stays host work: :func:`vector_plan` gives the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accel_spec.vector_isa import (
    PASS_TAIL,
    PHASES,
    POOL_KINDS,
    ROPE_TABLE_WORDS,
    SCALAR_CYCLES,
    UNIT_KINDS,
    PoolGeometry,
    param_error,
    pool_cycles,
    pool_from_registers,
    pool_geometry,
    transpose_cycles,
    unit_params,
)
from workloads.vector_ops import VectorOp

__all__ = ["VectorPlan", "vector_plan", "vector_cycles", "vector_run_cycles", "plan_cycles", "row_cycles", "MAX_WORDS",
           "MAX_ROWS", "NO_UNIT"]

#: Largest ``words`` of one run (the unit's 24-bit register; ``n`` is 24-bit too).
MAX_WORDS = (1 << 24) - 1
#: Largest ``rows`` of one run (the unit's 16-bit register).
MAX_ROWS = (1 << 16) - 1
#: Why a design without the unit runs no vector op.
NO_UNIT = "the design has no vector unit (vector_unit = false): host work"

_UNSUPPORTED: dict[str, str] = {}


@dataclass(frozen=True)
class VectorPlan:
    """How the unit runs one op: ``rows`` x ``words`` words of ``lanes`` lanes, ``n`` elements per
    row, ``operands`` words read per word (2 for a two-input add/mul/gated SiLU), ``qrows`` the
    query period of a causal mask (1 without one; a RoPE's rows per position); a pooling's ``pool``
    geometry (its rows are images of ``words`` words in and :attr:`out_words` out); ``table_words``:
    words of the second operand per ``qrows`` rows (a RoPE's table row; 0: its rows are the first's)."""

    kind: str
    lanes: int
    rows: int
    words: int
    n: int
    operands: int
    qrows: int
    pool: PoolGeometry | None = None
    run_rows: int = 0
    table_words: int = 0

    @property
    def runs(self) -> int:
        """VECTOR commands the op takes: one, or runs of ``run_rows`` rows (the last one the rest)."""
        return -(-self.rows // self.run_rows) if self.run_rows else 1

    def run_spans(self) -> list[tuple[int, int]]:
        """``(first row, rows)`` of each run."""
        step = self.run_rows or self.rows
        return [(r0, min(step, self.rows - r0)) for r0 in range(0, self.rows, step)]

    @property
    def out_words(self) -> int:
        """Words of one output row (a pooled image's, else ``words``)."""
        g = self.pool
        return self.words if g is None else g.out_h * g.out_w * g.words_c

    @property
    def passes(self) -> int:
        """Passes over each row (a RoPE's rotation phase is none)."""
        return sum(1 for phase in PHASES[self.kind] if phase == "P")

    @property
    def table_rows(self) -> int:
        """Rows of the second operand when it is a table (one per ``qrows`` rows), else 0."""
        return -(-self.rows // self.qrows) if self.table_words else 0


def vector_plan(op: VectorOp, lanes: int) -> VectorPlan | str:
    """The unit's plan for ``op`` on ``lanes`` lanes, or the reason it cannot run it (one line;
    ``lanes = 0``: the design has no unit, ``ArrayConfig.vector_lanes``)."""
    if lanes == 0:
        return f"{op.kind}: {NO_UNIT}"
    if op.kind == "transpose":
        return "transpose: a data-layout step the compiler places itself (perf_model.compiler.vector), not a " \
               "workload op"
    if op.kind not in UNIT_KINDS:
        return f"{op.kind}: {_UNSUPPORTED.get(op.kind, 'not a kind the vector unit runs')}"
    if op.bits != 8:
        return f"{op.kind}: the vector unit takes 8-bit codes, not {op.bits}-bit"
    if op.kind in POOL_KINDS:
        return _pool_plan(op, lanes)
    operands = 2 if op.kind in ("add", "mul", "rope") or (op.kind == "silu" and op.param("gated", 0)) else 1
    qrows, table_words = 1, 0
    if op.kind == "rope":
        if len(op.shape) != 4:
            return f"rope: the vector unit rotates (batch, seq, heads, dh) inputs, not a {len(op.shape)}-d one"
        n, qrows = op.shape[3], op.shape[2]
        if n % 2 or (n // 2) % lanes:
            return f"rope: half the head size ({n} / 2) is not whole words of {lanes} lanes"
        rows, table_words = op.elements // n, ROPE_TABLE_WORDS * (n // lanes)
    elif op.kind in ("layernorm", "rmsnorm", "softmax"):
        last = len(op.shape) - 1
        if op.axis != last:
            return f"{op.kind}: the vector unit reduces over the last axis, not axis {op.axis}"
        n = op.shape[last]
        rows = op.elements // n
        if op.kind == "softmax":
            if op.param("causal_offset", -1) >= 0:
                qrows = op.shape[-2] if len(op.shape) >= 2 else 1
    else:
        n, rows = op.elements, 1
        if (n >= 1 << 24 or math.ceil(n / lanes) > MAX_WORDS) and len(op.shape) >= 2:
            n = op.shape[-1]  # too long for one row: a row per vector of the last axis
            rows = op.elements // n
    try:
        error = param_error(op.kind, unit_params(op.kind, dict(op.params), n))
    except KeyError as missing:
        error = f"{op.kind}: the record has no parameter {missing}"
    if error:
        return error
    words = math.ceil(n / lanes)
    if words > MAX_WORDS or n >= 1 << 24:
        return (f"{op.kind}: a row of {n} elements ({words} words) exceeds the unit's {MAX_WORDS} words and "
                f"{(1 << 24) - 1} elements")
    run_rows = 0
    if rows > MAX_ROWS:  # several runs, each starting on a causal mask's first query (a RoPE's position)
        run_rows = MAX_ROWS - MAX_ROWS % qrows
        if run_rows < 1:
            return (f"{op.kind}: a period of {qrows} rows (mask queries or heads) exceeds the unit's {MAX_ROWS} "
                    "rows a run")
    return VectorPlan(op.kind, lanes, rows, words, n, operands, qrows, run_rows=run_rows, table_words=table_words)


def _pool_plan(op: VectorOp, lanes: int) -> VectorPlan | str:
    g = pool_geometry(op.kind, op.shape, dict(op.params), lanes)
    if isinstance(g, str):
        return g
    rows, words = op.shape[0], op.shape[1] * op.shape[2] * g.words_c
    if rows > MAX_ROWS or words > MAX_WORDS:
        return (f"{op.kind}: {rows} images of {words} words exceed the unit's {MAX_ROWS} rows and {MAX_WORDS} words "
                "per run")
    return VectorPlan(op.kind, lanes, rows, words, op.shape[3], 1, 1, g)


def row_cycles(kind: str, words: int) -> int:
    """Busy cycles of one row of ``words`` words of op ``kind`` (not a pooling): its phases of
    ``accel_spec.vector_isa.PHASES`` back to back (module docstring)."""
    phase = {"P": words + PASS_TAIL, "R": 2 * words + PASS_TAIL + 1}
    return sum(phase[p] if p in phase else SCALAR_CYCLES[p] for p in PHASES[kind])


def plan_cycles(plan: VectorPlan) -> int:
    """Busy cycles of ``plan`` (module docstring), summed over its runs."""
    if plan.pool is not None:
        return pool_cycles(plan.pool, plan.rows)
    return plan.runs + plan.rows * row_cycles(plan.kind, plan.words)


def vector_run_cycles(code: int, rows: int, words: int, params: tuple[int, ...] = (), *, n: int = 0,
                      lanes: int = 0) -> int:
    """Busy cycles of a ``VECTOR`` command of op code ``code`` (``accel_spec.vector_isa.VECTOR_CODES``)
    over ``rows`` rows of ``words`` words: the unit's contract, from the command's fields alone
    (and, for a pooling, its parameter registers ``params``: the window walk; for a transpose,
    its ``n`` elements a row and the unit's ``lanes``)."""
    kind = UNIT_KINDS[code - 1]
    if kind in POOL_KINDS:
        return pool_cycles(pool_from_registers(kind, params), rows)
    if kind == "transpose":
        if lanes < 1 or n < 1:
            raise ValueError(f"a transpose's cycles take its elements a row and the unit's lanes, not n={n}, "
                             f"lanes={lanes}")
        return transpose_cycles(rows, words, n, lanes)
    return 1 + rows * row_cycles(kind, words)


def vector_cycles(op: VectorOp, lanes: int) -> int | None:
    """Busy cycles of one run of ``op`` on ``lanes`` lanes, ``None`` if the unit cannot run it."""
    plan = vector_plan(op, lanes)
    return None if isinstance(plan, str) else plan_cycles(plan)
