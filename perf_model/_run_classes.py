"""The run classes of a tiled GEMM and the sequencer's periods over them (internal to ``_schedule``).

A tiling's runs fall into classes by their index along each loop position (first, middle ones,
last); :class:`RunClasses` holds their sizes, counts, cycles and transfer cycles, and
:func:`rho_inner`, the single-buffered chain and :func:`any_order` sum the program walk's
periods over them into :class:`Totals` (``perf_model._schedule``'s module docstring states the
rules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product

import numpy as np

from accel_dse.commands import QUEUE_DEPTH
from perf_model import timing
from perf_model._problem import Problem
from perf_model._tiling import ORDERS, Tiling
from perf_model._transfers import Memory
from perf_model.program_timing import ISSUE_CYCLES

__all__ = ["RunClasses", "Totals", "rho_inner", "any_order", "ORDER_ARRAY", "ORDER_INVERSE", "Bool"]

Bool = bool | np.ndarray
ORDER_ARRAY = np.array(ORDERS, dtype=np.int64)  # (6, 3): mapped dim at each loop position
ORDER_INVERSE = np.argsort(ORDER_ARRAY, axis=1)  # (6, 3): loop position of each mapped dim
_FIRST, _MID, _LAST = 0, 1, 2  # run classes along one loop: first index, middle ones, last one
_CLASSES = (_FIRST, _MID, _LAST)
# Every run class of a 3-deep loop nest (class along positions 0, 1, 2), in product order.
_CLASS_TRIPLES: tuple[tuple[int, int, int], ...] = tuple((a, b, c) for a, b, c in product(_CLASSES, repeat=3))
# A transfer's DRAM rows and words by the operand's free mapped dim (compiler's layout, _program):
# free r -> rows along s, words along c; free c -> rows s, words r; free s -> rows r, words c.
_ROWS_DIM = np.array([2, 2, 0])
_WORDS_DIM = np.array([1, 0, 1])
# Per loop order and position j: is the operand free at j laid out with its rows along the outer
# of the other two positions; are its words along r (R lanes, else C).
_ROWS_OUTER = np.array([[ORDER_INVERSE[o][_ROWS_DIM[ORDERS[o][j]]] == min(q for q in range(3) if q != j)
                         for j in range(3)] for o in range(len(ORDERS))])
_WORDS_ON_R = np.array([[_WORDS_DIM[ORDERS[o][j]] == 0 for j in range(3)] for o in range(len(ORDERS))])
_ISSUE = float(ISSUE_CYCLES)  # cycles from an issue to the next decode


# Boolean helpers that fold Python constants away, so static parts of the class logic cost nothing.
def _or(*xs: Bool) -> Bool:
    arrays: list[Bool] = [x for x in xs if x is not False]
    if any(x is True for x in arrays):
        return True
    if not arrays:
        return False
    out = arrays[0]
    for x in arrays[1:]:
        out = out | x
    return out


def _and(*xs: Bool) -> Bool:
    arrays: list[Bool] = [x for x in xs if x is not True]
    if any(x is False for x in arrays):
        return False
    if not arrays:
        return True
    out = arrays[0]
    for x in arrays[1:]:
        out = out & x
    return out


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


class RunClasses:
    """Sizes, counts, cycles and transfer cycles of runs, per loop position (internal).

    Along loop position ``j`` (``n_j`` tiles of ``t_j``, the last of ``l_j``) a run's tile is full
    (key ``"T"``) or the last one (``"L"``); ``"N"`` is the tile after index 0 (the last when
    ``n_j = 2``). Category counts (runs of one instance along ``j``): ``A`` indices ``0 .. n-2``,
    ``E`` the last one; ``A0``/``Ap`` and ``E0``/``Ep`` the same split by index 0 or not; along a
    loop that advances: ``Z`` index 0 (``n >= 2``), ``M`` indices ``1 .. n-3``, ``P`` index ``n - 2``
    (``n >= 3``).
    """

    def __init__(self, p: Problem, t: np.ndarray, last: np.ndarray, n: np.ndarray, order: np.ndarray,
                 by_position: np.ndarray, cyc8: np.ndarray | None,
                 streamed: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None, memory: Memory,
                 tiling: Tiling, double_buffered: np.ndarray, compute: np.ndarray) -> None:
        self.resident = tiling.resident
        self.run_overhead = float(timing.RUN_OVERHEAD)
        self.n_elem = len(p)
        self.compute = compute
        self.runs = n[0] * n[1] * n[2]
        self.double_buffered = double_buffered
        self.any_double = bool(double_buffered.any())
        self.all_double = bool(double_buffered.all())
        self.single_buffered = ~double_buffered
        self.not_resident = ~tiling.resident
        # Per position, gathered row by row: (N,) arrays stay off the allocator's mmap path.
        tpos, lpos, npos = ([z.reshape(-1).take(by_position[j]) for j in range(3)] for z in (t, last, n))
        code = tiling.order
        at = [ORDER_ARRAY[:, j].take(code) for j in range(3)]  # mapped dim at position j, contiguous
        dim = [[at[j] == x for x in range(3)] for j in range(3)]  # mapped dim x at position j
        self.npos = npos
        self.many = [npos[j] > 1 for j in range(3)]
        self.two = [npos[j] == 2 for j in range(3)]
        self.size = [{"T": tpos[j], "L": lpos[j]} for j in range(3)]
        self._count: list[dict[str, np.ndarray | None]] = [
            {"A": npos[j] - 1, "E": None, "Ap": np.maximum(npos[j] - 2, 0.0), "Z": self.many[j].astype(np.float64),
             "M": np.maximum(npos[j] - 3, 0.0), "P": (npos[j] > 2).astype(np.float64), "1": None}
            for j in range(3)]
        for j in range(3):
            self._count[j]["A0"] = self._count[j]["Ep"] = self._count[j]["Z"]
        self.memory = memory
        self.rows_outer = [_ROWS_OUTER[:, j].take(code) for j in range(3)]
        self.lanes = [np.where(_WORDS_ON_R[:, j].take(code), p.R, p.C) for j in range(3)]
        wb = memory.word_beats
        self.word_beats = [np.where(dim[j][0], wb[0], np.where(dim[j][1], wb[1], wb[2])) for j in range(3)]
        self.cyc8 = cyc8
        self.bit = (1 << order).astype(np.int64)
        self.factor: dict[str, list[np.ndarray]] | None = None
        self.offset: dict[str, list[np.ndarray]] | None = None
        if streamed is not None and self.any_double:  # fast path: run_cycles is a product of one factor per mapped dim plus
            # the streamed dim's tail, ceil(r/R) ceil(c/C) fold(s) + tail(s) + RO: to loop positions
            fold_t, tail_t, fold_l, tail_l = streamed
            self.factor, self.offset = {}, {}
            gran = [np.where(dim[j][0], p.R, p.C) for j in range(3)]
            for key, fold, tail in (("T", fold_t, tail_t), ("L", fold_l, tail_l)):
                size = self.size_list(key)
                self.factor[key] = [np.where(dim[j][2], fold, np.ceil(size[j] / gran[j])) for j in range(3)]
                self.offset[key] = [np.where(dim[j][2], tail, 0.0) for j in range(3)]
                self.offset[key][0] += self.run_overhead - 1.0  # cycles() returns run_cycles - 1
        self._cache: dict[tuple[object, ...], np.ndarray] = {}
        self._parts: dict[tuple[int, bool], dict[str, dict[str, np.ndarray]]] = {}
        self._parts_cache: dict[tuple[str, ...], dict[str, np.ndarray]] = {}

    def size_list(self, key: str) -> list[np.ndarray]:
        """Tile sizes ``key`` (``"T"``, ``"L"``) along positions 0, 1, 2."""
        return [self.size[j][key] for j in range(3)]

    def prepare(self, transfers: tuple[tuple[int, tuple[str, str], bool], ...]) -> None:
        """Compute every run's cycles and the ``(position, keys, store)`` transfers, then drop what they
        were built from: fewer arrays alive at once (the allocator then reuses its heap). Run cycles only
        matter double buffered (single buffered every run is in series: ``compute`` holds them)."""
        if self.any_double:
            for keys in product("TL", repeat=3):
                self.cycles(keys)  # type: ignore[arg-type]
        self.factor = self.offset = None
        for index, (j, keys, store) in enumerate(transfers):
            self.transfer(j, keys, store)
            if index + 1 == len(transfers) or transfers[index + 1][0] != j:  # this operand is done
                del self._parts[(j, store)]
                for key in [k for k in self._cache if k[:2] == ("rows", j)]:
                    del self._cache[key]

    def store_parts(self, combo: tuple[str, str]) -> dict[str, np.ndarray]:
        """The store of the output tile with keys ``combo`` along positions 0 and 1, as the runs of the
        next output tile carry it (double buffered: ``perf_model._program`` splits it into
        ``P = n_2`` parts of consecutive DRAM rows, ``floor((k + 1) R / P) - floor(k R / P)`` rows
        after the next tile's ``k``-th run, or one row after each of its first ``R`` runs when
        ``R < P``; single buffered: whole, in the period of the next tile's first run).

        Returns ``n + 1`` of the part at index 0 (``"first"``), ``P - 2`` (``"pen"``), ``P - 1``
        (``"last"``), of a part of ``q + 1`` and of ``q`` rows (``"big"``, ``"small"``; 0 if ``q`` is 0),
        how many of the indices ``1 .. P - 3`` carry ``q + 1`` rows (``"mid_big"``) and the store
        commands (``"count"``, double buffered).
        """
        key = ("parts", *combo)
        if key in self._parts_cache:
            return self._parts_cache[key]
        mem, P = self.memory, self.npos[2]
        if not self.any_double or not self.many[2].any():  # whole stores: single buffered, or one part
            whole = self.transfer(2, combo, True)
            zero = np.zeros(self.n_elem)
            one_part = ~self.many[2] if self.any_double else False
            out = {"first": whole, "pen": zero, "last": np.where(one_part, whole, 0.0) if self.any_double else zero,
                   "big": zero, "small": zero, "mid_big": zero, "count": np.ones(self.n_elem)}
            if not self.any_double:
                out["last"] = np.where(P == 1, whole, 0.0)
            self._parts_cache[key] = out
            return out
        outer = self.rows_outer[2]
        za, zb = self.size[0][combo[0]], self.size[1][combo[1]]
        R = np.where(outer, za, zb)
        beats = np.ceil(np.where(outer, zb, za) / self.lanes[2]) * self.word_beats[2]
        stream, wait = mem.row_terms(beats, True)
        ge = R >= P
        q = np.where(ge, np.floor(R / P), 0.0)
        rem = R - q * P
        big = mem.chain(q + 1.0, mem.groups(q + 1.0), stream, wait, True)
        small = np.where(q > 0, mem.chain(q, mem.groups(q), stream, wait, True), 0.0)
        big_last = ge & (rem > 0)
        pen_rows = np.floor((P - 1) * R / P) - np.floor((P - 2) * R / P)
        big_pen = np.where(ge, pen_rows > q, R == P - 1)
        mid_big = np.where(ge, rem - big_last - big_pen * (P >= 3), np.clip(R - 1, 0.0, np.maximum(P - 3, 0.0)))
        out = {"first": np.where(ge, small, big), "pen": np.where(big_pen, big, small),
               "last": np.where(big_last, big, small), "big": big, "small": small, "mid_big": mid_big,
               "count": np.where(ge, P, R)}
        if not self.all_double:  # single buffered: the whole tile, at index 0 along position 2
            whole = self.transfer(2, combo, True)
            db = self.double_buffered
            out["first"] = np.where(db, out["first"], whole)
            out["last"] = np.where(db, out["last"], np.where(P == 1, whole, 0.0))
            for name in ("pen", "big", "small"):
                out[name] = np.where(db, out[name], 0.0)
            out["count"] = np.where(db, out["count"], 1.0)
        self._parts_cache[key] = out
        return out

    def count_of(self, j: int, category: str) -> np.ndarray | float:
        """Indices along position ``j`` in ``category`` (1 for the single-index ones)."""
        factor = self._count[j][category]
        return 1.0 if factor is None else factor

    def count(self, cats: tuple[str, str, str]) -> np.ndarray | float:
        """Runs of one instance in the class with categories ``cats`` along positions 0, 1, 2."""
        out: np.ndarray | float = 1.0
        for j in range(3):
            factor = self._count[j][cats[j]]
            if factor is not None:
                out = out * factor
        return out

    def cycles(self, keys: tuple[str, str, str]) -> np.ndarray:
        """``run_cycles - 1`` of a run with tile keys ``keys`` (its cost in the chain, ``run_cycles + 1``,
        less the 2 cycles of issue a double-buffered period starts with), and ``-inf`` for
        single-buffered elements: ``max(A - 2, S)`` is then ``S``, the transfers' own cycles, so one
        sum serves both settings (:class:`_Sums`)."""
        key = ("cyc", *keys)
        if key not in self._cache:
            if not self.any_double:  # every element single buffered
                self._cache[key] = np.full(self.n_elem, -np.inf)
            elif self.factor is not None and self.offset is not None:
                f, o = self.factor, self.offset  # o along position 0 holds RUN_OVERHEAD - 1
                cyc = f[keys[0]][0] * f[keys[1]][1]
                cyc *= f[keys[2]][2]
                cyc += o[keys[0]][0]
                cyc += o[keys[1]][1]
                cyc += o[keys[2]][2]
                if not self.all_double:
                    np.copyto(cyc, -np.inf, where=self.single_buffered)
                self._cache[key] = cyc
            else:
                idx = sum((self.bit[j] * (keys[j] == "L") for j in range(3)),
                          start=np.zeros(self.n_elem, dtype=np.int64))
                cyc = np.take_along_axis(self.cyc8, idx[None], axis=0)[0] - 1.0
                if not self.all_double:
                    np.copyto(cyc, -np.inf, where=self.single_buffered)
                self._cache[key] = cyc
        return self._cache[key]

    def transfer(self, j: int, keys: tuple[str, str], store: bool = False) -> np.ndarray:
        """``n + 1`` of the LOAD (or STORE) of the tile of the operand free at position ``j`` whose
        keys along the other two positions (in position order) are ``keys``."""
        key = ("st" if store else "ld", j, *keys)
        if key not in self._cache:
            a, b = (q for q in range(3) if q != j)
            if "N" in keys:  # the tile after index 0: the last one when there are two
                q = a if keys[0] == "N" else b
                last = (keys[0].replace("N", "L"), keys[1].replace("N", "L"))
                full = (keys[0].replace("N", "T"), keys[1].replace("N", "T"))
                two = self.two[q]
                self._cache[key] = (np.where(two, self.transfer(j, last, store), self.transfer(j, full, store))
                                    if two.any() else self.transfer(j, full, store))
                return self._cache[key]
            if keys[0] == keys[1]:
                self._cache[key] = self._by_rows(j, keys[0], keys[1], store)
            else:  # which of the two positions holds the DRAM rows is the element's loop order's
                self._cache[key] = np.where(self.rows_outer[j], self._by_rows(j, keys[0], keys[1], store),
                                            self._by_rows(j, keys[1], keys[0], store))
        return self._cache[key]

    def _by_rows(self, j: int, rows_key: str, words_key: str, store: bool) -> np.ndarray:
        """``n + 1`` of a transfer of the operand free at ``j`` with rows of tile ``rows_key`` along the
        position holding its DRAM rows, words of ``words_key`` along the other."""
        key = ("rows", j, rows_key, words_key, store)
        if key not in self._cache:
            parts = self._parts.get((j, store))
            if parts is None:
                a, b = (q for q in range(3) if q != j)
                outer = self.rows_outer[j]
                parts = {"rows": {}, "groups": {}, "stream": {}, "wait": {}}
                for k in ("T", "L"):
                    rows = np.where(outer, self.size[a][k], self.size[b][k])
                    across = np.where(outer, self.size[b][k], self.size[a][k])
                    parts["rows"][k], parts["groups"][k] = rows, self.memory.groups(rows)
                    beats = np.ceil(across / self.lanes[j]) * self.word_beats[j]
                    parts["stream"][k], parts["wait"][k] = self.memory.row_terms(beats, store)
                self._parts[(j, store)] = parts
            self._cache[key] = self.memory.chain(parts["rows"][rows_key], parts["groups"][rows_key],
                                                 parts["stream"][words_key], parts["wait"][words_key], store)
        return self._cache[key]


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
    while position 1 is at index 0. The one place the schedule decides what is loaded.
    """
    load0: Bool
    load1: Bool
    if moved in (-1, 2):
        load0, load1 = True, True
    elif moved == 1:
        load0, load1 = True, rc.many[2]
    else:
        load0, load1 = _or(rc.many[1], rc.many[2]), True
    return load0, _and(load1, _or(first1, rc.not_resident))


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
    inputs = (("T", "T"), ("T", "L"), ("L", "T"), ("L", "L"))
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
    pre = st(0, ("T", "T")) + st(1, ("T", "T")) + rc.memory.qparam_cycles
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
    total: np.ndarray | float = st(0, ("T", "T")) + st(1, ("T", "T"))  # the first run's loads
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
