"""The run classes of a tiled GEMM (internal to ``schedule``).

A tiling's runs fall into classes by their index along each loop position (first, middle ones,
last); :class:`RunClasses` holds their sizes, counts, cycles and transfer cycles, which
:mod:`perf_model.evaluator.sequencer_periods` sums into the program walk's total
(``perf_model.evaluator.schedule``'s module docstring states the rules).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from perf_model import timing
from perf_model.evaluator.problem import Problem
from perf_model.evaluator.tiling import ORDERS, Tiling
from perf_model.evaluator.transfers import Memory

__all__ = ["RunClasses", "ORDER_ARRAY", "ORDER_INVERSE", "row_beats"]


_MANTISSA = (1 << 52) - 1  # the mantissa bits of a float64


def row_beats(across: np.ndarray, lanes: np.ndarray, word_beats: np.ndarray) -> np.ndarray:
    """AXI beats of a DRAM row of ``across`` elements in words of ``lanes`` lanes, ``word_beats`` beats
    each: whole words, or, shorter than one word, its elements in a power of two of beats (a narrow transfer,
    ``perf_model.compiler.program.narrow_lanes``)."""
    need = np.maximum(np.ceil(across * word_beats / lanes), 1.0)
    # the power of two at or above a float64 of at least 1: a mantissa that is not 0 carries into the
    # exponent, then the mantissa is cleared (the same as exp2(ceil(log2(need))), without exp2 and log2)
    narrow = ((need.view(np.int64) + _MANTISSA) & ~_MANTISSA).view(np.float64)
    return np.where(across < lanes, np.minimum(narrow, word_beats), np.ceil(across / lanes) * word_beats)

ORDER_ARRAY = np.array(ORDERS, dtype=np.int64)  # (6, 3): mapped dim at each loop position
ORDER_INVERSE = np.argsort(ORDER_ARRAY, axis=1)  # (6, 3): loop position of each mapped dim
# A transfer's DRAM rows and words by the operand's free mapped dim (compiler's layout, _program):
# free r -> rows along s, words along c; free c -> rows s, words r; free s -> rows r, words c.
_ROWS_DIM = np.array([2, 2, 0])
_WORDS_DIM = np.array([1, 0, 1])
# Per loop order and position j: is the operand free at j laid out with its rows along the outer
# of the other two positions; are its words along r (R lanes, else C).
_ROWS_OUTER = np.array([[ORDER_INVERSE[o][_ROWS_DIM[ORDERS[o][j]]] == min(q for q in range(3) if q != j)
                         for j in range(3)] for o in range(len(ORDERS))])
_WORDS_ON_R = np.array([[_WORDS_DIM[ORDERS[o][j]] == 0 for j in range(3)] for o in range(len(ORDERS))])

class RunClasses:
    """Sizes, counts, cycles and transfer cycles of runs, per loop position (internal).

    Along loop position ``j`` (``n_j`` tiles of ``t_j``, the last of ``l_j``) a run's tile is full
    (key ``"T"``) or the last one (``"L"``); ``"N"`` is the tile after index 0 (the last when
    ``n_j = 2``). Category counts (runs of one instance along ``j``): ``A`` indices ``0 .. n-2``,
    ``E`` the last one; ``A0``/``Ap`` and ``E0``/``Ep`` the same split by index 0 or not; along a
    loop that advances: ``Z`` index 0 (``n >= 2``), ``M`` indices ``1 .. n-3``, ``P`` index ``n - 2``
    (``n >= 3``).
    """

    def __init__(self, p: Problem, t: np.ndarray, last: np.ndarray, n: np.ndarray, by_position: np.ndarray,
                 cyc8: np.ndarray | None, streamed: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None,
                 memory: Memory, tiling: Tiling, double_buffered: np.ndarray, compute: np.ndarray,
                 a_on_chip: np.ndarray | None = None) -> None:
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
        # Whether the operand free at each position is loaded at all: not the A an earlier op left
        # in the ifmap (on-chip reuse, perf_model.compiler.chain: it is read in place).
        self.loaded: list[bool | np.ndarray] = [True, True, True]
        if a_on_chip is not None and a_on_chip.any():
            operand = [np.where(dim[j][0], p.operand[0], np.where(dim[j][1], p.operand[1], p.operand[2]))
                       for j in range(3)]
            self.loaded = [~(a_on_chip & (operand[j] == 0)) for j in range(3)]
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
        self.bit = [np.left_shift(1, at[j]) for j in range(3)] if cyc8 is not None else []  # cyc8 row bits
        self.factor: dict[str, list[np.ndarray]] | None = None
        self.offset: dict[str, list[np.ndarray]] | None = None
        if streamed is not None and self.any_double:  # fast path: run_cycles is a product of one factor per
            # mapped dim plus the streamed dim's tail, ceil(r/R) ceil(c/C) fold(s) + tail(s) + RO: to loop positions
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
        next output tile carry it (double buffered: ``perf_model.compiler.program`` splits it into
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
        beats = row_beats(np.where(outer, zb, za), self.lanes[2], self.word_beats[2])
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
                    beats = row_beats(across, self.lanes[j], self.word_beats[j])
                    parts["stream"][k], parts["wait"][k] = self.memory.row_terms(beats, store)
                self._parts[(j, store)] = parts
            self._cache[key] = self.memory.chain(parts["rows"][rows_key], parts["groups"][rows_key],
                                                 parts["stream"][words_key], parts["wait"][words_key], store)
        return self._cache[key]
