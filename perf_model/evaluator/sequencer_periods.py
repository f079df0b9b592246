"""The sequencer's periods summed over the run classes of a tiled GEMM (internal to ``schedule``).

:func:`rho_inner` (every default tiling), its single-buffered form and :func:`any_order` sum the
program walk's command chain over the classes of :class:`~perf_model.evaluator.run_classes.RunClasses`
into :class:`Totals` (``perf_model.evaluator.schedule``'s module docstring states the rules).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product

import numpy as np

from accel_spec.isa import QUEUE_DEPTH
from perf_model.evaluator.run_classes import RunClasses
from perf_model.program_timing import ISSUE_CYCLES

__all__ = ["Totals", "rho_inner", "any_order", "Bool"]

Bool = bool | np.ndarray
_FIRST, _MID, _LAST = 0, 1, 2  # run classes along one loop: first index, middle ones, last one
_CLASSES = (_FIRST, _MID, _LAST)
# Every run class of a 3-deep loop nest (class along positions 0, 1, 2), in product order.
_CLASS_TRIPLES: tuple[tuple[int, int, int], ...] = tuple((a, b, c) for a, b, c in product(_CLASSES, repeat=3))
_ISSUE = float(ISSUE_CYCLES)  # cycles from an issue to the next decode


# Boolean helpers that fold Python constants away, so static parts of the class logic cost nothing.
def _fold(xs: tuple[Bool, ...], unit: bool, op: Callable[[Bool, Bool], Bool]) -> Bool:
    """``xs`` combined by ``op`` (``|`` with ``unit`` False, ``&`` with True): ``unit`` drops out,
    its negation absorbs."""
    arrays = [x for x in xs if x is not unit]
    if any(x is (not unit) for x in arrays):
        return not unit
    if not arrays:
        return unit
    out = arrays[0]
    for x in arrays[1:]:
        out = op(out, x)
    return out


def _or(*xs: Bool) -> Bool:
    return _fold(xs, False, operator.or_)


def _and(*xs: Bool) -> Bool:
    return _fold(xs, True, operator.and_)


def _not(x: Bool) -> Bool:
    return (not x) if isinstance(x, bool) else ~x


def _times(a: np.ndarray, flag: Bool) -> np.ndarray | float:
    if flag is True:
        return a
    if flag is False:
        return 0.0
    return a * flag


@dataclass
class Totals:
    """Per-instance sums over the run classes (cycles), without the program fetch.

    ``total``: the program's command chain, single or double buffered; ``transfers``:
    LOAD and STORE commands (without the output stage's parameters); ``period``: at least the
    most one double-buffered period can gain from being cut by a queue-load boundary
    (``min(cyc_i + 1, S_i)``, bounded by the full tiles' run and transfers).
    """

    total: np.ndarray
    transfers: np.ndarray
    period: np.ndarray

    def boundary(self, commands: np.ndarray) -> np.ndarray:
        """Bound on what the queue-load boundaries of ``commands`` commands add (double buffered).

        A boundary after the ``k``-th command of the period of run ``i`` ends the queue-load when
        the array and the DMA are idle and runs the period's remaining transfers (``S_a`` of its
        ``S_i = S_b + S_a``) after the next fetch: ``max(A, 2 + S_b) + S_a - max(A, 2 + S_i)``
        cycles more (``A = cyc_i + 1``), between 0 and ``min(A, S_i)``; the fetch itself is in
        ``Memory.program``.
        """
        return np.maximum(np.ceil(commands / QUEUE_DEPTH) - 1.0, 0.0) * np.maximum(self.period, 0.0)


class _Sums:
    """Accumulates ``count * max(A - 2, S)`` over run classes (``A = run_cycles + 1``, ``S`` the class's DMA
    commands): double buffered, the periods less their 2 cycles of issue; single buffered (where
    ``A - 2`` is ``-inf``, :meth:`RunClasses.cycles`), the transfers alone. With
    ``count_moves`` it also counts the DMA commands."""

    def __init__(self, rc: RunClasses, count_moves: bool) -> None:
        self.rc = rc
        self.count_moves = count_moves
        self.acc = np.zeros(rc.n_elem)
        self.transfers = np.zeros(rc.n_elem)
        self._s = np.empty(rc.n_elem)  # scratch: the class's S, then count * max(A - 2, S)
        self._t = np.empty(rc.n_elem)

    def add(self, count: np.ndarray | float, keys: tuple[str, str, str], dma: list[tuple[np.ndarray, Bool]]) -> None:
        """One class: ``count`` runs of tile keys ``keys`` with DMA commands ``(cycles, present)``."""
        if not isinstance(count, float) and not count.any():  # no element has runs of this class
            return
        s, t, rc = self._s, self._t, self.rc
        moves: np.ndarray | float = 0.0
        empty = True
        for cycles, present in dma:  # s = sum of the commands present (in place: no allocations)
            if present is False:
                continue
            if present is True:
                np.add(s, cycles, out=s) if not empty else np.copyto(s, cycles)
            else:
                np.multiply(cycles, present, out=t)
                np.add(s, t, out=s) if not empty else np.copyto(s, t)
            empty = False
            moves = moves + (1.0 if present is True else present)
        if empty:  # a run without transfers: its cycles, double buffered (nothing single buffered)
            if rc.any_double:
                np.maximum(rc.cycles(keys), 0.0, out=s)
                s *= count
                self.acc += s
            return
        if self.count_moves:
            self.transfers += count * moves
        if rc.any_double:
            np.maximum(rc.cycles(keys), s, out=s)
        s *= count
        self.acc += s

    def totals(self, pre: np.ndarray, post: np.ndarray, period: np.ndarray, moves: np.ndarray | float) -> Totals:
        """The instance's chain: ``pre`` and ``post`` (exposed commands) around the classes; single
        buffered every run adds ``run_cycles + 1``, double buffered each period its 2 cycles of issue."""
        rc = self.rc
        runs = np.where(rc.double_buffered, _ISSUE * rc.runs, rc.compute + rc.runs)
        return Totals(self.acc + runs + pre + post, self.transfers + moves, period)


def _inner_loads(rc: RunClasses, moved: int, first1: Bool) -> tuple[Bool, Bool]:
    """Whether a run loads the inputs free at positions 0 and 1, reduction loop innermost.

    ``moved``: the loop position that advanced into the run (-1 for the op's first run; the
    loops inside it wrapped to index 0); ``first1``: the run's position-1 index is 0. Input 0
    spans positions 1 and 2, input 1 positions 0 and 2: a tile reloads when an index it spans
    changed; a resident strip (``Tiling.resident``: input 1 held whole along position 2) only
    while position 1 is at index 0; an ``A`` an earlier op left in the ifmap
    (``RunClasses.loaded``, on-chip reuse) never. The one place the schedule decides what is loaded.
    """
    load0: Bool
    load1: Bool
    if moved in (-1, 2):
        load0, load1 = True, True
    elif moved == 1:
        load0, load1 = True, rc.many[2]
    else:
        load0, load1 = _or(rc.many[1], rc.many[2]), True
    return _and(load0, rc.loaded[0]), _and(load1, _or(first1, rc.not_resident), rc.loaded[1])


def _load_commands(rc: RunClasses) -> np.ndarray | float:
    """LOAD commands of an instance, reduction loop innermost: the runs by the loop that advanced
    into them (and how many at index 0 along position 1), each with the one load rule's flags."""
    n0, n1, n2 = rc.npos
    loads: np.ndarray | float = 0.0
    for runs, moved, first1 in ((1.0, -1, True), (n0 * (n2 - 1), 2, True), (n0 * (n1 - 1) * (n2 - 1), 2, False),
                                (n0 * (n1 - 1), 1, False), (n0 - 1, 0, True)):
        for flag in _inner_loads(rc, moved, first1):
            if flag is not False:
                loads = loads + runs * (1.0 if flag is True else flag)
    return loads


def rho_inner(rc: RunClasses) -> Totals:
    """The program's chain when the reduction loop is innermost (every default tiling).

    Positions 0 and 1 hold the inputs' free dims, position 2 the output's (the reduction dim).
    Runs are grouped by which loop advances after them (2; 1 with 2 at its last index; 0; none:
    the op's last run), which fixes the next run's loads and tile sizes; by their index along
    position 2, which fixes the part of the previous output tile's store in their period
    (:meth:`RunClasses.store_parts`); and by whether they belong to the first output tile
    (no store), to one at index 0 along position 1 (the previous tile is the last along 1 of
    the previous index along 0) or to another (the previous tile is the one before along 1).
    """
    inputs: tuple[tuple[str, str], ...] = (("T", "T"), ("T", "L"), ("L", "T"), ("L", "L"))
    if rc.any_double:  # the loads of the tile after index 0 (single buffered they are summed by size)
        inputs += (("T", "N"), ("L", "N"), ("N", "T"))
    rc.prepare(tuple((j, keys, False) for j in (0, 1) for keys in inputs)
               + tuple((2, keys, True) for keys in (("T", "T"), ("T", "L"), ("L", "T"), ("L", "L"))))
    if not rc.any_double:
        return _rho_inner_single(rc)
    sums = _Sums(rc, False)
    st = rc.transfer
    parts = {combo: rc.store_parts(combo) for combo in (("T", "L"), ("T", "T"), ("L", "T"))}

    def period(count: np.ndarray | float, own: tuple[str, str, str], store: tuple[Bool, np.ndarray | None],
               moved: int, first1: Bool, next0: tuple[str, str], next1: tuple[str, str]) -> None:
        dma: list[tuple[np.ndarray, Bool]] = []
        if store[0] is not False and store[1] is not None:
            dma.append((store[1], store[0]))
        if moved >= 0:
            load0, load1 = _inner_loads(rc, moved, first1)
            dma += [(st(0, next0), load0), (st(1, next1), load1)]
        sums.add(count, own, dma)

    def tiles(c2: str, k2: str, part: str, moved: int, own2: str, nxt: Callable[[str, str], tuple[tuple[str, str],
                                                                                                  tuple[str, str]]],
              c1s: tuple[tuple[str, str, str], ...]) -> None:
        """The runs at position-2 category ``c2`` (own tile key ``own2``), carrying store part ``part``,
        over every output tile; ``c1s``: position-1 categories ``(category, key, next key)``."""
        for c1, k1, nk1 in c1s:
            zero1 = c1 in ("1", "Z")  # index 0 along position 1
            pos0: tuple[tuple[str, str, tuple[str, str] | None], ...] = (
                (("1", "T", None), ("Ap", "T", ("T", "L")), ("Ep", "L", ("T", "L"))) if zero1 else
                (("A", "T", ("T", "T")), ("E", "L", ("L", "T"))))  # the previous tile: (i0, i1 - 1)
            for c0, k0, combo in pos0:
                cats = (c0, c1, c2)
                if combo is None:  # the first output tile: nothing to store
                    count, cycles = rc.count(cats if c2 not in ("Mb", "Ms") else (c0, c1, "M")), None
                    if c2 == "Ms":
                        continue
                else:
                    pp = parts[combo]
                    count, cycles = rc.count(cats if c2 not in ("Mb", "Ms") else (c0, c1, "1")), pp[part]
                    if c2 == "Mb":
                        count = count * pp["mid_big"]
                    elif c2 == "Ms":
                        count = count * (rc.count(("1", "1", "M")) - pp["mid_big"])
                next0, next1 = nxt(k0, nk1 if moved == 1 else k1)
                # The loading run is at index 0 along position 1 only if position 2 advanced into it.
                period(count, (k0, k1, own2), (True, cycles), moved, zero1 and moved == 2, next0, next1)

    inner1 = (("1", "T", ""), ("Ap", "T", ""), ("Ep", "L", ""))
    # Position 2 advances after the run (index i2 <= n2 - 2): the next run's tile along 2 is "N"
    # after index 0, full after 1 .. n2 - 3, the last after n2 - 2; store parts by index.
    for c2, k2n, part in (("Z", "N", "first"), ("Mb", "T", "big"), ("Ms", "T", "small"), ("P", "L", "pen")):
        def along2(k0: str, k1: str, k2n: str = k2n) -> tuple[tuple[str, str], tuple[str, str]]:
            return (k1, k2n), (k0, k2n)

        tiles(c2, k2n, part, 2, "T", along2, inner1)

    # Position 1 advances (last index along 2).
    def along1(k0: str, nk1: str) -> tuple[tuple[str, str], tuple[str, str]]:
        return (nk1, "T"), (k0, "T")

    tiles("1", "L", "last", 1, "L", along1, (("Z", "T", "N"), ("M", "T", "T"), ("P", "T", "L")))
    # Position 0 advances (last index along 1 and 2); the previous output tile is full along 0 and 1.
    last = parts[("T", "T")]["last"]
    for c0, k0, stored in (("Z", "N", rc.many[1]), ("M", "T", True), ("P", "L", True)):
        period(rc.count((c0, "1", "1")), ("T", "L", "L"), (stored, last), 0, True, ("T", "T"), (k0, "T"))
    # The op's last run: the last part of the previous output tile, then its own store, whole.
    previous = np.where(rc.many[1], parts[("L", "T")]["last"], last)
    sums.add(1.0, ("L", "L", "L"), [(previous, _or(rc.many[0], rc.many[1]))])
    pre = _times(st(0, ("T", "T")), rc.loaded[0]) + _times(st(1, ("T", "T")), rc.loaded[1]) + rc.memory.qparam_cycles
    post = st(2, ("L", "L"), True)
    # A period's DMA commands are at most the full tiles' (transfer cycles grow with tile sizes).
    period_bound = np.minimum(rc.cycles(("T", "T", "T")) + _ISSUE,  # -inf single buffered: no bound needed
                              st(0, ("T", "T")) + st(1, ("T", "T")) + st(2, ("T", "T"), True))
    # STOREs: one per output tile, or its parts.
    n0, n1, n2 = rc.npos
    loads = _load_commands(rc)
    stores = ((n0 - 1) * (n1 - 1) * parts[("T", "T")]["count"] + (n0 - 1) * parts[("T", "L")]["count"]
              + (n1 - 1) * parts[("L", "T")]["count"] + 1.0)
    return sums.totals(pre, post, period_bound, loads + stores)


def _rho_inner_single(rc: RunClasses) -> Totals:
    """:func:`rho_inner` when no element is double buffered: the chain is every command in series,
    so its sum is linear: each transfer's cycles times how many runs load (store) a tile of its
    sizes, by the loop that advanced into the run (the flags of :func:`_inner_loads`)."""
    n0, n1, n2 = rc.npos
    st = rc.transfer
    # Indices of each tile key: along j all of them ("T" n - 1, "L" 1), or from index 1 on.
    Range = tuple[np.ndarray | float, np.ndarray | float]
    later: list[Range] = [(rc.count_of(j, "Ap"), rc.count_of(j, "Ep")) for j in range(3)]

    def over(j: int, pa: Range, pb: Range) -> np.ndarray:
        """Sum of the transfer of the input free at ``j`` over index ranges ``pa``, ``pb`` (how many
        full and last tiles) along its two positions."""
        out: np.ndarray | float = 0.0
        for ka, ca in (("T", pa[0]), ("L", pa[1])):
            for kb, cb in (("T", pb[0]), ("L", pb[1])):
                if not (isinstance(ca, float) and ca == 0.0 or isinstance(cb, float) and cb == 0.0):
                    out = out + ca * cb * st(j, (ka, kb))
        return np.asarray(out)

    all0: Range = (n0 - 1, 1.0)
    later1, later2 = later[1], later[2]
    once: Range = (1.0, 0.0)  # index 0 alone (a full tile, or the only one)
    total: np.ndarray | float = (_times(st(0, ("T", "T")), rc.loaded[0])  # the first run's loads
                                 + _times(st(1, ("T", "T")), rc.loaded[1]))
    for moved, first1, range0, range1, range2 in (
            (2, True, all0, once, later2), (2, False, all0, later1, later2), (1, False, all0, later1, once),
            (0, True, later[0], once, once)):
        load0, load1 = _inner_loads(rc, moved, first1)
        if load0 is not False:
            runs0 = range0[0] + range0[1]  # input 0 does not span position 0
            total = total + _times(runs0 * over(0, range1, range2), load0)
        if load1 is not False:
            runs1 = range1[0] + range1[1]  # input 1 does not span position 1
            total = total + _times(runs1 * over(1, range0, range2), load1)
    stores = ((n0 - 1) * (n1 - 1) * st(2, ("T", "T"), True) + (n0 - 1) * st(2, ("T", "L"), True)
              + (n1 - 1) * st(2, ("L", "T"), True) + st(2, ("L", "L"), True))
    loads = _load_commands(rc)
    chain = rc.compute + rc.runs + total + stores + rc.memory.qparam_cycles
    return Totals(np.asarray(chain), np.asarray(loads + n0 * n1), np.zeros(rc.n_elem))


def any_order(rc: RunClasses, is_out: np.ndarray) -> Totals:
    """The chain for any loop order, spilling tilings included (the RTL runs none of these).

    Each run's own loads (inputs that changed, partial sums read back) and its output's store
    (when the next run has another output tile) go in its period; the op's first loads and last
    store are exposed, as in the ping-pong the compiler builds for the reduction-innermost order.
    """
    many = rc.many
    outp = [is_out[0], is_out[1], is_out[2]]
    sums = _Sums(rc, True)
    cat = {_FIRST: ("1", "T"), _MID: ("Ap", "T"), _LAST: ("Ep", "L")}  # (count, tile key) by class
    first_load: np.ndarray | float = 0.0
    last_store: np.ndarray | float = 0.0
    exposed_moves: np.ndarray | float = 0.0
    for cats in _CLASS_TRIPLES:
        is_last = [_not(many[j]) if cats[j] == _FIRST else cats[j] == _LAST for j in range(3)]
        is_first = all(c == _FIRST for c in cats)
        level = max((j for j in range(3) if cats[j] != _FIRST), default=-1)
        changed: list[Bool] = [
            True if is_first else (j == level or (j > level and many[j])) if j >= level else False
            for j in range(3)
        ]
        nxt = [_not(is_last[j]) for j in range(3)]
        next_changed: list[Bool] = [
            _and(_not(nxt[1]), _not(nxt[2]), nxt[0]),
            _or(_and(_not(nxt[2]), nxt[1]), _and(_not(nxt[2]), _not(nxt[1]), nxt[0], many[1])),
            _or(nxt[2], _and(_or(nxt[1], nxt[0]), many[2])),
        ]
        is_final = _and(*is_last)
        keys = tuple(cat[c][1] for c in cats)
        dma: list[tuple[np.ndarray, Bool]] = []
        for j in range(3):
            others = [q for q in range(3) if q != j]
            own = (keys[others[0]], keys[others[1]])
            loaded = _or(*(changed[q] for q in others))
            if cats[j] == _FIRST:  # reduction index 0 if the output is free here: nothing to read back
                loaded = _and(loaded, _not(outp[j]))
            stored = _and(outp[j], _or(is_final, *(next_changed[q] for q in others)))
            if is_first:
                first_load = first_load + _times(rc.transfer(j, own), loaded)
                exposed_moves = exposed_moves + _times(np.ones(rc.n_elem), loaded)
            else:
                dma.append((rc.transfer(j, own), loaded))
            final_store = _and(stored, is_final)
            dma.append((rc.transfer(j, own, True), _and(stored, _not(is_final))))
            if final_store is not False:
                last_store = last_store + _times(rc.transfer(j, own, True), final_store)
                exposed_moves = exposed_moves + _times(np.ones(rc.n_elem), final_store)
        sums.add(rc.count(tuple(cat[c][0] for c in cats)), keys, dma)  # type: ignore[arg-type]
    pre = first_load + rc.memory.qparam_cycles
    full = [rc.transfer(j, ("T", "T")) + rc.transfer(j, ("T", "T"), True) for j in range(3)]
    period = np.minimum(rc.cycles(("T", "T", "T")) + _ISSUE, full[0] + full[1] + full[2])  # -inf: single
    return sums.totals(np.asarray(pre), np.asarray(last_store), period, exposed_moves)
