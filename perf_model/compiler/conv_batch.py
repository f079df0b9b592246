"""The schedules of many conv tilings at once: :func:`~perf_model.compiler.conv_schedule.conv_schedule`
over a batch of ``(geometry, tiling, requant)`` in one numpy pass.

``conv_schedule`` counts one tiling's runs with arrays over its runs (``RunArrays``), about a
hundred numpy calls a tiling; a sweep's first pass meets thousands of distinct tilings, so the
calls, not the arithmetic, cost. Here the runs of every tiling of a batch lie in one set of flat
arrays, each run carrying its tiling's index (its *segment*); every step of ``RunArrays`` and
``conv_schedule`` is done once over all of them, by the same rules:

* the runs of a tiling: its filter tiles, their channel blocks, each in every tap tile, repeated
  per output-row tile in the tiling's loop order (``RunArrays``), built with ragged ranges;
* what changes from run to run (a band, a weight tile, a ``WINDOW``, an output tile) by comparing
  each run with the one before, the first run of every segment counted as a change, and a
  weight tile the other buffer half holds (double buffered) only within its segment;
* transfer cycles in the closed form where every row lies in one page and one burst, each other
  transfer by the scalar ``_Transfers.cycles`` (the burst recurrence);
* totals per segment (``np.add.reduceat`` over the segments' first runs) for a program of one
  queue-load, single or double buffered; a longer program is walked by ``conv_schedule``'s own
  queue-load walk on its segment's arrays.

Every design of a batch must keep up with its DRAM (``dram_rate`` ``None``; a paced design is
walked by the caller). Equal to ``conv_schedule`` on every tiling
(``tests/perf_model/test_model_conv_batch.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from accel_spec.isa import QUEUE_DEPTH, store_read_latency
from perf_model import dma_timing, timing
from perf_model.compiler.conv_geometry import ConvTiling, _Geometry, row_bytes_of, weight_tiles_held
from perf_model.compiler.conv_queue_loads import fetch_cycles, walk_double, walk_single
from perf_model.compiler.conv_schedule import ConvSchedule, _Transfers, closed_form, closed_form_fits
from perf_model.compiler.conv_shapes import row_tiles, tap_tiles
from perf_model.compiler.program import PAGE
from perf_model.program_timing import FETCH_DECODE_CYCLES, word_beats

__all__ = ["batch_schedules"]


class _Scalars:
    """Per-tiling values of a batch, each an int64 array over its tilings (``_Batch``): the array
    ``R`` x ``C``, the conv's filters ``N``, filters ``cpo`` and channels ``cpg`` a group, the
    tiling's ``n_t``, ``c_t`` and loop order (``mn``), shadow registers, weight tiles ``held``,
    ``requant``, bus bytes ``W``, input and output element bytes ``ib``/``out_b``, a pixel's DRAM
    pitch ``a_pitch`` and channel word ``a_wb``, ifmap ``words`` a pixel, tap packing ``pack`` and
    its ``extra`` pixels, weight rows a tap ``kl``, input width ``w_img`` and height ``h``, weight
    and output row pitches ``b_pitch``/``c_pitch``, beats of an ifmap and a qparam word, output
    elements ``pixels``, double buffering ``db``, output-row tiles ``mt`` and tap tiles ``nt``."""

    R: np.ndarray
    C: np.ndarray
    N: np.ndarray
    cpo: np.ndarray
    cpg: np.ndarray
    n_t: np.ndarray
    c_t: np.ndarray
    mn: np.ndarray
    shadow: np.ndarray
    held: np.ndarray
    requant: np.ndarray
    W: np.ndarray
    ib: np.ndarray
    out_b: np.ndarray
    a_pitch: np.ndarray
    a_wb: np.ndarray
    words: np.ndarray
    pack: np.ndarray
    extra: np.ndarray
    kl: np.ndarray
    w_img: np.ndarray
    h: np.ndarray
    b_pitch: np.ndarray
    c_pitch: np.ndarray
    a_beats: np.ndarray
    q_beats: np.ndarray
    pixels: np.ndarray
    db: np.ndarray
    mt: np.ndarray
    nt: np.ndarray


#: The per-tiling values, in the order ``_Batch`` gathers them.
_SCALARS = tuple(_Scalars.__annotations__)



def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments of ``lengths`` items: each item's segment and its index within it."""
    seg = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.cumsum(lengths) - lengths
    return seg, np.arange(len(seg), dtype=np.int64) - starts[seg]


def _changed(first: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """True where any key differs from the item before, and at every segment's first item (``first``)."""
    out = first.copy()
    rest = out[1:]
    for k in keys:
        rest |= k[1:] != k[:-1]
    return out


@functools.lru_cache(maxsize=1 << 12)
def _fetch_cycles(commands: int, W: int) -> int:
    return int(fetch_cycles(commands, W))


@functools.lru_cache(maxsize=1 << 12)
def _beats(config: object) -> tuple[int, int]:
    """Beats of an ifmap word and of a qparam word of ``config`` (``word_beats``)."""
    beats = word_beats(config)  # type: ignore[arg-type]
    return beats["ifmap"], beats["qparam"]


class _Batch(_Scalars):
    """The tilings of a batch: per-tiling scalars (``_SCALARS``, arrays over tilings), their row and
    tap tiles concatenated (with each tiling's offset), and their ``_Transfers`` made on demand."""

    def __init__(self, items: Sequence[tuple[_Geometry, ConvTiling, bool]]) -> None:
        self.items = items
        cols: list[list[int]] = [[] for _ in _SCALARS]
        m_parts: list[tuple[np.ndarray, ...]] = []
        t_parts: list[tuple[np.ndarray, np.ndarray]] = []
        for g, t, requant in items:
            cfg, conv = g.config, g.conv
            ib = cfg.input_bits // 8
            out_b = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
            rows = row_tiles(g, t.rows_t)
            _, tap_n, tap_key = tap_tiles(g, t.taps_t)
            m_parts.append(rows[1:])
            t_parts.append((tap_n, tap_key))
            ifmap_beats, q_beats = _beats(cfg)
            a_beats = g.a_word_bytes // g.W
            values = (g.R, g.C, g.N, g.cpo, g.cpg, t.n_t, t.c_t, t.order == "mn", bool(cfg.shadow_stationary),
                      weight_tiles_held(cfg), requant, g.W, ib, out_b, g.a_pitch, g.a_word_bytes, g.words,
                      bool(g.pack), g.extra, g.kl, conv.w, conv.h, g.row_bytes(g.N, ib), g.row_bytes(g.N, out_b),
                      a_beats or ifmap_beats, q_beats, g.M * conv.c_out, bool(cfg.double_buffered),
                      len(rows[1]), len(tap_n))
            for col, v in zip(cols, values, strict=True):
                col.append(int(v))
        for name, col in zip(_SCALARS, cols, strict=True):
            setattr(self, name, np.array(col, dtype=np.int64))
        self.m_pix, self.m_first, self.b_r0, self.b_rows, self.b_pad, self.b_img = (
            np.concatenate([p[i] for p in m_parts]) for i in range(6))
        self.tap_n, self.tap_key = (np.concatenate([p[i] for p in t_parts]) for i in range(2))
        self.m_off = np.cumsum(self.mt) - self.mt
        self.t_off = np.cumsum(self.nt) - self.nt
        self.xf: dict[int, _Transfers] = {}

    def transfers(self, pair: int) -> _Transfers:
        """Tiling ``pair``'s ``_Transfers`` (the burst recurrence of transfers the closed form cannot time)."""
        xf = self.xf.get(pair)
        if xf is None:
            xf = self.xf[pair] = _Transfers(self.items[pair][0].config)
        return xf

    def cycles(self, kinds: np.ndarray, names: tuple[str, str], seg: np.ndarray, addr: np.ndarray,
               stride: np.ndarray, rows: np.ndarray, words: np.ndarray, per_word: np.ndarray) -> np.ndarray:
        """``_Transfers.many`` over transfers of many tilings (``seg``), each of its own stride: of kind
        ``names[1]`` where ``kinds`` else ``names[0]`` (stores: ``store``/``store_q``; loads: one name)."""
        W = self.W[seg]
        b = words * per_word
        row_bytes = b * W
        spage = stride % PAGE
        divides = (spage != 0) & (PAGE % np.where(spage == 0, 1, stride) == 0)
        store = names[0].startswith("store")
        fits = closed_form_fits(addr, stride, rows, b, W, store)
        n = closed_form(rows, b, store, np.where(kinds, store_read_latency(True), store_read_latency(False)))
        bad = np.flatnonzero(~fits)
        if len(bad):  # once per distinct ``_Transfers`` memo key (a word of 0 beats: the tiling's kind's words)
            sp, pw = spage[bad], per_word[bad]
            first, inverse = _distinct([kinds[bad], addr[bad] % PAGE, np.where(sp == 0, PAGE, sp), rows[bad],
                                        words[bad], pw, W[bad], np.where(pw == 0, seg[bad] + 1, 0)])
            at = bad[first]
            # a stride that does not divide a page, rows in pages after all: the closed form
            # (``_Transfers._cycles``), each row's offset checked over one period of the offsets
            check = at[(spage[at] != 0) & ~divides[at] & (rows[at] > 1) & (b[at] <= dma_timing.MAX_BURST)
                       & (per_word[at] > 0)]
            period = PAGE // np.gcd(spage[check], PAGE)
            row_of, r = _ragged(np.minimum(rows[check], period))
            ends = (addr[check][row_of] + r * stride[check][row_of]) % PAGE + row_bytes[check][row_of]
            crossed = np.bincount(row_of, weights=ends > PAGE, minlength=len(check)) > 0
            walk = np.setdiff1d(at, check[~crossed])
            n[walk] = [self.transfers(int(seg[i])).cycles(names[int(kinds[i])], int(addr[i]), int(stride[i]),
                                                          int(rows[i]), int(words[i]), int(per_word[i]))
                       for i in walk.tolist()]
            n[bad] = n[at][inverse]
        return n


def _distinct(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of non-negative int ``columns``: each one's first row and each row's distinct
    row (``np.unique(axis=0)``'s ``index`` and ``inverse``, the rows' order aside), the columns packed
    into as few int64 codes as hold them (mixed radix), sorted together."""
    codes: list[np.ndarray] = []
    code, span = np.zeros(len(columns[0]), dtype=np.int64), 1
    for col in columns:
        top = int(col.max()) + 1
        if span * top >= 1 << 62:
            codes.append(code)
            code, span = np.zeros(len(col), dtype=np.int64), 1
        code = code * top + col
        span *= top
    codes.append(code)
    order = np.lexsort(codes[::-1])
    new = np.ones(len(order), dtype=bool)
    for c in codes:
        ranked = c[order]
        new[1:] &= ranked[1:] == ranked[:-1]
    new = ~new
    new[0] = True
    group = np.cumsum(new) - 1
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = group
    return order[new], inverse


def _row_word(filters: np.ndarray, C: np.ndarray, elem: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Beats of one row's word of ``filters`` filters (a weight or output word, ``RunArrays``): its
    DRAM bytes (``conv_geometry.row_bytes_of``) below ``C`` filters, a whole word of ``C`` lanes else."""
    return np.where(filters < C, row_bytes_of(filters, C, elem, W), C * elem) // W


def batch_schedules(items: Sequence[tuple[_Geometry, ConvTiling, bool]]) -> list[ConvSchedule]:
    """``conv_schedule(g, t, requant)`` of every item (module docstring), each on an unpaced design."""
    if not items:
        return []
    B = _Batch(items)
    P = len(items)
    # Filter tiles (per tiling ``ceil(N / n_t)``), their channel blocks, each in every tap tile.
    nf = -(-B.N // B.n_t)
    f_seg, f_loc = _ragged(nf)
    n0 = f_loc * B.n_t[f_seg]
    n1 = np.minimum(n0 + B.n_t[f_seg], B.N[f_seg])
    R_f, cpo_f, cpg_f, ct_f = B.R[f_seg], B.cpo[f_seg], B.cpg[f_seg], B.c_t[f_seg]
    w0 = n0 // cpo_f * cpg_f // R_f
    w1 = -(-((n1 - 1) // cpo_f + 1) * cpg_f // R_f)
    nb = -(-(w1 - w0) // ct_f)
    b_f, b_loc = _ragged(nb)
    b_c0 = w0[b_f] + b_loc * ct_f[b_f]
    b_c1 = np.minimum(b_c0 + ct_f[b_f], w1[b_f])
    e_b, e_loc = _ragged(B.nt[f_seg[b_f]])
    e_f = b_f[e_b]
    e_c0, e_c1 = b_c0[e_b], b_c1[e_b]
    e_tp = B.t_off[f_seg[e_f]] + e_loc
    e_K = B.tap_n[e_tp] * (e_c1 - e_c0) * R_f[e_f]
    f_len = nb * B.nt[f_seg]
    f_start = np.cumsum(f_len) - f_len
    cs = np.cumsum(e_K) - e_K
    e_k0 = cs - cs[f_start[e_f]]  # GEMM rows from the filter tile's first run
    # (output-row tile, filter tile) pairs in loop order, then their runs.
    f_off = np.cumsum(nf) - nf
    q_seg, q_loc = _ragged(B.mt * nf)
    mn = (B.mn == 1) | (B.mt == 1)
    mn_q, nf_q, mt_q = mn[q_seg], nf[q_seg], B.mt[q_seg]
    q_mi = B.m_off[q_seg] + np.where(mn_q, q_loc // nf_q, q_loc % mt_q)
    q_fj = f_off[q_seg] + np.where(mn_q, q_loc % nf_q, q_loc // mt_q)
    r_q, r_loc = _ragged(f_len[q_fj])
    at = f_start[q_fj[r_q]] + r_loc
    mi, fj, seg = q_mi[r_q], q_fj[r_q], q_seg[r_q]
    runs = np.bincount(seg, minlength=P)
    start = np.cumsum(runs) - runs
    end = start + runs - 1
    first = np.zeros(len(seg), dtype=bool)
    first[start] = True
    c0, c1, tp, K, k0 = e_c0[at], e_c1[at], e_tp[at], e_K[at], e_k0[at]
    fn0 = n0[fj]
    fn = n1[fj] - fn0
    p = B.m_pix[mi]
    R, C, W = B.R[seg], B.C[seg], B.W[seg]
    cyc = timing.run_cycles(0, R, C, p, K, fn, B.shadow[seg] == 1).astype(np.int64)
    new_band = _changed(first, mi, c0, c1)
    new_w = _changed(first, k0, K, fj)
    # a tile the other half holds (two changes back) stays; ``fj`` (numbered over the batch) tells
    # the tilings apart
    at_w = np.flatnonzero(new_w)
    if len(at_w) > 2:
        now, back = at_w[2:], at_w[:-2]
        same = (B.held[seg[now]] > 1) & (k0[now] == k0[back]) & (K[now] == K[back]) & (fj[now] == fj[back])
        new_w[now[same]] = False
    tile_change = _changed(first, mi, fj)
    last_out = np.ones(len(seg), dtype=bool)
    last_out[:-1] = tile_change[1:]
    in_h = np.where(B.b_img > 0, B.h[np.repeat(np.arange(P), B.mt)], B.b_rows)
    new_win = _changed(first, in_h[mi], B.b_pad[mi], B.b_img[mi], B.tap_key[tp], c1 - c0)
    cwords = -(-fn // C)
    ib = B.ib[seg]
    b_word = _row_word(fn, C, ib, W)
    c_word = _row_word(fn, C, B.out_b[seg], W)
    # Band loads (``RunArrays``: a sliding load when taps are packed; whole rows when all channels).
    band_n = np.zeros(len(seg), dtype=np.int64)
    band_bytes = np.zeros(len(seg), dtype=np.int64)
    at_b = np.flatnonzero(new_band)
    s_b = seg[at_b]
    ct, m = (c1 - c0)[at_b], mi[at_b]
    w_img, a_pitch, pack, extra = B.w_img[s_b], B.a_pitch[s_b], B.pack[s_b] == 1, B.extra[s_b]
    rows = B.b_rows[m]
    whole = ~pack & (ct == B.words[s_b])
    band_n[at_b] = B.cycles(np.zeros(len(at_b), dtype=bool), ("ifmap", "ifmap"), s_b,
                            B.b_r0[m] * w_img * a_pitch + c0[at_b] * B.a_wb[s_b],
                            np.where(whole, w_img * a_pitch, a_pitch),
                            np.where(pack, 1, np.where(whole, rows, rows * w_img)),
                            np.where(pack, rows * w_img + extra, np.where(whole, w_img * ct, ct)), B.a_beats[s_b])
    band_bytes[at_b] = (rows * w_img + extra) * ct * B.a_wb[s_b]
    # Weight loads (a tap's first ``kl`` rows only, back to back, when ``kl < R``).
    w_n = np.zeros(len(seg), dtype=np.int64)
    at_w = np.flatnonzero(new_w)
    s_w = seg[at_w]
    kl, b_pitch, R_w = B.kl[s_w], B.b_pitch[s_w], B.R[s_w]
    part = kl < R_w
    Kw, k0w = K[at_w], k0[at_w]
    w_n[at_w] = B.cycles(np.zeros(len(at_w), dtype=bool), ("weight", "weight"), s_w,
                         np.where(part, k0w // R_w * kl * b_pitch, k0w * b_pitch + fn0[at_w] * B.ib[s_w]),
                         np.where(part, kl * b_pitch, b_pitch), np.where(part, Kw // R_w, Kw),
                         np.where(part, kl, cwords[at_w]), b_word[at_w])
    w_bytes = np.where(new_w, K // R * B.kl[seg] * cwords * b_word * W, 0)
    requant = B.requant == 1
    qp = np.where(requant, B.cycles(np.zeros(P, dtype=bool), ("qparam", "qparam"), np.arange(P),
                                    np.zeros(P, dtype=np.int64), np.zeros(P, dtype=np.int64),
                                    np.ones(P, dtype=np.int64), -(-B.N // B.C), B.q_beats) + 1, 0)
    c_pitch, out_b = B.c_pitch, B.out_b

    def stores(i: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
        """Cycles of the stores of output rows ``r0 .. r1 - 1`` of run ``i``'s tile (``RunArrays.store_transfers``)."""
        s = seg[i]
        n = r1 - r0
        one = (n > 1) & (cwords[i] == 1) & (c_word[i] * W[i] == c_pitch[s])
        return B.cycles(requant[s], ("store", "store_q"), s,
                        (B.m_first[mi[i]] + r0) * c_pitch[s] + fn0[i] * out_b[s], c_pitch[s],
                        np.where(one, 1, n), np.where(one, n, cwords[i]), c_word[i])

    loads = new_band.astype(np.int64) + new_w
    sums = functools.partial(np.add.reduceat, indices=start)
    outs = np.flatnonzero(last_out)
    written = sums(np.where(last_out, p * cwords * c_word, 0)) * B.W
    read = sums(band_bytes), sums(w_bytes)
    db = B.db == 1
    common = requant.astype(np.int64) + sums(new_win.astype(np.int64)) + runs + sums(loads)
    single_runs = ~db[seg]
    store_n = np.zeros(len(seg), dtype=np.int64)
    on = outs[single_runs[outs]]
    store_n[on] = stores(on, np.zeros(len(on), dtype=np.int64), p[on]) + 1
    piece_n = np.zeros(len(seg), dtype=np.int64)
    pieces = np.zeros(len(seg), dtype=bool)
    final = np.zeros(P, dtype=np.int64)
    if db.any():  # output tile q's store in parts carried by tile q + 1's runs (``RunArrays.pieces``)
        starts = np.flatnonzero(tile_change)
        sizes = np.diff(np.append(starts, len(seg)))
        pair = np.cumsum(tile_change) - 1
        j = np.arange(len(seg)) - starts[pair]
        prev = starts[np.maximum(pair - 1, 0)]
        rows_c, n_parts = B.m_pix[mi[prev]], sizes[pair]
        big = rows_c >= n_parts
        r0 = np.where(big, j * rows_c // n_parts, j)
        r1 = np.where(big, (j + 1) * rows_c // n_parts, j + 1)
        pieces = (pair > pair[start][seg]) & (big | (j < rows_c)) & db[seg]
        at_p = np.flatnonzero(pieces)
        piece_n[at_p] = stores(prev[at_p], r0[at_p], r1[at_p]) + 1
        last = end[db]
        final[db] = stores(last, np.zeros(len(last), dtype=np.int64), p[last])
    # Commands (one queue-load unless more than QUEUE_DEPTH): WINDOWs, RUNs, loads, stores.
    count = np.where(db, 1 + common + sums(pieces.astype(np.int64)), common + sums(last_out.astype(np.int64)))
    walk = count > QUEUE_DEPTH
    decode0 = np.array([0 if c > QUEUE_DEPTH else 1 + _fetch_cycles(c, w) + FETCH_DECODE_CYCLES
                        for c, w in zip(count.tolist(), B.W.tolist(), strict=True)], dtype=np.int64)
    # single buffered: every command's ``n + 1`` after the fetch
    total = decode0 + qp + sums(band_n + w_n + loads + cyc + 1 + store_n)
    if db.any():  # double buffered: RUN(i + 1) ``max(cyc_i + 1, 2 + S_i)`` after RUN(i)
        nxt = np.zeros(len(seg), dtype=np.int64)  # S_i: run i's store part and run i + 1's loads
        nxt[:-1] = piece_n[:-1] + (band_n + w_n + loads)[1:]
        win_next = np.zeros(len(seg), dtype=bool)
        win_next[:-1] = new_win[1:]
        period = np.maximum(cyc + 1, 2 + nxt + 2 * ((nxt == 0) & win_next))
        period[end] = 0
        done = decode0 + qp + band_n[start] + w_n[start] + loads[start] + sums(period)
        issue = np.maximum(done + cyc[end] + 1, done + 2 + piece_n[end])
        total = np.where(db, issue + final + 1, total)
    for s in np.flatnonzero(walk).tolist():  # more than a queue-load: walked (``conv_schedule``)
        a, b = int(start[s]), int(end[s]) + 1
        if db[s]:
            total[s] = walk_double(cyc[a:b], band_n[a:b], w_n[a:b], new_band[a:b], new_w[a:b], new_win[a:b],
                                    piece_n[a:b], pieces[a:b], int(final[s]), int(qp[s]), int(B.W[s]))
        else:
            total[s] = walk_single(cyc[a:b], band_n[a:b], w_n[a:b], new_band[a:b], new_w[a:b], new_win[a:b],
                                    store_n[a:b], last_out[a:b], int(qp[s]), int(B.W[s]))
    # Folds and SRAM bytes (``conv_score``'s rules).
    rf, cf = -(-K // R), -(-fn // C)
    acc_b = np.array([g.config.acc_bits / 8 for g, _, _ in items])
    sram_a = sums(p * K * cf).astype(np.float64) * B.ib
    sram_b = sums(K * fn).astype(np.float64) * B.ib
    c_write = sums(p * fn * rf).astype(np.float64) * acc_b
    c_read = sums(p * fn * (rf - 1 + (k0 > 0))).astype(np.float64) * acc_b + B.pixels * acc_b
    columns = zip(total.tolist(), sums(cyc).tolist(), read[0].tolist(), read[1].tolist(), written.tolist(),
                  sums(rf * cf).tolist(), sram_a.tolist(), sram_b.tolist(), c_read.tolist(), c_write.tolist(),
                  p[start].tolist(), K[start].tolist(), fn[start].tolist(), strict=True)
    return [ConvSchedule(total=tot, compute=comp, read=(ra, rb), written=wr, folds=fo, sram_read=(sa, sb_, cr),
                         sram_write=(float(ra), float(rb), cw), tile=(tm, tk, tn))
            for tot, comp, ra, rb, wr, fo, sa, sb_, cr, cw, tm, tk, tn in columns]
