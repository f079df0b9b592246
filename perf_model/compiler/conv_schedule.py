"""The cycles and bytes of a conv tiling without its program: the schedule counted by runs.

``compile_conv`` emits a conv's program and ``program_timing.gemm_program_cycles`` walks it, a
command and a DMA burst at a time; that is the exact reference (the RTL's counters), but a sweep
cannot pay it for every design. :func:`conv_schedule` computes the same walk's ``total`` and
``compute``, the program's transfer bytes, folds and SRAM bytes from arrays over the runs of the
tiling (``_Geometry.tiles`` order), with the rules of ``perf_model.evaluator.schedule``:

* every transfer's cycles ``n`` (``dma_timing``), once per distinct transfer: the closed form of
  ``perf_model.evaluator.transfers`` when each DRAM row lies in one 4 KiB page and one burst, else
  the burst recurrence itself;
* single buffered: ``total = fetch + 4 + sum over transfers and RUNs of (n + 1)`` (a ``WINDOW``
  issues while the command before it still runs, so it adds nothing);
* double buffered: ``RUN(0)`` after the fetch and the first loads; ``RUN(i + 1)`` ``max(cyc_i + 1,
  2 + S_i)`` after ``RUN(i)``, ``S_i`` the ``n + 1`` of the DMA commands between them (run ``i``'s
  part of the previous output tile's store, the loads of run ``i + 1``); the last output tile's
  store after the last run.

A program longer than the command queue runs as queue-loads, each walked from idle units with its
own fetch, and a ``WINDOW`` opens each queue-load's first run; such a program is timed by a
walk over its commands' precomputed cycles (no transfer is split into bursts twice).

Exact against the walk for a design whose DRAM keeps up with its bus (``dram_rate`` ``None``);
a paced DRAM (a credit shared by the transfers of a queue-load) returns ``None``: the caller
walks the program (tests/perf_model/test_model_conv_schedule.py holds both).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from accel_spec.isa import QUEUE_DEPTH, store_read_latency
from perf_model import dma_timing, timing
from perf_model.compiler.conv_geometry import ConvTiling, _Geometry, weight_tiles_held
from perf_model.compiler.conv_queue_loads import fetch_cycles, walk_double, walk_single
from perf_model.compiler.conv_shapes import row_tiles, tap_tiles
from perf_model.compiler.program import PAGE, _align
from perf_model.program_timing import (
    DEFAULT_DRAM_LATENCY,
    FETCH_DECODE_CYCLES,
    OUTSTANDING,
    axi_data_bytes,
    dram_rate,
    word_beats,
)
from workloads.ops import Conv2d

__all__ = ["ConvSchedule", "RunArrays", "conv_schedule", "streams", "transfer_tuples", "unstalled"]

_L, _D = DEFAULT_DRAM_LATENCY, OUTSTANDING


class ConvSchedule:
    """The figures of a conv tiling (one program, all the conv's images), as the walk and the program give them.

    ``total``/``compute``: the walk's counters; ``read``: DRAM bytes ``(bands, weights)``;
    ``written``: output bytes; ``folds``, ``sram_read``/``sram_write`` (per operand A, B, C) and
    ``tile`` (the first run's ``(m, k, n)``) by the rules of ``conv_score``.
    """

    def __init__(self, total: int, compute: int, read: tuple[int, int], written: int, folds: int,
                 sram_read: tuple[float, float, float], sram_write: tuple[float, float, float],
                 tile: tuple[int, int, int]) -> None:
        self.total, self.compute, self.read, self.written = total, compute, read, written
        self.folds, self.sram_read, self.sram_write, self.tile = folds, sram_read, sram_write, tile


#: Cycles ``n`` of transfers by ``(kind, offset in page, stride, rows, words, beats a word, bus
#: bytes)``: what ``n`` depends on (designs of a sweep on one bus width share them).
_MEMO: dict[tuple[str, int, int, int, int, int, int], int] = {}
_MEMO_SIZE = 1 << 17


class _Transfers:
    """Cycles ``n`` of transfers on one design, kept per distinct ``(kind, offset in page, stride,
    rows, words, beats a word)`` and bus width (:data:`_MEMO`)."""

    def __init__(self, config: object) -> None:
        self.W = axi_data_bytes(config)  # type: ignore[arg-type]
        self.beats = word_beats(config)  # type: ignore[arg-type]
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        self.memo = _MEMO

    def cycles(self, kind: str, addr: int, stride: int, rows: int, words: int, per_word: int = 0) -> int:
        """``n`` of a transfer of words of ``per_word`` beats (0: the kind's whole words)."""
        per_word = self.word_beats(kind, per_word)
        key = (kind, addr % PAGE, stride % PAGE if stride % PAGE else PAGE, rows, words, per_word, self.W)
        n = self.memo.get(key)
        if n is None:
            n = self.memo[key] = self._cycles(kind, key[1], stride, rows, words, per_word)
        return n

    def word_beats(self, kind: str, per_word: int = 0) -> int:
        """Beats a word of a transfer of ``kind`` takes: ``per_word``, or 0 for the kind's whole words."""
        return per_word or self.beats["ofmap" if kind == "store" else "requant" if kind == "store_q" else kind]

    def _cycles(self, kind: str, addr: int, stride: int, rows: int, words: int, per_word: int) -> int:
        b = words * per_word
        store = kind.startswith("store")
        lat = store_read_latency(kind == "store_q")
        row_bytes = b * self.W
        if b <= dma_timing.MAX_BURST and (_in_pages(addr, stride, rows, row_bytes)
                                          or (row_bytes <= PAGE and bool(unstalled(rows, b, store)))):
            return int(closed_form(rows, b, store, lat))
        lens = list(dma_timing.bursts(addr, stride, rows, b, self.W))
        if streams(lens, store):  # back to back all the same: the closed form's beats, no stall
            return (lat + _L + 3 if store else _L + 2) + rows * b
        if store:
            return dma_timing.store_cycles(lens, rows * words, per_word, _L, _D, lat)
        return dma_timing.load_cycles(lens, _L, _D)


    def many(self, kind: str, addr: np.ndarray, stride: int, rows: np.ndarray, words: np.ndarray,
             per_word: np.ndarray) -> np.ndarray:
        """:meth:`cycles` of transfers given as arrays (one ``stride``; words of ``per_word`` beats):
        the closed form where every row lies in one page and one burst, :meth:`cycles` elsewhere."""
        b = words * per_word
        store = kind.startswith("store")
        fits = closed_form_fits(addr, stride, rows, b, self.W, store)
        n = closed_form(rows, b, store, store_read_latency(kind == "store_q"))
        bad = np.flatnonzero(~fits)
        if len(bad):
            n[bad] = [self.cycles(kind, a, stride, r, w, p) for a, r, w, p in
                      zip(*(np.broadcast_to(x, n.shape)[bad].tolist() for x in (addr, rows, words, per_word)),
                          strict=True)]
        return n


def closed_form(rows: Any, b: Any, store: bool, lat: Any = 0) -> Any:
    """``n`` of a transfer of ``rows`` rows of ``b`` beats that :func:`closed_form_fits` (each row one
    burst in one page, or streaming all the same), by ``dma_timing``'s recurrences: a load's, or a
    store's with buffer read latency ``lat``. Over ints or arrays alike."""
    q = (rows - 1) // _D
    if store:
        return lat + _L + 3 + rows * b + q * np.maximum(0, _L + 2 - (_D - 1) * b)
    return _L + 2 + rows * b + q * np.maximum(0, _L + 1 - (_D - 1) * b)


def closed_form_fits(addr: Any, stride: Any, rows: Any, b: Any, W: Any, store: bool) -> Any:
    """Whether :func:`closed_form` times a transfer (arrays, broadcast): each of its rows of ``b`` beats
    of ``W`` bytes from ``addr``, ``stride`` apart, in one page (a stride of whole pages: as the first;
    one dividing a page: within its stride; any other: one row only), or rows crossing pages that stream
    all the same (:func:`unstalled`), and a row in one burst."""
    row_bytes = b * W
    in_page = addr % PAGE + row_bytes <= PAGE
    spage = stride % PAGE
    divides = (spage != 0) & (PAGE % np.where(spage == 0, 1, stride) == 0)
    fits = np.where(spage == 0, in_page,
                    np.where(divides, addr % np.maximum(stride, 1) + row_bytes <= stride, (rows == 1) & in_page))
    fits |= (row_bytes <= PAGE) & unstalled(rows, b, store)
    return fits & (b <= dma_timing.MAX_BURST)


def streams(lens: list[int], store: bool) -> bool:
    """Whether a transfer of bursts ``lens`` (unpaced) moves its beats back to back from the first,
    so its ``n`` is ``L + 2`` (a load) or ``lat + L + 3`` (a store) plus its beats, whatever its
    bursts' lengths. By the recurrences of ``dma_timing``: beat ``k`` goes (a load's arrives) ``k``
    cycles after the first unless burst ``i``'s issue, held until burst ``i - D`` completes, comes
    later, which it does exactly when the ``D - 1`` bursts before it carry fewer than ``L + 1``
    beats (a load) or ``L + 2`` (a store: a burst completes ``L + 1`` after its last beat); a
    store's buffer reads, ``F`` words ahead, never hold a beat back. At most ``D`` bursts never wait."""
    if not lens:
        return False
    if len(lens) <= _D:
        return True
    s = np.cumsum(np.asarray(lens, dtype=np.int64))
    return bool((s[_D - 1:-1] - s[:len(s) - _D]).min() >= _L + 1 + store)


def unstalled(rows: Any, b: Any, store: Any) -> Any:
    """:func:`streams` of a transfer of ``rows`` rows of ``b`` beats whose rows lie in at most two
    pages each (at most two bursts), without its bursts, wherever its rows cross pages: at most
    ``D`` bursts (``2 * rows``), or ``D - 1`` bursts in a row always carrying enough, as they hold
    at least ``ceil((D - 3) / 2)`` whole rows and a beat (two rows' parts at their ends),
    ``ceil((D - 2) / 2)`` and a beat, or ``ceil((D - 1) / 2)`` (one part, none). Over arrays or ints."""
    k = _D - 1
    least = np.minimum(np.minimum(-(-(k - 2) // 2) * b + 2, -(-(k - 1) // 2) * b + 1), -(-k // 2) * b)
    return (b >= 1) & ((2 * rows <= _D) | (least >= _L + 1 + np.asarray(store, dtype=np.int64)))


def transfer_tuples(addr: np.ndarray, stride: int, rows: np.ndarray, words: np.ndarray, per_word: np.ndarray
                ) -> list[tuple[int, int, int, int, int]]:
    """Transfers given as arrays (:meth:`_Transfers.many`'s arguments) as ``(addr, stride, rows,
    words, beats a word)`` each."""
    n = len(addr)
    return list(zip(np.asarray(addr).tolist(), [stride] * n, np.broadcast_to(rows, n).tolist(),
                    np.broadcast_to(words, n).tolist(), np.broadcast_to(per_word, n).tolist(), strict=True))


def _in_pages(addr: int, stride: int, rows: int, row_bytes: int) -> bool:
    """Whether each of ``rows`` rows of ``row_bytes`` at ``addr + r * stride`` lies in one page."""
    if stride % PAGE == 0 or rows == 1:
        return addr % PAGE + row_bytes <= PAGE
    if PAGE % stride == 0:
        return addr % stride + row_bytes <= stride
    starts = (addr + np.arange(rows, dtype=np.int64) * stride) % PAGE
    return bool((starts + row_bytes <= PAGE).all())


def _changed(*keys: np.ndarray) -> np.ndarray:
    """True where any key differs from the run before (and at the first run)."""
    out = np.ones(len(keys[0]), dtype=bool)
    if len(out) > 1:
        rest = out[1:]
        rest[:] = keys[0][1:] != keys[0][:-1]
        for k in keys[1:]:
            rest |= k[1:] != k[:-1]
    return out


def _loaded(*keys: np.ndarray, held: int = 2) -> np.ndarray:
    """True where a run's weight tile is loaded (``conv._place``): where it differs from the run
    before and, when the buffer ``held`` two tiles (double buffered), from the tile the other half
    holds, which is the tile two changes back."""
    out = _changed(*keys)
    at = np.flatnonzero(out)
    if held > 1 and len(at) > 2:
        same = keys[0][at[2:]] == keys[0][at[:-2]]
        for k in keys[1:]:
            same &= k[at[2:]] == k[at[:-2]]
        out[at[2:][same]] = False
    return out


class RunArrays:
    """The runs of a tiling as arrays over runs (``_Geometry.tiles`` order), what each one loads and
    the cycles of its transfers: what :func:`conv_schedule` counts and
    ``perf_model.compiler.conv_timed`` lays out as the program's commands.

    ``bands``: whether the runs load bands (``False``: the input is on chip already, ``compile_conv``'s
    ``a_region``). Per run ``i``: ``mi``/``fj`` its output-row and filter tile, ``c0``/``c1`` its channel
    words, ``tp`` its tap tile (``taps``), ``K``/``k0`` its GEMM rows, ``fn0``/``fn`` its filters, ``p``
    its pixels, ``cyc`` its cycles; ``new_band``/``new_w``/``new_win`` whether it loads a band, loads a
    weight tile, needs a new ``WINDOW``; ``last_out`` whether it ends an output tile; ``band_n``/``w_n``
    the cycles of its loads and ``band_bytes``/``w_bytes`` their DRAM bytes.
    """

    def __init__(self, g: _Geometry, t: ConvTiling, requant: bool, *, bands: bool = True) -> None:
        cfg = g.config
        conv: Conv2d = g.conv
        self.g, self.t, self.requant = g, t, requant
        R, C, N = g.R, g.C, g.N
        ib = cfg.input_bits // 8
        self.out_b = out_b = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
        # Output-row tiles: pixels, band (first row, rows, pad_top); tap tiles: taps, window key.
        self.oys, self.m_pix, self.m_first, b_r0, self.b_rows, self.b_pad, self.b_img = row_tiles(g, t.rows_t)
        m_pix, b_rows, b_pad, b_img = self.m_pix, self.b_rows, self.b_pad, self.b_img
        mt = len(m_pix)
        # Runs of each filter tile (channel blocks outer, tap tiles inner).
        self.taps, tap_n, tap_key = tap_tiles(g, t.taps_t)
        taps = self.taps
        # per filter tile j: its channel blocks, each in every tap tile (``fl`` runs), in order
        n0s = np.arange(0, N, t.n_t, dtype=np.int64)
        n1s = np.minimum(n0s + t.n_t, N)
        w0s = n0s // g.cpo * g.cpg // R  # ``_Geometry.filter_words`` over the filter tiles
        w1s = -(-((n1s - 1) // g.cpo + 1) * g.cpg // R)
        nb = -(-(w1s - w0s) // t.c_t)
        b_j = np.repeat(np.arange(len(nb)), nb)
        b_c0 = w0s[b_j] + (np.arange(len(b_j)) - np.repeat(np.cumsum(nb) - nb, nb)) * t.c_t
        b_c1 = np.minimum(b_c0 + t.c_t, w1s[b_j])
        nt = len(taps)
        f_j, f_c0, f_c1 = np.repeat(b_j, nt), np.repeat(b_c0, nt), np.repeat(b_c1, nt)
        f_tp = np.tile(np.arange(nt), len(b_j))
        f_K = tap_n[f_tp] * (f_c1 - f_c0) * R
        f_len = nb * nt  # runs of each filter tile
        f_start = np.cumsum(f_len) - f_len
        f_k0 = np.cumsum(f_K) - f_K
        f_k0 -= f_k0[f_start][f_j]  # GEMM rows from the filter tile's first run
        fl = len(f_K)
        if t.order == "mn" or mt == 1:
            mi = np.repeat(np.arange(mt), fl)
            at = np.tile(np.arange(fl), mt)
        else:  # filter tiles outer: each filter tile's runs once per output-row tile
            pj = np.repeat(np.arange(len(nb)), mt)
            mi = np.repeat(np.tile(np.arange(mt), len(nb)), f_len[pj])
            lens = f_len[pj]
            at = np.arange(int(lens.sum())) + np.repeat(f_start[pj] - (np.cumsum(lens) - lens), lens)
        fj, c0, c1, tp, K, k0 = f_j[at], f_c0[at], f_c1[at], f_tp[at], f_K[at], f_k0[at]
        fn0 = n0s[fj]
        fn = n1s[fj] - fn0
        self.mi, self.fj, self.fn0, self.fn, self.c0, self.c1 = mi, fj, fn0, fn, c0, c1
        self.tp, self.K, self.k0 = tp, K, k0
        self.runs = runs = len(K)
        self.p = m_pix[mi]
        self.cyc = timing.run_cycles(0, R, C, self.p, K, fn, cfg.shadow_stationary).astype(np.int64)
        self.new_band = new_band = _changed(mi, c0, c1) if bands else np.zeros(runs, dtype=bool)
        self.new_w = new_w = _loaded(k0, K, fj, held=weight_tiles_held(cfg))
        self.last_out = np.ones(runs, dtype=bool)
        self.last_out[:-1] = _changed(mi, fj)[1:]
        in_h = np.where(b_img > 0, conv.h, b_rows)  # the window's in_h: an image's rows when it stacks images
        self.new_win = _changed(in_h[mi], b_pad[mi], b_img[mi], tap_key[tp], c1 - c0)
        self.cwords = cwords = -(-fn // C)  # output (and weight) words per row
        # DRAM layout: page-aligned tensors, offsets in their tensor (``compile_conv``); rows of fewer
        # channels or filters than a word's lanes are dense (whole beats) and move as narrow words.
        self.W = W = axi_data_bytes(cfg)
        a_pitch = g.a_pitch
        b_pitch = g.row_bytes(N, ib)
        self.c_pitch = g.row_bytes(N, out_b)
        b_word = np.where(fn < C, g.row_bytes_of(fn, ib), C * ib) // W  # beats of a weight / output word
        self.c_word = np.where(fn < C, g.row_bytes_of(fn, out_b), C * out_b) // W
        self.xf = xf = _Transfers(cfg)
        w_img = conv.w
        a_beats = g.a_word_bytes // W
        self.band_n = band_n = np.zeros(runs, dtype=np.int64)
        self.band_bytes = band_bytes = np.zeros(runs, dtype=np.int64)
        # the band loads' transfers, per run that loads one (``band_geometry``)
        at_b = np.flatnonzero(new_band)
        ct, m = (c1 - c0)[at_b], mi[at_b]
        addr = b_r0[m] * w_img * a_pitch + c0[at_b] * g.a_word_bytes
        rows = b_rows[m]
        per_word = np.full(len(at_b), xf.word_beats("ifmap", a_beats), dtype=np.int64)
        if g.pack:  # a sliding load: one DRAM row of the band's pixels and ``extra`` more
            whole = np.zeros(len(at_b), dtype=bool)
            b_rows_n, b_words = np.ones(len(at_b), dtype=np.int64), rows * w_img + g.extra
        else:
            whole = ct == g.words
            b_rows_n, b_words = np.where(whole, rows, rows * w_img), np.where(whole, w_img * ct, ct)
        b_stride = np.where(whole, w_img * a_pitch, a_pitch)
        for stride in (a_pitch, w_img * a_pitch):
            on = b_stride == stride
            if on.any():
                band_n[at_b[on]] = xf.many("ifmap", addr[on], stride, b_rows_n[on], b_words[on], per_word[on])
        self._band_transfers = (at_b, addr, b_stride, b_rows_n, b_words, per_word)
        band_bytes[at_b] = (rows * w_img + g.extra) * ct * g.a_word_bytes
        self.w_n = w_n = np.zeros(runs, dtype=np.int64)
        if g.kl < R:  # a tap's first ``kl`` weight rows only: one DRAM row a tap, its rows back to back
            w_geometry = ((k0 // R * g.kl * b_pitch)[new_w], g.kl * b_pitch, K[new_w] // R,
                          np.full(int(new_w.sum()), g.kl), b_word[new_w])
        else:
            w_geometry = ((k0 * b_pitch + fn0 * ib)[new_w], b_pitch, K[new_w], cwords[new_w], b_word[new_w])
        w_n[new_w] = xf.many("weight", *w_geometry)
        self._w_transfers = w_geometry
        self.w_bytes = np.where(new_w, K // R * g.kl * cwords * b_word * W, 0)
        self.skind = "store_q" if requant else "store"

    @functools.cached_property
    def band_geometry(self) -> dict[int, tuple[int, int, int, int, int]]:
        """Per run that loads a band, its transfer's ``(addr, stride, rows, words, beats a word)``."""
        at, addr, stride, rows, words, per_word = (a.tolist() for a in self._band_transfers)
        return {i: (a, s, r, w, b) for i, a, s, r, w, b in zip(at, addr, stride, rows, words, per_word, strict=True)}

    @functools.cached_property
    def w_geometry(self) -> dict[int, tuple[int, int, int, int, int]]:
        """The weight loads' transfers, per run that loads one (as :attr:`band_geometry`)."""
        return dict(zip(np.flatnonzero(self.new_w).tolist(), transfer_tuples(*self._w_transfers), strict=True))

    def store_transfers(self, i: np.ndarray, r0: np.ndarray, r1: np.ndarray
                        ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]:
        """The stores of output rows ``r0 .. r1 - 1`` of run ``i``'s output tile as
        :meth:`_Transfers.many`'s ``(addr, stride, rows, words, beats a word)`` (one DRAM row of
        their words when each is one word and they lie back to back: ``conv._one_row``)."""
        rows = r1 - r0
        cwords, c_word, W, c_pitch = self.cwords, self.c_word, self.W, self.c_pitch
        one = (rows > 1) & (cwords[i] == 1) & (c_word[i] * W == c_pitch)
        return ((self.m_first[self.mi[i]] + r0) * c_pitch + self.fn0[i] * self.out_b, c_pitch,
                np.where(one, 1, rows), np.where(one, rows, cwords[i]), c_word[i])

    def store_n(self, i: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
        """Cycles of those stores (:meth:`store_transfers`)."""
        return self.xf.many(self.skind, *self.store_transfers(i, r0, r1))

    def store_bytes(self, i: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
        """DRAM bytes of those stores."""
        return (r1 - r0) * self.cwords[i] * self.c_word[i] * self.W

    def pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Double buffered: the part of the previous output tile's store each run carries,
        ``(has, prev, r0, r1)``: whether it carries one, a run of that tile, and its output rows.
        Output tile q's store is cut in as many parts as the next tile has runs (no part empty):
        run j of tile q carries rows ``j * r // P .. (j + 1) * r // P`` of tile q - 1's ``r`` rows,
        ``P`` tile q's runs (``r < P``: parts of one row, for the first ``r`` runs)."""
        runs, mi, fj = self.runs, self.mi, self.fj
        changed = _changed(mi, fj)
        starts = np.flatnonzero(changed)
        sizes = np.diff(np.append(starts, runs))
        pair = np.cumsum(changed) - 1
        j = np.arange(runs) - starts[pair]
        prev = starts[np.maximum(pair - 1, 0)]
        rows_c, P = self.m_pix[mi[prev]], sizes[pair]
        big = rows_c >= P
        r0 = np.where(big, j * rows_c // P, j)
        r1 = np.where(big, (j + 1) * rows_c // P, j + 1)
        has = (pair >= 1) & (big | (j < rows_c))
        return has, prev, r0, r1


def conv_schedule(g: _Geometry, t: ConvTiling, requant: bool) -> ConvSchedule | None:
    """The figures of tiling ``t`` of ``g``'s conv (module docstring), or ``None`` on a paced DRAM."""
    cfg = g.config
    if dram_rate(cfg) is not None:
        return None
    conv: Conv2d = g.conv
    r = RunArrays(g, t, requant)
    R, N = g.R, g.N
    ib = cfg.input_bits // 8
    acc_b = cfg.acc_bits / 8
    runs, mi, cyc, K, k0, fn, p = r.runs, r.mi, r.cyc, r.K, r.k0, r.fn, r.p
    new_band, new_w, new_win, band_n, w_n, xf = r.new_band, r.new_w, r.new_win, r.band_n, r.w_n, r.xf
    outs = np.flatnonzero(r.last_out)
    written = int((r.m_pix[mi[outs]] * r.cwords[outs] * r.c_word[outs]).sum()) * r.W
    read = (int(r.band_bytes.sum()), int(r.w_bytes.sum()))
    qp = 0
    if requant:
        qp = xf.cycles("qparam", 0, 0, 1, _align(N, g.C) // g.C) + 1
    # Commands per run: WINDOW, RUN, loads, stores (one queue-load unless more than QUEUE_DEPTH).
    loads = new_band.astype(np.int64) + new_w
    if cfg.double_buffered:
        has, prev, r0, r1 = r.pieces()
        pieces = has.astype(np.int64)
        piece_n = np.zeros(runs, dtype=np.int64)
        piece_n[has] = r.store_n(prev[has], r0[has], r1[has]) + 1
        last_run = np.array([runs - 1])
        final = int(r.store_n(last_run, np.zeros(1, dtype=np.int64), r.m_pix[mi[last_run]])[0])
        count = 1 + int(requant) + int(new_win.sum()) + runs + int(loads.sum()) + int(pieces.sum())
        if count <= QUEUE_DEPTH:
            s = np.zeros(runs, dtype=np.int64)
            s[:-1] = piece_n[:-1] + (band_n + w_n + loads)[1:]
            period = np.maximum(cyc[:-1] + 1, 2 + s[:-1] + 2 * ((s[:-1] == 0) & new_win[1:]))
            pre = qp + int(band_n[0] + w_n[0] + loads[0])
            decode0 = 1 + fetch_cycles(count, xf.W) + FETCH_DECODE_CYCLES
            last = decode0 + pre + int(period.sum())
            issue = max(last + int(cyc[-1]) + 1, last + 2 + int(piece_n[-1]))
            total = issue + final + 1
        else:
            total = walk_double(cyc, band_n, w_n, new_band, new_w, new_win, piece_n, pieces, final, qp, xf.W)
    else:
        stores = np.zeros(runs, dtype=np.int64)
        stores[outs] = r.store_n(outs, np.zeros(len(outs), dtype=np.int64), r.m_pix[mi[outs]]) + 1
        count = int(requant) + int(new_win.sum()) + runs + int(loads.sum()) + len(outs)
        if count <= QUEUE_DEPTH:
            decode0 = 1 + fetch_cycles(count, xf.W) + FETCH_DECODE_CYCLES
            total = decode0 + qp + int((band_n + w_n + loads + cyc + 1 + stores).sum())
        else:
            total = walk_single(cyc, band_n, w_n, new_band, new_w, new_win, stores, r.last_out, qp, xf.W)
    # Folds and SRAM bytes (``conv_score``'s rules).
    rf, cf = -(-K // R), -(-fn // g.C)
    folds = int((rf * cf).sum())
    sram_a = float((p * K * cf).sum()) * ib
    sram_b = float((K * fn).sum()) * ib
    c_write = float((p * fn * rf).sum()) * acc_b
    c_read = float((p * fn * (rf - 1 + (k0 > 0))).sum()) * acc_b
    pixels = g.M * conv.c_out
    return ConvSchedule(
        total=int(total), compute=int(cyc.sum()), read=read, written=written, folds=folds,
        sram_read=(sram_a, sram_b, c_read + pixels * acc_b),
        sram_write=(float(read[0]), float(read[1]), c_write), tile=(int(p[0]), int(K[0]), int(fn[0])))
