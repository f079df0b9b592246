"""The accelerator's paths around its array and buffers (``rtl_gen.core.accelerator``'s docstring
has the ports and their timing): the x buffer's window reads, the lanes a tap-packed read keeps,
the lanes' tapped control delay lines, the vector unit's ports into the ifmap, the qparam buffer
with the output stage (and its check) behind ``host_rdata``, and the checksum unit's wiring.
:class:`Accelerator` builds its datapath from these.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import memory, wiring
from amaranth.utils import exact_log2

from accel_spec.config import Dataflow
from accel_spec.isa import axi_data_bytes, store_read_latency
from rtl_gen.core.array import SystolicArray
from rtl_gen.core.buffer_layout import BufferGeometry
from rtl_gen.core.checksum import ChecksumUnit
from rtl_gen.core.controller import Controller
from rtl_gen.core.output_check import OutputCheck
from rtl_gen.core.output_stage import OutputStage
from rtl_gen.core.pe import pe_format
from rtl_gen.core.skew import DelayLine

__all__ = ["AcceleratorPaths", "HOST_SEL", "QDATA_LATENCY"]

#: Values of ``host_sel``.
HOST_SEL = {"ifmap": 0, "weight": 1, "ofmap": 2, "qparam": 3}
#: Cycles from ``host_addr``/``host_qsel`` to ``host_qdata`` (buffer read + output stage).
QDATA_LATENCY = store_read_latency(True)


class AcceleratorPaths(wiring.Component):
    """The paths :class:`rtl_gen.core.accelerator.Accelerator` builds around its array and buffers
    (module docstring); its base class, holding no state of its own."""

    # the units the paths build, as elaborated (Accelerator.__init__ sets them to None)
    checksum: ChecksumUnit | None
    output_stage: OutputStage | None
    output_check: OutputCheck | None

    def _vector_ports(self, m: Module, mem: memory.Memory, bits: slice) -> None:
        """One ifmap bank's ports for the vector unit: its two operand reads and its result write
        (a write port of its own, so a LOAD into the ifmap may overlap it), and the read a STORE
        of the ifmap takes (at ``host_addr``, one cycle like the ofmap's)."""
        for addr, data in ((self.vec_rd_addr, self.vec_rd_data), (self.vec_rd2_addr, self.vec_rd2_data),
                           (self.host_addr, self.host_irdata)):
            rp = mem.read_port()
            m.d.comb += [rp.addr.eq(addr), rp.en.eq(1), data[bits].eq(rp.data)]
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(self.vec_wr_addr), wp.data.eq(self.vec_wr_data[bits]), wp.en.eq(self.vec_we)]

    def _window_reads(self, m: Module, ctrl: Controller, base: Value, geo: BufferGeometry) -> tuple[Value, Value]:
        """The x buffer's word address and read enable: the controller's packed address plus the
        run's base, or, in a window run, the address generator's word plus the base, not read for a
        pad or a word outside the buffer (that sets ``window_error`` until the next start)."""
        packed = (ctrl.x_addr + base)[:len(ctrl.x_addr)]
        if self.config.dataflow is not Dataflow.WS:
            m.d.comb += self.window_error.eq(0)
            return packed, ctrl.x_en
        word = Signal(signed(len(ctrl.x_win_addr) + 1))
        outside = Signal()
        m.d.comb += [word.eq(ctrl.x_win_addr + base), outside.eq((word < 0) | (word >= geo.depth))]
        error = Signal()
        with m.If(self.start & ~ctrl.busy):
            m.d.sync += error.eq(0)
        with m.Elif(ctrl.x_win & ctrl.x_en & ~ctrl.x_pad & outside):
            m.d.sync += error.eq(1)
        m.d.comb += self.window_error.eq(error)
        addr = Mux(ctrl.x_win, word[:len(ctrl.x_addr)], packed)
        return addr, ctrl.x_en & ~(ctrl.x_win & (ctrl.x_pad | outside))

    def _checksum(self, m: Module, array: SystolicArray, strobe: Value, busy: Value) -> None:
        """The checksum column and comparator (``rtl_gen.core.checksum``), cleared at each start."""
        cfg = self.config
        m.submodules.checksum = unit = ChecksumUnit(rows=cfg.rows, cols=cfg.cols, dataflow=cfg.dataflow,
                                                    input_bits=cfg.input_bits, acc_bits=cfg.acc_bits,
                                                    shadow=cfg.shadow_stationary)
        self.checksum = unit
        was_busy = Signal()  # the run's last word is compared in the cycle after done
        m.d.sync += was_busy.eq(busy)
        m.d.comb += [unit.y.eq(array.y), unit.shift.eq(strobe[0]), unit.a_edge.eq(array.a_edge),
                     unit.result.eq(array.result), unit.clear.eq(self.start & ~busy), unit.active.eq(busy | was_busy),
                     self.sdc.eq(unit.mismatch), self.sdc_count.eq(unit.count), self.sdc_event.eq(unit.event)]
        if cfg.shadow_stationary:
            m.d.comb += [unit.phase.eq(strobe[1]), unit.f_edge.eq(array.f_edge)]

    def _output_stage(self, m: Module, busy: Value) -> None:
        """The qparam buffer and the output stage behind ``host_rdata`` (module docstring)."""
        cfg, q_geo = self.config, self.layout.qparam
        m.submodules.qparam = mem = memory.Memory(shape=q_geo.width, depth=q_geo.mem_depth, init=[])
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(self.host_addr), wp.data.eq(self.host_wdata[:q_geo.width]),
                     wp.en.eq(self.host_we & (self.host_sel == HOST_SEL["qparam"]) & (~busy | self.host_overlap))]
        rp = mem.read_port()
        m.d.comb += [rp.addr.eq(self.host_qsel), rp.en.eq(1)]
        m.submodules.output_stage = stage = OutputStage(lanes=cfg.cols, acc_bits=cfg.acc_bits,
                                                        out_bits=cfg.input_bits,
                                                        number_format=pe_format(cfg.weight_fmt, cfg.act_fmt))
        params = rp.data if q_geo.elems == cfg.cols else Cat(*([rp.data] * cfg.cols))
        m.d.comb += [stage.acc.eq(self.host_rdata), stage.params.eq(params), self.host_qdata.eq(stage.q)]
        self.output_stage = stage
        if cfg.checksum != "none":  # the duplicate stage, compared word by word (rtl_gen.core.output_check)
            m.submodules.output_check = check = OutputCheck(lanes=cfg.cols, acc_bits=cfg.acc_bits,
                                                            out_bits=cfg.input_bits, latency=QDATA_LATENCY)
            self.output_check = check
            m.d.comb += [check.acc.eq(self.host_rdata), check.params.eq(params), check.q.eq(stage.q),
                         check.check.eq(self.host_qcheck), self.sdc_qevent.eq(check.event)]

    def _lane_kept(self, keep: Value, lane: int, lanes: int) -> Value:
        """Whether ``lane`` of a tap-packed read is kept: its group's bit of ``keep`` (the groups,
        then the run's ``pack``); ``T = 2 ** pack`` groups of ``lanes / T`` lanes."""
        groups, pack = keep[:self.max_groups], keep[self.max_groups:]
        kept = groups[0]
        for p in range(1, exact_log2(self.max_groups) + 1):
            kept = Mux(pack >= p, groups[lane >> (exact_log2(lanes) - p)], kept)
        return kept

    @property
    def max_groups(self) -> int:
        """Lane groups a tap-packed ifmap word may hold: its AXI beats (a WS design; 1: no packing).
        A packed pixel is a narrow word of whole beats, so a word holds at most a pixel a beat."""
        cfg = self.config
        if cfg.dataflow is not Dataflow.WS or cfg.rows & (cfg.rows - 1):
            return 1
        bus = axi_data_bytes(cfg.rows, cfg.cols, cfg.input_bits, cfg.dram_bytes_per_cycle,
                             cfg.dataflow is Dataflow.IS)
        return max(1, cfg.rows * cfg.input_bits // 8 // bus)

    @staticmethod
    def _lane_controls(m: Module, name: str, control: Value, lanes: int) -> list[Value]:
        """``control`` for each lane, delayed by the lane index (a tapped delay line)."""
        if lanes == 1:
            return [control] * lanes
        m.submodules[name] = line = DelayLine(taps=lanes, width=len(control))
        m.d.comb += line.i_data.eq(control)
        w = len(control)
        return [line.o_taps[i * w : (i + 1) * w] for i in range(lanes)]
