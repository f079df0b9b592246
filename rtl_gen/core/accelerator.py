# This docstring is exported verbatim (rtl_gen.PORT_MAP, design.json's port_map); it names the output stage by
# its module's name before the subpackages (now rtl_gen.core.output_stage) so that exports stay byte-identical.
"""The complete accelerator: buffers, host port, controller, systolic array.

Port map of :class:`Accelerator` (Verilog/cocotb names; ``clk`` and ``rst`` are added by the
export, ``rst`` synchronous and active high). ``R``/``C`` are the array rows/columns, ``b`` the
``input_bits``, ``a`` the ``acc_bits``; all ports are unsigned bit vectors::

    port         dir  width                 meaning
    host_sel     in   2                     buffer of the host port: 0 ifmap, 1 weight, 2 ofmap, 3 qparam
    host_addr    in   max address width     word address in that buffer
    host_wdata   in   widest buffer word    word to write (low bits used for narrower buffers)
    host_we      in   1                     write host_wdata at host_addr this cycle (idle only)
    host_rdata   out  C*a                   ofmap word at the host_addr of the previous cycle
    host_qsel    in   qparam address width  qparam word applied to the ofmap word read at host_addr
    host_qdata   out  C*b                   requantised ofmap word of host_addr/host_qsel 7 cycles back
    m, k, n      in   32 each               GEMM dimensions, sampled with start
    accumulate   in   1                     sampled with start: add results to the ofmap
    x_base       in   x buffer address width  sampled with start: word offset of the run's x operand
    y_base       in   y buffer address width  sampled with start: word offset of the run's y operand
    o_base       in   ofmap address width     sampled with start: word offset of the run's outputs
    a_stride     in   24                    sampled with start: words between two folds of A (x
                                            row-folds WS/OS, y column-folds IS; 0: packed)
    move_we      in   1                     write host_qdata to ifmap word move_addr this cycle
    move_addr    in   ifmap address width   ifmap word move_we writes (the on-chip MOVE: ifmap and
                                            ofmap lanes must agree)
    host_overlap in   1                     let host writes to ifmap/weight/qparam through while busy
    window       in   1                     sampled with start: A through the convolution window (WS)
    in_w .. ky_step  in  (field widths)     sampled with start: the window (accel_spec.isa WINDOW)
    window_error out  1                     a window run addressed a word outside the ifmap (not read);
                                            cleared by the next start
    start        in   1                     one-cycle pulse; ignored while busy
    busy         out  1                     high from the cycle after start until done
    done         out  1                     rises when the run ends, stays high until the next start
    cycles       out  32                    cycles from start to done of the last run

Timing: a run sampled at clock edge ``E0`` (``start`` high) raises ``done`` at edge ``E_n`` with
``n = cycles = perf_model.timing.run_cycles(...)``: ``1 + folds * (Ds + 2R + C)`` without shadow
registers; with them ``1 + (folds - 1) * max(Ds, R, 2) + Ds + 2R + C`` for WS and IS and
``2 + folds * max(Ds, R, 2) + 2R + C`` for OS (a run with a zero dimension: 1). Host writes take
effect at the clock edge where ``host_we`` is high, and only while not busy. The ofmap read has
a fixed latency of 1 cycle: present ``host_addr`` before an edge, read ``host_rdata`` after it
(valid while not busy; the ofmap read port is the controller's during a run). Buffer contents are
undefined after reset in exported Verilog (zero in the Amaranth simulator): write what a run reads.

Output stage (``rtl_gen.core.output_stage``): ``host_qdata`` is the ofmap word read at ``host_addr``
requantised lane by lane with the parameter word at ``host_qsel`` of the qparam buffer, with a
fixed latency of ``QDATA_LATENCY = 1 + OUTPUT_STAGE_LATENCY = 7`` cycles (the buffer reads, then
the stage's registers: ``accel_spec.isa.store_read_latency``; pipelined, one word per
cycle). Present ``host_addr`` and ``host_qsel`` together. ``host_rdata`` (raw ``acc_bits``
lanes) is unchanged and stays available (partial sums, raw outputs). qparam words (written with
``host_sel = 3``) hold ``param_bits(b) = 69 + 3b`` bits per lane: bias (32), multiplier (32),
shift (5), zero point, act_min, act_max (``b`` each), from bit 0 up. WS/OS: a word holds ``C``
lanes, lane ``c`` of word ``f`` for output channel ``f*C + c`` of the run, so read ofmap word
``nf*M + m`` with ``host_qsel = nf``. IS: a word holds one lane, broadcast to every lane (an IS
ofmap word is one channel), so read ofmap word ``mf*N + n`` with ``host_qsel = n``. The buffer
holds ``QPARAM_CHANNELS = 4096`` channels.

Buffer words: lane ``i`` of a word holds bits ``[i*w, (i+1)*w)`` with ``w = b`` for the ifmap and
weight buffers and ``w = a`` for the ofmap, two's complement. Lanes marked "pad" (beyond the
matrix edge in an edge fold) are don't-care on input and unspecified on output. ``mf``, ``kf``,
``nf`` are the fold indices ``floor(m / R)`` etc.; ``M``, ``K``, ``N`` the run's dimensions::

    WS  ifmap  R lanes  addr kf*M + m       lane r = A[m, kf*R + r]          (M*ceil(K/R) words)
        weight C lanes  addr nf*K + k       lane c = B[k, nf*C + c]          (K*ceil(N/C) words)
        ofmap  C lanes  addr nf*M + m       lane c = C[m, nf*C + c]          (M*ceil(N/C) words)
    OS  ifmap  R lanes  addr mf*K + k       lane r = A[mf*R + r, k]          (K*ceil(M/R) words)
        weight C lanes  addr nf*K + k       lane c = B[k, nf*C + c]          (K*ceil(N/C) words)
        ofmap  C lanes  addr nf*M + m       lane c = C[m, nf*C + c]          (M*ceil(N/C) words)
    IS  ifmap  C lanes  addr mf*K + k       lane c = A[mf*C + c, k]          (K*ceil(M/C) words)
        weight R lanes  addr kf*N + n       lane r = B[kf*R + r, n]          (N*ceil(K/R) words)
        ofmap  C lanes  addr mf*N + n       lane c = C[mf*C + c, n]          (N*ceil(M/C) words)

(here the fold index of a lane is that of the row/column it belongs to: ``kf = floor(k / R)``
for WS, ``nf = floor(n / C)``, and so on). So WS and OS read ``C`` back row by row, IS column by
column (``C`` transposed): IS is WS on ``C^T = B^T A^T`` with the ifmap buffer holding the
stationary operand and the weight buffer the streamed one. The words a run needs are
``perf_model.timing.run_words``; the buffer depths ``perf_model.timing.buffer_depth_words``.

Inside, each buffer is one SRAM bank per lane (``b`` or ``a`` bits wide, all at the word's
address for the host). Every bank of lane ``i`` is addressed ``i`` cycles after lane 0 through a
tapped delay line of address/enable registers (the left operand's lane ``r`` enters row ``r``
``r`` cycles late, the top operand's and the results' lane ``c`` column ``c`` ``c`` cycles late,
and column ``c``'s load/drain strobe likewise), so no data skew or de-skew registers are needed
(``O(R + C)`` control registers instead of ``O(R^2 + C^2)`` data registers) and every column
runs column 0's schedule ``c`` cycles late, which the shadow registers' overlap needs. A buffer
whose field holds a single word is built with two (Verilog has no 0-bit address); the second word
is never used.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import FIELDS, SIGNED_WINDOW_FIELDS, WINDOW_FIELDS
from rtl_gen.core.accelerator_paths import HOST_SEL, AcceleratorPaths
from rtl_gen.core.array import SystolicArray
from rtl_gen.core.buffer_datapath import OfmapUpdate, OperandGate
from rtl_gen.core.buffer_layout import CYCLES_BITS, DIM_BITS, BufferGeometry, BufferLayout, buffer_layout
from rtl_gen.core.checksum import COUNT_BITS, ChecksumUnit, check_dataflow
from rtl_gen.core.controller import A_STRIDE_BITS, Controller
from rtl_gen.core.int4_lanes import unpack_int4
from rtl_gen.core.output_check import OutputCheck
from rtl_gen.core.output_stage import OutputStage
from rtl_gen.core.pe import Fault, pe_cell_format, pe_format

__all__ = ["Accelerator", "top_name"]



def top_name(config: ArrayConfig, fault: Fault | None = None) -> str:
    """Verilog module name of the design: ``accel_<config_hash>`` (``_<fault tag>`` if faulty)."""
    name = f"accel_{config.config_hash}"
    return name if fault is None else f"{name}_{fault.tag}"


class Accelerator(AcceleratorPaths):
    """A TPU-style accelerator that runs a buffer-resident tiled GEMM after one ``start``.

    See the module docstring of ``rtl_gen.core.accelerator`` (re-exported as ``rtl_gen.PORT_MAP``) for the
    ports, timing and buffer layouts.

    With ``checksum = "detect"`` two more outputs (``rtl_gen.core.checksum``): ``sdc`` (1), a
    checksum mismatch since ``start``, final ``CHECK_LATENCY`` cycles after ``done``, and
    ``sdc_count`` (16), the mismatching output words since ``start``, and ``sdc_event`` (1),
    high in each cycle an output word mismatches (at the latest the cycle after ``done``). And the
    output stage's check (``rtl_gen.core.output_check``): ``host_qcheck`` (1, in), presented with
    ``host_addr``/``host_qsel``: this read's requantised word is used, compare it; ``sdc_qevent``
    (1), high when that word leaves the output stage ``QDATA_LATENCY`` cycles later and differs
    from the duplicate stage's.

    Args:
        config: the design.
        fault: test-only stuck product bit in one PE (:class:`Fault`), or ``None``.
        group_rows: rows per row group of the array (see ``SystolicArray``; default 1).
        group_factory: builds row group ``g`` (default ``PERow``/``PEBlock``); the
            hierarchical Verilog export passes ``Blackbox`` es.

    Raises:
        ConfigError: a buffer too small for one word, or a fault outside the array.
    """

    def __init__(
        self,
        config: ArrayConfig,
        *,
        fault: Fault | None = None,
        group_rows: int = 1,
        group_factory: Callable[[int], wiring.Component] | None = None,
    ) -> None:
        self.config = config
        self.group_rows = group_rows
        self.group_factory = group_factory
        self.layout: BufferLayout = buffer_layout(config)
        if fault is not None:
            fault.check(config.rows, config.cols, config.input_bits, pe_cell_format(config))
        self.fault = fault
        if config.checksum != "none":
            check_dataflow(config.dataflow)
        self.array: SystolicArray | None = None
        self.checksum: ChecksumUnit | None = None
        self.output_stage: OutputStage | None = None
        self.output_check: OutputCheck | None = None
        self.banks: dict[str, list[memory.Memory]] = {}  # per buffer, as elaborated (fault injection)
        lay = self.layout
        sdc = {"sdc": Out(1), "sdc_count": Out(COUNT_BITS), "sdc_event": Out(1), "host_qcheck": In(1),
               "sdc_qevent": Out(1)} if config.checksum != "none" else {}
        # the vector unit's ports into the ifmap (rtl_gen.soc.system; designs with vector_unit only)
        iw, ia = lay.ifmap.width, lay.ifmap.addr_bits
        vec = {"vec_rd_addr": In(ia), "vec_rd_data": Out(iw), "vec_rd2_addr": In(ia), "vec_rd2_data": Out(iw),
               "vec_we": In(1), "vec_wr_addr": In(ia), "vec_wr_data": In(iw),
               "host_irdata": Out(iw)} if config.vector_unit else {}
        super().__init__(
            {
                "host_sel": In(2),
                "host_addr": In(lay.host_addr_bits),
                "host_wdata": In(lay.host_data_bits),
                "host_we": In(1),
                "host_rdata": Out(lay.ofmap.width),
                "host_qsel": In(lay.qparam.addr_bits),
                "host_qdata": Out(config.cols * config.input_bits),
                "m": In(DIM_BITS),
                "k": In(DIM_BITS),
                "n": In(DIM_BITS),
                "accumulate": In(1),
                "x_base": In(self._roles()[0].addr_bits),
                "y_base": In(self._roles()[1].addr_bits),
                "o_base": In(lay.ofmap.addr_bits),
                "a_stride": In(A_STRIDE_BITS),
                "move_we": In(1),
                "move_addr": In(lay.ifmap.addr_bits),
                "host_overlap": In(1),
                "window": In(1),
                **{name: In(signed(FIELDS[name][1]) if name in SIGNED_WINDOW_FIELDS else FIELDS[name][1])
                   for name in WINDOW_FIELDS},
                "window_error": Out(1),
                "start": In(1),
                "busy": Out(1),
                "done": Out(1),
                "cycles": Out(CYCLES_BITS),
                **sdc,
                **vec,
            }
        )

    @property
    def ofmap_halves(self) -> int:
        """Words per half of the ofmap when it is two ping-pong memories (double buffered), else 0."""
        return self.layout.ofmap.depth // 2 if self.config.double_buffered and self.layout.ofmap.depth >= 2 else 0

    @property
    def can_move(self) -> bool:
        """Whether a requantised ofmap word is an ifmap word (equal lanes: ``R == C``, or IS)."""
        return self.layout.ifmap.elems == self.config.cols

    @property
    def name(self) -> str:
        """Verilog module name (see :func:`top_name`)."""
        return top_name(self.config, self.fault)

    def _roles(self) -> tuple[BufferGeometry, BufferGeometry]:
        """``(x buffer, y buffer)`` of this dataflow."""
        lay = self.layout
        if self.config.dataflow is Dataflow.IS:
            return lay.weight, lay.ifmap
        return lay.ifmap, lay.weight

    def register_stages(self) -> dict[int, int]:
        """Registers outside the PEs and the controller, as ``{width in bits: count}``.

        The x and y bank controls on tapped delay lines and the banks' read-valid flags, the
        ofmap bank controls (address, enable, add), the column strobes, the first-operand
        marker (OS or shadow) and the OS result register.
        """
        cfg = self.config
        r, c = cfg.rows, cfg.cols
        x_geo, y_geo = self._roles()
        counts: dict[int, int] = {}

        def add(width: int, count: int) -> None:
            if count:
                counts[width] = counts.get(width, 0) + count

        add(x_geo.addr_bits + 1, r - 1)
        add(1, r)
        add(y_geo.addr_bits + 1, c - 1)
        add(1, c)
        add(self.layout.ofmap.addr_bits + 2, c)
        add(x_geo.addr_bits + y_geo.addr_bits + self.layout.ofmap.addr_bits, 1)  # the run's base addresses
        if self.ofmap_halves:
            add(1, 1)  # half of the host's ofmap read
        add(2 if cfg.shadow_stationary else 1, c - 1)  # column strobes (and phases)
        if cfg.dataflow is Dataflow.OS or cfg.shadow_stationary:
            add(1, r - 1)  # first-operand marker delay line
        if cfg.dataflow is Dataflow.OS:
            add(cfg.acc_bits, 1 * c)  # OS result register, one acc_bits register per lane
        return counts

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, lay = self.config, self.layout
        ib = cfg.input_bits
        x_geo, y_geo = self._roles()
        self.banks = {}
        m.submodules.array = array = SystolicArray.from_config(
            cfg, fault=self.fault, group_rows=self.group_rows, group_factory=self.group_factory, skew=False
        )
        self.array = array
        m.submodules.ctrl = ctrl = Controller(
            rows=cfg.rows,
            cols=cfg.cols,
            dataflow=cfg.dataflow,
            x_addr_bits=x_geo.addr_bits,
            y_addr_bits=y_geo.addr_bits,
            o_addr_bits=lay.ofmap.addr_bits,
            shadow=cfg.shadow_stationary,
            max_groups=self.max_groups,
        )
        busy = ctrl.busy
        bases = {}
        for name, width in (("x", x_geo.addr_bits), ("y", y_geo.addr_bits), ("o", lay.ofmap.addr_bits)):
            bases[name] = reg = Signal(width, name=f"{name}_base_run")
            with m.If(self.start & ~busy):
                m.d.sync += reg.eq(getattr(self, f"{name}_base"))
        m.d.comb += [
            ctrl.start.eq(self.start),
            ctrl.m.eq(self.m),
            ctrl.k.eq(self.k),
            ctrl.n.eq(self.n),
            ctrl.accumulate.eq(self.accumulate),
            ctrl.a_stride.eq(self.a_stride),
            ctrl.window.eq(self.window),
            *(getattr(ctrl, name).eq(getattr(self, name)) for name in WINDOW_FIELDS),
            self.busy.eq(busy),
            self.done.eq(ctrl.done),
            self.cycles.eq(ctrl.cycles),
            array.first.eq(ctrl.first),
        ]
        # Column c's strobe (WS/IS load, OS drain) runs c cycles after column 0's, like its banks.
        strobe = Cat(ctrl.shift, ctrl.phase) if cfg.shadow_stationary else ctrl.shift
        strobes = self._lane_controls(m, "shift_ctl", strobe, cfg.cols)
        m.d.comb += array.shift.eq(Cat(*(tap[0] for tap in strobes)))
        if cfg.shadow_stationary:
            m.d.comb += array.phase.eq(Cat(*(tap[1] for tap in strobes)))

        x_addr, x_en = self._window_reads(m, ctrl, bases["x"], x_geo)
        # Tap packing: the lane groups a window read keeps ride with its address (x lanes only).
        keep = None
        if self.max_groups > 1:
            groups, pack = Signal(self.max_groups), Signal.like(ctrl.x_pack)
            m.d.comb += [groups.eq(Mux(ctrl.x_win, ctrl.x_groups, (1 << self.max_groups) - 1)),
                         pack.eq(Mux(ctrl.x_win, ctrl.x_pack, 0))]
            keep = Cat(groups, pack)
        # Operand buffers, one bank per lane; the host writes a whole word (all banks) at once.
        for role, geo, addr, en, target in (
            ("x", x_geo, x_addr, x_en, array.x),
            ("y", y_geo, (ctrl.y_addr + bases["y"])[:len(ctrl.y_addr)], ctrl.y_en, array.y),
        ):
            host_we = self.host_we & (self.host_sel == HOST_SEL[geo.name]) & (~busy | self.host_overlap)
            extra = keep if role == "x" and keep is not None else None
            controls = self._lane_controls(m, f"{role}_ctl", Cat(addr, en, *([extra] if extra is not None else [])),
                                           geo.elems)
            for lane in range(geo.elems):
                mem = memory.Memory(shape=geo.bits, depth=geo.mem_depth, init=[])
                m.submodules[f"{geo.name}_bank{lane}"] = mem
                self.banks.setdefault(geo.name, []).append(mem)
                bits = slice(lane * geo.bits, (lane + 1) * geo.bits)
                # The array's lane (input_bits); a packed int4 bank (4-bit lanes) is sign-extended into it.
                lane_bits = slice(lane * ib, lane * ib + geo.bits)
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(self.host_addr), wp.data.eq(self.host_wdata[bits]), wp.en.eq(host_we)]
                if geo.name == "ifmap" and self.can_move:  # a MOVE's requantised word, lane for lane
                    with m.If(self.move_we):  # (packed: the low nibble, the output stage saturated to int4)
                        m.d.comb += [wp.addr.eq(self.move_addr), wp.data.eq(self.host_qdata[lane_bits]),
                                     wp.en.eq(1)]
                if geo.name == "ifmap" and cfg.vector_unit:
                    self._vector_ports(m, mem, bits)
                ctl = controls[lane]
                if extra is not None:
                    ctl = Cat(ctl[:len(addr)], ctl[len(addr)] & self._lane_kept(ctl[len(addr) + 1:], lane, geo.elems))
                rp = mem.read_port()
                m.d.comb += [rp.addr.eq(ctl[:-1]), rp.en.eq(ctl[-1])]
                valid = Signal(name=f"{role}_valid_{lane}")
                m.d.sync += valid.eq(ctl[-1])
                m.submodules[f"{role}_gate{lane}"] = gate = OperandGate(width=geo.bits)
                value = gate.o_data if geo.bits == ib else unpack_int4(gate.o_data, 1)
                m.d.comb += [gate.i_data.eq(rp.data), gate.valid.eq(valid),
                             target[lane * ib:(lane + 1) * ib].eq(value)]

        # ofmap banks: read-modify-write by the controller while busy, else the host's port.
        # Lane c reads c cycles after lane 0 and writes (with the add flag of that read) the
        # cycle after its read.
        o_geo = lay.ofmap
        m.submodules.update = update = OfmapUpdate(lanes=cfg.cols, acc_bits=cfg.acc_bits,
                                                      number_format=pe_format(cfg.weight_fmt, cfg.act_fmt))
        ao = o_geo.addr_bits
        o_addr = (ctrl.o_rd_addr + bases["o"])[:ao]
        taps = self._lane_controls(m, "o_ctl", Cat(o_addr, ctrl.o_rd_en, ctrl.o_add), cfg.cols + 1)
        rd_ctl, wr_ctl = taps[:-1], taps[1:]
        m.d.comb += [
            update.result.eq(array.result),
            update.add.eq(Cat(*(wr[ao + 1] for wr in wr_ctl))),
            update.host.eq(self.host_wdata),
            update.busy.eq(busy),
        ]
        host_o_we = self.host_we & (self.host_sel == HOST_SEL["ofmap"])
        half = self.ofmap_halves
        # Double buffered: two memories per lane, words [0, H) and [H, 2H); the run owns the half
        # of its o_base, the host port (the DMA) the other one, so stores overlap the next run.
        run_half = bases["o"] >= half if half else Const(0)
        host_half = self.host_addr >= half if half else Const(0)
        host_half_q = Signal()
        if half:
            m.d.sync += host_half_q.eq(host_half)
        for lane in range(cfg.cols):
            bits = slice(lane * o_geo.bits, (lane + 1) * o_geo.bits)
            old, host = [], []
            for h in range(2 if half else 1):
                mem = memory.Memory(shape=o_geo.bits, depth=max(2, half) if half else o_geo.mem_depth, init=[])
                m.submodules[f"ofmap_bank{lane}" + (f"_h{h}" if half else "")] = mem
                self.banks.setdefault("ofmap", []).append(mem)
                rp = mem.read_port()
                wp = mem.write_port()
                offset = h * half
                local = len(rp.addr)
                m.d.comb += wp.data.eq(update.new[bits])
                old.append(rp.data)
                host.append(rp.data)
                mine = busy & (run_half == h) if half else busy
                with m.If(mine):
                    m.d.comb += [
                        rp.addr.eq((rd_ctl[lane][:ao] - offset)[:local]),
                        rp.en.eq(rd_ctl[lane][ao]),
                        wp.addr.eq((wr_ctl[lane][:ao] - offset)[:local]),
                        wp.en.eq(wr_ctl[lane][ao]),
                    ]
                with m.Else():
                    m.d.comb += [rp.addr.eq((self.host_addr - offset)[:local]), rp.en.eq(1),
                                 wp.addr.eq((self.host_addr - offset)[:local]),
                                 wp.en.eq(host_o_we & (host_half == h if half else 1))]
            if half:
                m.d.comb += [update.old[bits].eq(Mux(run_half, old[1], old[0])),
                             self.host_rdata[bits].eq(Mux(host_half_q, host[1], host[0]))]
            else:
                m.d.comb += [update.old[bits].eq(old[0]), self.host_rdata[bits].eq(host[0])]
        self._output_stage(m, busy)
        if cfg.checksum != "none":
            self._checksum(m, array, strobes[-1], busy)
        return m
