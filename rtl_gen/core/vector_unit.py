"""The vector unit: the integer ops between matrix ops, on rows of int8 words held on chip.

One op per ``start`` (the registers of ``accel_spec.vector_isa``: ``kind``, ``src``/``src2``/
``dst`` word addresses, ``rows`` rows of ``words`` words of ``n`` elements, ``qrows`` the period
of a causal mask's query index, ``params``; ``colmajor``: word ``t`` of row ``r`` at ``t * rows +
r`` past the base instead of ``r * words + t``, a GEMM output's layout in the ifmap).
Micro-architecture, one datapath for every kind:

* a pass engine reads one word (``lanes`` int8 lanes, plus the second operand's word of an add,
  a product or a gated SiLU) per cycle on read ports of one cycle latency, computes every lane's
  element function in the next cycle and, in the one after, reduces the lanes' values (sum, max
  and min over the valid lanes of the row, into the row's accumulators) or writes the result
  word (lanes past the row's ``n``, or masked, are written 0): a pass over ``W`` words takes
  ``W + PASS_TAIL`` cycles;
* a scalar step between passes (fixed cycles, ``accel_spec.vector_isa.SCALAR_CYCLES``) with one
  serial divider (a quotient bit per cycle) and one digit-by-digit square root (two bits per
  cycle): a LayerNorm row's mean and reciprocal square root, a softmax row's reciprocal sum;
* the element functions are those of ``workloads._int_ops``, term for term: the rescaling add,
  the product, ReLU/ReLU6 clamps, I-BERT's i-GELU polynomial, a 256-entry SiLU ROM
  (``accel_spec.vector_isa.silu_table``), the centred square and the normalising multiply of a
  norm, the i-exp (its ``floor(a / ln 2)`` by an exact multiply on the argument clamped where
  the exponential is already 0) and the probability multiply of a softmax with its causal mask;
* RoPE (``rope``, ``accel_spec.vector_isa``'s docstring has the schedule and the table layout): the
  pass engine issues four reads per pair of output words (``x1`` with the table's cos low word,
  ``x2`` with its high word, the two sin words), each lane keeps ``x1``, ``x2`` and a table low
  byte, and the rescaling add's two multipliers form ``x1 cos``, ``x2 cos`` (kept in the lane's
  value registers), then ``x2 sin``, ``x1 sin``; the write stage writes word ``j``, then ``j + H``.
  ``qrows`` rows (a position's heads) share a table row;
* a transpose (``transpose``, ``accel_spec.vector_isa``'s docstring has the schedule) walks blocks
  of ``lanes`` input rows with a ``lanes x lanes`` tile of int8 registers (a register of ``8 *
  lanes`` bits per tile row): for each input word ``t`` it reads word ``t`` of each of the block's
  rows (the data lands in the tile row of the row's index in the block the cycle after), waits a
  cycle for the last one, then writes the output words of rows ``t * lanes ..`` (word ``b`` of
  each, ``b`` the block), one a cycle, lane ``i`` from tile row ``i``'s lane 0 (0 past the block's
  rows), every tile row shifting down one lane per write. Its pointers step by additions: the
  word's read pointer by ``words`` a read, the write pointer by the pitch (parameter register 0)
  a write (its step's last write leaves it at the next step's first), the next block's first row
  at the last word's read pointer less ``words - 1``. It ignores ``colmajor``, ``src2`` and ``qrows``.

Per row the phases of ``accel_spec.vector_isa.PHASES`` run back to back; ``busy`` is high from the
cycle after ``start`` for ``perf_model.vector_timing.vector_run_cycles`` cycles (``vector_cycles``
of the op; a transpose's from its ``n`` and the lanes too; ``cycles`` counts them) and ``done`` is
high in the cycle after the last.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError
from accel_spec.vector_isa import (
    DIV_STEPS,
    NPARAMS,
    PARAM_FIELDS,
    ROPE_FRAC,
    SQRT_STEPS,
    VECTOR_CODES,
    silu_table,
)

__all__ = ["VectorUnit"]

_K = VECTOR_CODES
_ELEMENTWISE = tuple(_K[k] for k in ("add", "mul", "relu", "relu6", "gelu", "silu"))


def _fields() -> dict[str, tuple[int, int, bool]]:
    """Every kind's parameter fields by name (the names are distinct across kinds)."""
    out: dict[str, tuple[int, int, bool]] = {}
    for fields in PARAM_FIELDS.values():
        for i, (name, bits, sign) in enumerate(fields):
            out[name] = (i, bits, sign)
    return out


def _rshr(v: Value, s: Value | int) -> Value:
    """``floor((v + 2**(s-1)) / 2**s)`` (``v`` if ``s == 0``); ``s`` a constant or an unsigned 5-bit value."""
    if isinstance(s, int):
        return v if s == 0 else (v + (1 << (s - 1))) >> s
    return (v + ((Const(1, 1) << s) >> 1)) >> s


def _sat8(v: Value) -> Value:
    return Mux(v > 127, 127, Mux(v < -128, -128, v))


class VectorUnit(wiring.Component):
    """See the module docstring.

    Args:
        lanes: int8 lanes per word (the array's columns by default in a design).
        addr_bits: width of the buffers' word addresses.
    """

    def __init__(self, *, lanes: int, addr_bits: int) -> None:
        for name, value, low, high in (("lanes", lanes, 1, 1024), ("addr_bits", addr_bits, 1, 32)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"vector unit {name} must be an integer in [{low}, {high}], not {value!r}")
        self.lanes = lanes
        self.addr_bits = addr_bits
        a = addr_bits
        super().__init__({
            "start": In(1), "kind": In(4), "colmajor": In(1), "src": In(a), "src2": In(a), "dst": In(a), "rows": In(16),
            "words": In(24), "n": In(24), "qrows": In(16), "params": In(32 * NPARAMS),
            "busy": Out(1), "done": Out(1), "cycles": Out(32),
            "rd_en": Out(1), "rd_addr": Out(a), "rd_data": In(8 * lanes), "rd2_addr": Out(a), "rd2_data": In(8 * lanes),
            "wr_en": Out(1), "wr_addr": Out(a), "wr_data": Out(8 * lanes),
        })

    def elaborate(self, platform: object) -> Module:  # noqa: C901, PLR0915 - one datapath, read top to bottom
        m = Module()
        lanes, a = self.lanes, self.addr_bits
        # -- registers of the op, sampled at start
        kind, src, src2, dst = Signal(4), Signal(a), Signal(a), Signal(a)
        rows, words, n, qrows, colmajor = Signal(16), Signal(24), Signal(24), Signal(16), Signal()
        p = [Signal(signed(32), name=f"p{i}") for i in range(NPARAMS)]
        sampled = [kind.eq(self.kind), src.eq(self.src), src2.eq(self.src2), dst.eq(self.dst), rows.eq(self.rows),
                   words.eq(self.words), n.eq(self.n), qrows.eq(self.qrows), colmajor.eq(self.colmajor),
                   *(reg.eq(self.params[32 * i:32 * (i + 1)]) for i, reg in enumerate(p))]
        is_elem = Signal()
        m.d.comb += is_elem.eq(Cat(*(kind == c for c in _ELEMENTWISE)).any())
        is_norm = (kind == _K["layernorm"]) | (kind == _K["rmsnorm"])
        is_soft = kind == _K["softmax"]
        is_pool = (kind == _K["maxpool"]) | (kind == _K["avgpool"])
        is_avg = kind == _K["avgpool"]
        is_rope = kind == _K["rope"]
        is_tr = kind == _K["transpose"]

        # -- row state and scalars
        row, row_off, qpos = Signal(16), Signal(a), Signal(16)
        pidx = Signal(2)  # pass of the row: 0, 1, 2
        writing = Signal()
        m.d.comb += writing.eq(is_elem | is_rope | (pidx == 2))
        acc_sum = Signal(signed(40))
        acc_max, acc_min = Signal(signed(10)), Signal(signed(10))
        mean = Signal(signed(34))  # m, in units of x / 128
        rshift = Signal(6)  # R
        fmul = Signal(signed(18))  # f
        oshift = Signal(6)  # 10 + b + R / 2 - p
        top = Signal(signed(9))
        rec = Signal(32)

        # -- the transpose walk (module docstring): rows of the block and elements of the word left
        # (the tile's valid rows and output words: at most lanes of each), the word's read index
        # and write index, the read and write pointers, the word's first read address, the block's
        # output column (dst + b)
        tr_rows, tr_n, tr_words = Signal(16), Signal(24), Signal(24)
        tr_i, tr_j = Signal(range(lanes + 1)), Signal(range(lanes + 1))
        tr_rd, tr_wr, tr_col, tr_out = Signal(a), Signal(a), Signal(a), Signal(a)
        tr_read, tr_write = Signal(), Signal()  # this cycle reads a word, writes an output word
        tr_live, tr_row = Signal(), Signal(range(lanes + 1))  # the read of the cycle before, its tile row
        tile = [Signal(8 * lanes, name=f"tile{i}") for i in range(lanes)]
        m.d.sync += [tr_live.eq(tr_read), tr_row.eq(tr_i)]
        for i, tile_row in enumerate(tile):
            with m.If(tr_live & (tr_row == i)):
                m.d.sync += tile_row.eq(self.rd_data)
            with m.Elif(tr_write):
                m.d.sync += tile_row.eq(tile_row >> 8)
        tr_data = Cat(*(Mux(tr_rows > i, tile_row[:8], 0) for i, tile_row in enumerate(tile)))

        # -- the pass engine: issue (t), compute (t + 1), reduce or write (t + 2)
        t = Signal(26)
        woff = Signal(a)  # word t's offset in its row: t, or t * rows (colmajor)
        issue = Signal()
        s1_live, s1_w, s1_off = Signal(), Signal(26), Signal(a)
        s2_live, s2_off, s2_w = Signal(), Signal(a), Signal(26)
        pool_issue, pool_addr = Signal(), Signal(a)  # the window walk's read (pooling)
        # RoPE: read t is word pair j = t // 4, phase t % 4 (x1 | x2 | - | -, table word t of the row's
        # position); half = H words; tab_off the position's table row
        half, tab_off = Signal(23), Signal(a)
        m.d.comb += half.eq(words >> 1)
        rope_x = Signal(a)
        m.d.comb += rope_x.eq(t[2:] + Mux(t[0], half, 0))
        m.d.comb += [self.rd_addr.eq(Mux(is_tr, tr_rd, Mux(is_pool, pool_addr,
                                                          src + row_off + Mux(is_rope, rope_x, woff)))),
                     self.rd2_addr.eq(Mux(is_rope, src2 + tab_off + t, src2 + row_off + woff)),
                     self.rd_en.eq((issue & ~(is_rope & t[1])) | pool_issue | tr_read)]  # a RoPE reads x at phases 0, 1
        m.d.sync += [s1_live.eq(issue), s1_w.eq(t), s1_off.eq(woff), s2_live.eq(s1_live), s2_off.eq(s1_off),
                     s2_w.eq(s1_w)]
        ph = s1_w[:2]  # the phase of the read at the compute stage

        vals = [Signal(signed(32), name=f"val{i}") for i in range(lanes)]
        vals2 = [Signal(signed(24), name=f"rope_val{i}") for i in range(lanes)]  # a RoPE's second output
        valid = [Signal(name=f"ok{i}") for i in range(lanes)]
        rom = silu_table()
        # the parameter registers' fields (accel_spec.vector_isa.PARAM_FIELDS; the compiler keeps them in range)
        f = {name: p[i][:bits].as_signed() if sign else p[i][:bits]
             for name, (i, bits, sign) in _fields().items()}
        for lane in range(lanes):
            x = self.rd_data[8 * lane:8 * lane + 8].as_signed()
            y = self.rd2_data[8 * lane:8 * lane + 8].as_signed()
            k = Signal(48, name=f"k{lane}")
            m.d.comb += k.eq(s1_w * lanes + lane)
            ok = (k < n) & ~(is_soft & (p[5] >= 0) & (k > qpos + p[5]))

            def wire(name: str, value: Value, shape: object, lane: int = lane) -> Signal:
                sig = Signal(shape, name=f"{name}{lane}")
                m.d.comb += sig.eq(value)
                return sig

            # element functions (widths: the bounds of workloads._int_ops, docs/workloads.md)
            # the rescaling add's two multipliers, a RoPE's too: x1 cos and x2 cos at phase 1, x2 sin
            # and x1 sin at phase 3 (coef: the table's high byte now, its low byte the cycle before)
            x1, x2, lo = Signal(signed(8), name=f"rope_x1_{lane}"), Signal(signed(8), name=f"rope_x2_{lane}"), \
                Signal(8, name=f"rope_lo{lane}")
            m.d.sync += [x1.eq(Mux(ph == 0, x, x1)), x2.eq(Mux(ph == 1, x, x2)), lo.eq(Mux(ph[0], lo, y))]
            coef = wire("rope_coef", Cat(lo, y).as_signed(), signed(16))
            prod_a = wire("prod_a", Mux(is_rope, Mux(ph == 1, x1, x2), x) * Mux(is_rope, coef, f["mult_a"]),
                          signed(32))
            prod_b = wire("prod_b", Mux(is_rope, Mux(ph == 1, x, x1), y) * Mux(is_rope, coef, f["mult_b"]),
                          signed(32))
            f_add = _sat8(_rshr(prod_a + prod_b, f["shift"]))
            rope1 = Mux(ph == 1, prod_a, Mux(ph == 3, _sat8(_rshr(vals[lane] - prod_a, ROPE_FRAC)), vals[lane]))
            m.d.sync += vals2[lane].eq(Mux(ph == 1, prod_b, Mux(ph == 3, _sat8(_rshr(vals2[lane] + prod_b, ROPE_FRAC)),
                                                                vals2[lane])))
            f_mul = _sat8(_rshr(x * y, f["shift"]))
            f_relu = Mux(x < 0, 0, x)
            f_relu6 = Mux(x < 0, 0, Mux(x > f["act_max"], f["act_max"], x))
            scaled = wire("gelu_v", Mux(x < 0, -x, x) * f["gelu_mult"], 25)
            g_t = wire("gelu_t", Mux(scaled > f["clip"], f["clip"], scaled) - f["clip"], signed(16))
            g_sq = wire("gelu_sq", _rshr(g_t * g_t, 14), 17)
            g_poly = wire("gelu_poly", (1 << 14) - _rshr(f["gelu_a"] * g_sq, 15), signed(18))
            erf = Mux(x > 0, g_poly, Mux(x < 0, -g_poly, 0))
            f_gelu = _sat8(_rshr(x * ((1 << 14) + erf), 15))
            silu_t = Signal(signed(16), name=f"silu_t{lane}")
            with m.Switch(x.as_unsigned()):
                for code in range(256):
                    with m.Case(code):
                        m.d.comb += silu_t.eq(rom[(code - 256 if code >= 128 else code) + 128])
            f_silu = Mux(f["gated"], _sat8(_rshr(silu_t * y, 11)), _sat8(_rshr(silu_t, 7)))
            d = wire("d", (x << 7) - mean, signed(17))
            f_sq = _rshr(d * d, rshift[:5])
            f_norm = _sat8(_rshr(d * fmul, oshift[:5]))
            diff = wire("exp_diff", Mux(ok, top - x, 0), 9)
            prod = wire("exp_prod", diff * f["in_mult"], 32)
            arg = wire("exp_arg", Mux(prod > (f["ln2"] << 4), f["ln2"] << 4, prod), 20)
            z = wire("exp_z", (arg * f["z_mult"]) >> f["z_shift"], 5)
            e_t = wire("exp_t", _rshr(z * f["ln2"] - arg + f["poly_b"], 2), 16)
            e_sq = wire("exp_sq", _rshr(e_t * e_t, 14), 17)
            e = wire("exp", Mux(ok, (_rshr(f["exp_a"] * e_sq, 15) + f["poly_c"]) >> z, 0), 16)
            scaled_p = wire("prob", (e * rec) >> 15, 16)
            f_prob = _rshr(scaled_p * 127, 15)
            val = Signal(signed(32), name=f"v{lane}")
            with m.Switch(kind):
                for code, value in ((_K["add"], f_add), (_K["mul"], f_mul), (_K["relu"], f_relu),
                                    (_K["relu6"], f_relu6), (_K["gelu"], f_gelu), (_K["silu"], f_silu)):
                    with m.Case(code):
                        m.d.comb += val.eq(value)
                with m.Case(_K["layernorm"], _K["rmsnorm"]):
                    m.d.comb += val.eq(Mux(pidx == 0, x, Mux(pidx == 1, f_sq, f_norm)))
                with m.Case(_K["softmax"]):
                    m.d.comb += val.eq(Mux(pidx == 0, x, Mux(pidx == 1, e, f_prob)))
                with m.Case(_K["rope"]):
                    m.d.comb += val.eq(rope1)
            m.d.sync += [vals[lane].eq(val), valid[lane].eq(ok)]

        # reduce (sum, max, min over the valid lanes) or write
        lane_sum = sum((Mux(valid[i], vals[i], 0) for i in range(lanes)), Const(0, signed(40)))
        # each step of the max/min chains is a signal: an expression would repeat its operand in
        # both the comparison and the result, doubling the emitted Verilog per lane
        lane_max, lane_min = acc_max, acc_min
        for i in range(lanes):
            hi, lo = Signal(signed(32), name=f"max{i}"), Signal(signed(32), name=f"min{i}")
            m.d.comb += [hi.eq(Mux(valid[i] & (vals[i] > lane_max), vals[i], lane_max)),
                         lo.eq(Mux(valid[i] & (vals[i] < lane_min), vals[i], lane_min))]
            lane_max, lane_min = hi, lo
        reducing = s2_live & ~writing
        with m.If(reducing):
            m.d.sync += [acc_sum.eq(acc_sum + lane_sum), acc_max.eq(lane_max), acc_min.eq(lane_min)]
        pool_write, pool_out, pool_data = Signal(), Signal(a), Signal(8 * lanes)
        # a RoPE writes word j after a pair's last read (phase 3), word j + H the cycle after
        rope_first, rope_second, rope_addr = Signal(), Signal(), Signal(a)
        m.d.comb += rope_first.eq(is_rope & s2_live & (s2_w[:2] == 3))
        m.d.sync += [rope_second.eq(rope_first), rope_addr.eq(dst + row_off + s2_w[2:] + half)]
        elem_data = Cat(*(Mux(valid[i], vals[i][:8], 0) for i in range(lanes)))
        rope_data = Cat(*(Mux(rope_second, vals2[i], vals[i])[:8] for i in range(lanes)))
        pass_write = Mux(is_rope, rope_first | rope_second, s2_live & writing)
        m.d.comb += [self.wr_en.eq(Mux(is_tr, tr_write, Mux(is_pool, pool_write, pass_write))),
                     self.wr_addr.eq(Mux(is_tr, tr_wr, Mux(is_pool, pool_out, Mux(
                         rope_second, rope_addr, dst + row_off + Mux(is_rope, s2_w[2:], s2_off))))),
                     self.wr_data.eq(Mux(is_tr, tr_data, Mux(is_pool, pool_data, Mux(is_rope, rope_data, elem_data))))]

        # -- the window walk of a pooling (accel_spec.vector_isa: PoolGeometry, pool_registers):
        # pointers are addresses mod 2**addr_bits (every read lands in range, so wrapping
        # intermediates are exact); (iy0, ix0) is the window's corner, possibly in the padding
        in_h, in_w, out_h, out_w = p[0][:16], p[0][16:32], p[1][:16], p[1][16:32]
        win_h, win_w = p[2][:16], p[2][16:32]
        st_h, st_w, pad_h, pad_w = p[3][:8], p[3][8:16], p[3][16:24], p[3][24:32]
        words_c = p[4][:24]
        rowpitch, xstep, ystep, imgpitch = Signal(a), Signal(a), Signal(a), Signal(a)
        img_base, oy_ptr, px_ptr, rrow, rcol = Signal(a), Signal(a), Signal(a), Signal(a), Signal(a)
        cwi, ox, oy = Signal(24), Signal(16), Signal(16)
        iy0, ix0 = Signal(signed(18)), Signal(signed(18))
        cx, cy = Signal(16), Signal(16)
        ptail, pool_s1 = Signal(), Signal()
        corner_off = Signal(a)  # the padding's offset: pixel (-pad_h, -pad_w) from an image's pixel (0, 0)
        m.d.comb += corner_off.eq(pad_h * rowpitch + pad_w * words_c)

        def window_span(corner: Value, size: Value, win: Value, label: str) -> tuple[Signal, Signal]:
            """The first in-image window position along one axis and how many there are."""
            lo, hi, count = Signal(9, name=f"{label}_lo"), Signal(signed(18), name=f"{label}_hi"), \
                Signal(16, name=f"{label}_count")
            m.d.comb += [lo.eq(Mux(corner < 0, -corner, 0)),
                         hi.eq(Mux(corner + win > size, size - corner, win)),
                         count.eq(Mux(hi > lo, hi - lo, 0))]
            return lo, count

        ky_lo, vy = window_span(iy0, in_h, win_h, "pool_y")
        kx_lo, vx = window_span(ix0, in_w, win_w, "pool_x")
        live, first = Signal(), Signal()
        m.d.comb += [live.eq((cy < vy) & (cx < vx)), first.eq((cy == 0) & (cx == 0))]
        addr0, cur, cur_row = Signal(a), Signal(a), Signal(a)
        m.d.comb += [addr0.eq(px_ptr + cwi + ky_lo * rowpitch + kx_lo * words_c),
                     cur.eq(Mux(first, addr0, rcol)), cur_row.eq(Mux(first, addr0, rrow)), pool_addr.eq(cur)]
        pacc = [Signal(signed(21), name=f"pool_acc{i}") for i in range(lanes)]
        pool_init = [acc.eq(Mux(is_avg, 0, -128)) for acc in pacc]
        with m.If(pool_s1):  # a window word's data: each lane's max or sum
            for lane, acc in enumerate(pacc):
                x = self.rd_data[8 * lane:8 * lane + 8].as_signed()
                m.d.sync += acc.eq(Mux(is_avg, acc + x, Mux(x > acc, x, acc)))
        lane_outs = []
        for lane, acc in enumerate(pacc):
            quotient = Signal(signed(10), name=f"pool_avg{lane}")
            m.d.comb += quotient.eq((((acc + p[6][:21]) * f["pool_mult"]) >> p[6][24:30]) - 128)
            ok = Signal(name=f"pool_ok{lane}")
            m.d.comb += ok.eq(cwi * lanes + lane < n)
            lane_outs.append(Mux(ok, Mux(is_avg, quotient, acc)[:8], 0))
        m.d.comb += pool_data.eq(Cat(*lane_outs))

        # -- scalar datapath: serial divider and square root
        div_num, div_den, div_quo = Signal(32), Signal(32), Signal(32)
        div_rem = Signal(33)
        step = Signal(6)
        rem_next = Cat(div_num[31], div_rem[:32])
        div_step = [div_num.eq(div_num << 1),
                    div_rem.eq(Mux(rem_next >= div_den, rem_next - div_den, rem_next)),
                    div_quo.eq(Cat(rem_next >= div_den, div_quo[:31]))]

        def div_load(num: Value, den: Value) -> list:
            return [div_num.eq(num), div_den.eq(den), div_rem.eq(0), div_quo.eq(0), step.eq(0)]

        sq_rem, sq_root, sq_q = Signal(32), Signal(32), Signal(32)
        sq_p = Signal(5)
        sq_bit = Signal(32)
        m.d.comb += sq_bit.eq(Const(1 << 30, 32) >> (step[:4] << 1))
        trial = sq_rem >= sq_root + sq_bit
        sq_step = [sq_rem.eq(Mux(trial, sq_rem - (sq_root + sq_bit), sq_rem)),
                   sq_root.eq(Mux(trial, (sq_root >> 1) + sq_bit, sq_root >> 1))]
        mean_num = Signal(signed(42))
        m.d.comb += mean_num.eq((acc_sum << 7) + p[1])
        mean_neg = Signal()
        clz = Signal(6)
        m.d.comb += clz.eq(32)
        for bit in range(32):
            with m.If(sq_q[bit]):
                m.d.comb += clz.eq(31 - bit)

        # -- sequencing
        def start_pass(index: int | Value) -> list:
            return [pidx.eq(index), t.eq(0), woff.eq(0), acc_sum.eq(0), acc_max.eq(-128), acc_min.eq(127)]

        busy = Signal()
        m.d.comb += self.busy.eq(busy)
        with m.If(busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.sync += self.done.eq(0)

        def stepping(name: str, ops: list, steps: int, after: str) -> None:
            """State ``name``: ``ops`` once a cycle for ``steps`` cycles, then state ``after``."""
            with m.State(name):
                m.d.sync += [*ops, step.eq(step + 1)]
                with m.If(step == steps - 1):
                    m.next = after

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [*sampled, busy.eq(1), self.cycles.eq(0)]
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += [row.eq(0), row_off.eq(0), qpos.eq(0), tab_off.eq(0), top.eq(-128), *start_pass(0)]
                m.next = "PASS"
                with m.If(is_pool):
                    m.d.sync += [rowpitch.eq(in_w * words_c), xstep.eq(st_w * words_c)]
                    m.next = "POOL_SETUP"
                with m.Elif(is_tr):
                    m.d.sync += [tr_rows.eq(rows), tr_n.eq(n), tr_words.eq(words), tr_i.eq(0), tr_rd.eq(src),
                                 tr_col.eq(src), tr_wr.eq(dst), tr_out.eq(dst)]
                    m.next = "TR_READ"
            # a transpose (module docstring): a word's reads, a cycle for the last one's data, its writes
            with m.State("TR_READ"):
                m.d.comb += tr_read.eq(1)
                m.d.sync += [tr_rd.eq(tr_rd + words), tr_i.eq(tr_i + 1)]
                with m.If((tr_i + 1 == lanes) | (tr_i + 1 == tr_rows)):
                    m.d.sync += tr_i.eq(0)
                    m.next = "TR_WAIT"

            def tr_step_end() -> None:
                """After a word's last write: the next word of the block, the next block, or done."""
                with m.If(tr_words != 1):
                    m.d.sync += [tr_words.eq(tr_words - 1), tr_n.eq(Mux(tr_n > lanes, tr_n - lanes, 0)),
                                 tr_col.eq(tr_col + 1), tr_rd.eq(tr_col + 1)]
                    m.next = "TR_READ"
                with m.Elif(tr_rows > lanes):  # the last word's reads end at the next block's first row + words - 1
                    nxt = tr_rd - (words - 1)
                    m.d.sync += [tr_rows.eq(tr_rows - lanes), tr_n.eq(n), tr_words.eq(words), tr_col.eq(nxt),
                                 tr_rd.eq(nxt), tr_out.eq(tr_out + 1), tr_wr.eq(tr_out + 1)]
                    m.next = "TR_READ"
                with m.Else():
                    m.d.sync += [busy.eq(0), self.done.eq(1)]
                    m.next = "IDLE"

            with m.State("TR_WAIT"):
                m.d.sync += tr_j.eq(0)
                m.next = "TR_WRITE"
                with m.If(tr_n == 0):  # a word past the row's n elements (words > ceil(n / lanes)): no writes
                    tr_step_end()
            with m.State("TR_WRITE"):
                m.d.comb += tr_write.eq(1)
                m.d.sync += [tr_wr.eq(tr_wr + p[0][:24]), tr_j.eq(tr_j + 1)]
                with m.If((tr_j + 1 == lanes) | (tr_j + 1 == tr_n)):
                    tr_step_end()
            with m.State("POOL_SETUP"):
                origin = src - corner_off
                m.d.sync += [ystep.eq(st_h * rowpitch), imgpitch.eq(in_h * rowpitch), img_base.eq(src),
                             oy_ptr.eq(origin), px_ptr.eq(origin), iy0.eq(-pad_h), ix0.eq(-pad_w), cwi.eq(0),
                             ox.eq(0), oy.eq(0), cx.eq(0), cy.eq(0), ptail.eq(0), pool_out.eq(dst), *pool_init]
                m.next = "POOL"
            with m.State("POOL"):
                m.d.comb += pool_issue.eq(live)
                m.d.sync += pool_s1.eq(live)
                with m.If(live):
                    with m.If(cx + 1 < vx):
                        m.d.sync += [rcol.eq(cur + words_c), rrow.eq(cur_row), cx.eq(cx + 1)]
                    with m.Else():
                        m.d.sync += [rcol.eq(cur_row + rowpitch), rrow.eq(cur_row + rowpitch), cx.eq(0),
                                     cy.eq(cy + 1)]
                with m.Elif(~ptail):  # the last word's data is accumulating
                    m.d.sync += ptail.eq(1)
                with m.Else():  # write the output word, then the next one's window
                    m.d.comb += pool_write.eq(1)
                    m.d.sync += [pool_out.eq(pool_out + 1), ptail.eq(0), cx.eq(0), cy.eq(0), *pool_init]
                    with m.If(cwi + 1 != words_c):
                        m.d.sync += cwi.eq(cwi + 1)
                    with m.Else():
                        m.d.sync += cwi.eq(0)
                        with m.If(ox + 1 != out_w):
                            m.d.sync += [ox.eq(ox + 1), ix0.eq(ix0 + st_w), px_ptr.eq(px_ptr + xstep)]
                        with m.Else():
                            m.d.sync += [ox.eq(0), ix0.eq(-pad_w)]
                            with m.If(oy + 1 != out_h):
                                m.d.sync += [oy.eq(oy + 1), iy0.eq(iy0 + st_h), oy_ptr.eq(oy_ptr + ystep),
                                             px_ptr.eq(oy_ptr + ystep)]
                            with m.Else():
                                nxt = img_base + imgpitch - corner_off
                                m.d.sync += [oy.eq(0), iy0.eq(-pad_h), row.eq(row + 1),
                                             img_base.eq(img_base + imgpitch), oy_ptr.eq(nxt), px_ptr.eq(nxt)]
                                with m.If(row + 1 == rows):
                                    m.d.sync += [busy.eq(0), self.done.eq(1)]
                                    m.next = "IDLE"
            with m.State("PASS"):
                # a RoPE row: 2 * words reads, its last output word one cycle after the tail
                m.d.comb += issue.eq(t < Mux(is_rope, words << 1, words))
                m.d.sync += [t.eq(t + 1), woff.eq(woff + Mux(colmajor, rows, 1))]
                with m.If(t == Mux(is_rope, (words << 1) + 2, words + 1)):
                    with m.If(writing):
                        last = row + 1 == rows
                        wrap = qpos + 1 == qrows
                        m.d.sync += [row.eq(row + 1), row_off.eq(row_off + Mux(colmajor, 1, words)),
                                     qpos.eq(Mux(wrap, 0, qpos + 1)),
                                     tab_off.eq(Mux(wrap, tab_off + (words << 1), tab_off)), *start_pass(0)]
                        with m.If(last):
                            m.d.sync += [busy.eq(0), self.done.eq(1)]
                            m.next = "IDLE"
                    with m.Elif(is_norm & (pidx == 0)):
                        m.next = "MEAN"
                    with m.Elif(is_norm):
                        m.next = "RSQRT"
                    with m.Elif(pidx == 0):  # softmax: the row's max, then the sum of exponentials
                        m.d.sync += [*start_pass(1), top.eq(Mux(reducing, lane_max, acc_max))]
                    with m.Else():
                        m.next = "RECIP"
            # MEAN: m = rdiv(128 * sum, n) (signed, by magnitude), then R from the row's extremes.
            with m.State("MEAN"):
                neg = mean_num < 0
                m.d.sync += [*div_load(Mux(neg, p[0] - 1 - mean_num, mean_num), p[0]), mean_neg.eq(neg)]
                m.next = "MEAN_DIV"
            stepping("MEAN_DIV", div_step, DIV_STEPS, "MEAN_END")
            with m.State("MEAN_END"):
                mv = Signal(signed(34))
                m.d.comb += mv.eq(Mux(p[6] == 0, 0, Mux(mean_neg, -div_quo, div_quo)))
                hi, lo = (acc_max << 7) - mv, mv - (acc_min << 7)
                dmax = Signal(34)
                m.d.comb += dmax.eq(Mux(hi > lo, hi, lo))
                width = Signal(6)
                for bit in range(34):
                    with m.If(dmax[bit]):
                        m.d.comb += width.eq(bit + 1)
                rr = p[5] + 2 * width
                m.d.sync += [mean.eq(mv), rshift.eq(Mux(rr > 0, rr, 0)), *start_pass(1)]
                m.next = "PASS"
            # RSQRT: q, its normalising shift, s = isqrt, f = rdiv(c << 14, s).
            with m.State("RSQRT"):
                q = acc_sum + _rshr(p[4], rshift[:5])
                m.d.sync += sq_q.eq(Mux(q < 1, 1, q) << rshift[0])
                m.next = "RSQRT_NORM"
            with m.State("RSQRT_NORM"):
                shift = (clz - 2) >> 1
                m.d.sync += [sq_p.eq(shift), sq_rem.eq(sq_q << (shift[:4] << 1)), sq_root.eq(0), step.eq(0)]
                m.next = "RSQRT_SQRT"
            stepping("RSQRT_SQRT", sq_step, SQRT_STEPS, "RSQRT_LOAD")
            with m.State("RSQRT_LOAD"):
                m.d.sync += div_load(p[2] + (sq_root >> 1), sq_root)
                m.next = "RSQRT_DIV"
            stepping("RSQRT_DIV", div_step, DIV_STEPS, "RSQRT_END")
            with m.State("RSQRT_END"):
                m.d.sync += [fmul.eq(div_quo), oshift.eq(p[3] + (rshift >> 1) - sq_p), *start_pass(2)]
                m.next = "PASS"
            # RECIP: rec = floor(2**30 / max(sum e, 1)).
            with m.State("RECIP"):
                m.d.sync += div_load(Const(1 << 30, 32), Mux(acc_sum < 1, 1, acc_sum))
                m.next = "RECIP_DIV"
            stepping("RECIP_DIV", div_step, DIV_STEPS, "RECIP_END")
            with m.State("RECIP_END"):
                m.d.sync += [rec.eq(div_quo), *start_pass(2)]
                m.next = "PASS"
        return m
