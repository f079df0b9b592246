"""The whole accelerator as an SoC block: AXI4 manager to DRAM, command queue, DMA, array.

:class:`AxiAccelerator` wraps the compute core (:class:`~rtl_gen.core.accelerator.Accelerator`, whose host
port becomes the DMA's port into the buffers) with the load and store DMA engines
(``rtl_gen.soc.dma``) on one AXI4 manager port ``m_axi_*`` and the command sequencer
(``rtl_gen.soc.sequencer``), controlled through the AXI4-Lite register block ``s_axil_*``
(``rtl_gen.soc.csr``, map in ``rtl_gen.soc.regmap``: start, status, error, queue base and length,
cycle counters, interrupt enable and status) with the level interrupt ``irq``. A design with
``vector_unit`` adds the vector unit (``rtl_gen.core.vector_unit``) on the ifmap buffer, run by
``VECTOR`` commands. Ports::

    m_axi_*    AXI4 manager, data width ``accel_spec.isa.axi_data_bytes``, one ID
    s_axil_*   AXI4-Lite subordinate, 32-bit data, 12-bit address
    irq        out, high while an enabled interrupt status bit is set (DONE, ERROR)

Software: write the program to DRAM, QUEUE_BASE_LO/HI and QUEUE_LEN, IRQ_ENABLE, then
CTRL.START; wait for ``irq`` (or poll STATUS); read the counters.

DRAM words (:mod:`accel_spec.isa`) become buffer words by wiring: inputs lane for lane,
raw accumulators truncated to ``acc_bits`` on loads and sign-extended on stores, qparam lanes
from their 16-byte DRAM form to the output stage's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from accel_spec import isa
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import OUTSTANDING, QUEUE_DEPTH, WINDOW_FIELDS, Buffer, axi_data_bytes, dram_lane_bytes
from accel_spec.vector_door import door_format
from rtl_gen.core.accelerator import Accelerator, top_name
from rtl_gen.core.int4_lanes import pack_int4
from rtl_gen.core.output_stage import param_fields
from rtl_gen.core.pe import Fault
from rtl_gen.core.vector_door import VectorDoor
from rtl_gen.core.vector_unit import VectorUnit
from rtl_gen.soc.axi import axi4_channels, axi4_signature
from rtl_gen.soc.csr import ControlRegisters
from rtl_gen.soc.dma import DmaLoad, DmaStore
from rtl_gen.soc.move import MOVE_FIELDS, MoveEngine
from rtl_gen.soc.sequencer import Sequencer

__all__ = ["AxiAccelerator", "system_name", "dram_word_bytes", "memory_system_units", "OUTSTANDING"]

#: The store engine's buffer read latency, raw and through the output stage (its timing contract).
STORE_LATENCIES = (isa.store_read_latency(False), isa.store_read_latency(True))


def system_name(config: ArrayConfig, fault: Fault | None = None) -> str:
    """Verilog module name of the SoC block: ``accel_axi_<config_hash>``."""
    return top_name(config, fault).replace("accel_", "accel_axi_", 1)


def dram_word_bytes(config: ArrayConfig) -> dict[str, int]:
    """Bytes of one buffer word in DRAM (``accel_spec.isa.dram_word_bytes`` of ``config``)."""
    return isa.dram_word_bytes(config.rows, config.cols, config.dataflow is Dataflow.IS, config.input_bits,
                                    config.acc_bits, config.packed_kinds)


def _lanes(word: Value, lane_bits: int, keep: int, count: int, *, signed_extend: bool = False) -> Value:
    """Lanes of ``lane_bits`` bits -> lanes of ``keep`` bits (truncate or sign-extend)."""
    out = []
    for i in range(count):
        lane = word[i * lane_bits:(i + 1) * lane_bits]
        if keep <= lane_bits:
            out.append(lane[:keep])
        else:
            out.append(Cat(lane, lane[-1].replicate(keep - lane_bits)) if signed_extend else Cat(lane, 0))
    return Cat(*out)


class AxiAccelerator(wiring.Component):
    """The SoC block of ``config`` (see the module docstring).

    Args:
        config: the design.
        fault: test-only fault in one PE.
        queue_depth: commands the command queue holds.
        outstanding: bursts in flight per DMA engine.
        core: the compute core (default ``Accelerator(config, fault=fault)``; the hierarchical
            Verilog export passes one built from row-group blackboxes).
        vector_factory: builds the vector unit of a design with ``vector_unit`` from ``lanes`` and
            ``addr_bits`` (default :class:`~rtl_gen.core.vector_unit.VectorUnit`; tests pass a broken one).
    """

    def __init__(self, config: ArrayConfig, *, fault: Fault | None = None, queue_depth: int = QUEUE_DEPTH,
                 outstanding: int = OUTSTANDING, core: Accelerator | None = None,
                 vector_factory: Callable[..., wiring.Component] = VectorUnit) -> None:
        self.config = config
        self.vector_factory = vector_factory
        self.fault = fault
        self.core = core if core is not None else Accelerator(config, fault=fault)
        self.data_bytes = axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                                         config.dataflow.value == "is", bool(config.packed_kinds))
        self.word_bytes = dram_word_bytes(config)
        self.beats = {k: v // self.data_bytes for k, v in self.word_bytes.items()}
        self.max_beats = max(self.beats.values())
        # Tap packing's sliding load (weight stationary, ifmap words of several beats; 0: none).
        self.slide_beats = self.beats["ifmap"] if self.beats["ifmap"] > 1 and config.dataflow is Dataflow.WS else 0
        self.word_lanes = isa.dram_word_lanes(config.rows, config.cols, config.dataflow is Dataflow.IS)
        self.queue_depth = queue_depth
        self.outstanding = outstanding
        members = axi4_signature(self.data_bytes).members
        lay = self.core.layout
        self.csr = ControlRegisters(rows=config.rows, cols=config.cols, dataflow=config.dataflow,
                                    axi_data_bytes=self.data_bytes, ifmap_depth=lay.ifmap.depth,
                                    weight_depth=lay.weight.depth, ofmap_depth=lay.ofmap.depth,
                                    queue_depth=queue_depth)
        csr_members = {name: member for name, member in self.csr.signature.members.items()
                       if name.startswith("s_axil_")}
        super().__init__({
            **{f"m_axi_{name}": member for name, member in members.items()},
            **csr_members,
            "irq": Out(1),
        })

    @property
    def name(self) -> str:
        """Verilog module name (see :func:`system_name`)."""
        return system_name(self.config, self.fault)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, lay, b, w = self.config, self.core.layout, self.beats, self.word_lanes
        m.submodules.core = core = self.core
        addr_bits = max(lay.host_addr_bits, 16)
        common = {"data_bytes": self.data_bytes, "max_beats": self.max_beats, "outstanding": self.outstanding,
                  "buf_addr_bits": addr_bits}
        m.submodules.dma_load = ld = DmaLoad(**common, slide_beats=self.slide_beats)
        m.submodules.dma_store = st = DmaStore(**common, latencies=STORE_LATENCIES)
        depths = (lay.ifmap.depth, lay.weight.depth, lay.ofmap.depth, lay.qparam.depth)
        m.submodules.seq = seq = Sequencer(
            data_bytes=self.data_bytes, depth=self.queue_depth,
            load_beats=(b["ifmap"], b["weight"], b["ofmap"], b["qparam"]), store_beats=(b["ofmap"], b["requant"]),
            load_lanes=(w["ifmap"], w["weight"], w["ofmap"], w["qparam"]), store_lanes=(w["ofmap"], w["requant"]),
            depths=depths, buf_addr_bits=addr_bits, max_beats=self.max_beats, can_move=core.can_move,
            can_window=cfg.dataflow is Dataflow.WS, output_check="sdc_qevent" in core.signature.members,
            vector_lanes=cfg.vector_lanes, max_pack=exact_log2(core.max_groups))
        m.submodules.move = mv = MoveEngine(latency=STORE_LATENCIES[1], src_bits=addr_bits, dst_bits=addr_bits)

        # AXI: the load engine drives AR/R, the store engine AW/W/B.
        m.d.comb += [self.m_axi_awid.eq(0), self.m_axi_arid.eq(0)]  # one ID; the responses' IDs are not looked at
        for engine, side in ((ld, "read"), (st, "write")):
            for name, member in axi4_channels(self.data_bytes, side).items():
                port, inner = getattr(self, f"m_axi_{name}"), getattr(engine, name)
                m.d.comb += port.eq(inner) if member.flow == Out else inner.eq(port)

        # Control: the register block.
        m.submodules.csr = csr = self.csr
        for name, member in csr.signature.members.items():
            if name.startswith("s_axil_"):
                outer, inner = getattr(self, name), getattr(csr, name)
                m.d.comb += inner.eq(outer) if member.flow == In else outer.eq(inner)
        m.d.comb += [
            seq.start.eq(csr.start), seq.queue_base.eq(csr.queue_base), seq.queue_len.eq(csr.queue_len),
            csr.busy.eq(seq.busy), csr.done.eq(seq.done), csr.error.eq(seq.error),
            csr.error_code.eq(seq.error_code), csr.error_pc.eq(seq.error_pc),
            csr.cycles_total.eq(seq.cycles_total), csr.cycles_compute.eq(seq.cycles_compute),
            csr.cycles_dma_stall.eq(seq.cycles_stall), self.irq.eq(csr.irq),
            seq.sdc_stop.eq(csr.sdc_stop), csr.sdc_count.eq(seq.sdc_count), csr.sdc_pc.eq(seq.sdc_pc),
        ]
        if "sdc_event" in core.signature.members:  # checksum designs (rtl_gen.core.checksum)
            m.d.comb += [seq.sdc_event.eq(core.sdc_event), seq.sdc_qevent.eq(core.sdc_qevent),
                         csr.sdc_event.eq((core.sdc_event | core.sdc_qevent) & seq.busy),
                         # the output stage's check: the words a requantising STORE or a MOVE reads
                         core.host_qcheck.eq((st.word_read & st.requanting) | mv.reading)]
        for engine, ctl in ((ld, seq.ld), (st, seq.st)):
            for name in ("start", "addr", "stride", "rows", "words", "beats", "buf_addr", "row_step", "word_step"):
                m.d.comb += getattr(engine, name).eq(getattr(ctl, name))
            m.d.comb += [ctl.busy.eq(engine.busy), ctl.axi_error.eq(engine.axi_error)]
        m.d.comb += [st.requant.eq(seq.st.requant), st.q_by_row.eq(seq.st.q_by_row), ld.slide.eq(seq.ld.slide)]
        for name in ("start", *MOVE_FIELDS):
            m.d.comb += getattr(mv, name).eq(getattr(seq.mv, name))
        m.d.comb += seq.mv.busy.eq(mv.busy)
        m.d.comb += [seq.cmd_we.eq(ld.word_we), seq.cmd_addr.eq(ld.word_addr), seq.cmd_data.eq(ld.word)]

        if cfg.vector_unit:
            self._vector_unit(m, core, seq, lay.ifmap.addr_bits)

        # The array.
        run = seq.run
        m.d.comb += [core.start.eq(run.start), core.m.eq(run.m), core.k.eq(run.k), core.n.eq(run.n),
                     core.accumulate.eq(run.accumulate), core.x_base.eq(run.x_base), core.y_base.eq(run.y_base),
                     core.o_base.eq(run.o_base), core.a_stride.eq(run.a_stride), run.busy.eq(core.busy),
                     core.host_overlap.eq(1), core.window.eq(run.window), run.window_error.eq(core.window_error),
                     *(getattr(core, name).eq(getattr(run, name)) for name in WINDOW_FIELDS)]

        # The core's host port is the DMA's: loads write, stores and moves read (one transfer at a
        # time); a move writes the ifmap through its own port.
        ib, ab = cfg.input_bits, cfg.acc_bits
        raw_lane = 8 * dram_lane_bytes(Buffer.OFMAP, ib, ab)
        q_lane = 128
        packed = cfg.packed_kinds

        # A packed int4 word goes in as it is: the buffers hold 4-bit lanes (ArrayConfig.buffer_bits).
        words = {
            Buffer.IFMAP: ld.word[:lay.ifmap.width],
            Buffer.WEIGHT: ld.word[:lay.weight.width],
            Buffer.OFMAP: _lanes(ld.word, raw_lane, ab, cfg.cols),
            Buffer.QPARAM: Cat(*(self._qparam_lane(ld.word[i * q_lane:(i + 1) * q_lane])
                                 for i in range(lay.qparam.elems))),
        }
        wdata = Signal(len(core.host_wdata))
        with m.Switch(seq.buffer):
            for code, value in words.items():
                with m.Case(code):
                    m.d.comb += wdata.eq(value)
        m.d.comb += [
            core.host_sel.eq(seq.buffer),
            core.host_addr.eq(Mux(ld.busy, ld.word_addr, Mux(mv.reading, mv.src_addr, st.word_addr))),
            core.host_we.eq(ld.word_we & ~seq.fetching),
            core.host_wdata.eq(wdata),
            core.host_qsel.eq(seq.q_base + Mux(mv.reading, mv.q_index, st.q_index)),
            core.move_we.eq(mv.dst_we), core.move_addr.eq(mv.dst),
            st.word.eq(Mux(st.requanting,
                           pack_int4(core.host_qdata, self.word_lanes["requant"]) if "requant" in packed
                           else core.host_qdata,
                           _lanes(core.host_rdata, ab, raw_lane, cfg.cols, signed_extend=True))),
        ]
        if cfg.vector_unit:  # a STORE of the ifmap: its words as they are loaded
            with m.If(seq.buffer == Buffer.IFMAP):
                m.d.comb += st.word.eq(core.host_irdata)
        return m

    def _vector_unit(self, m: Module, core: Accelerator, seq: Sequencer, addr_bits: int) -> None:
        """The vector unit (``rtl_gen.core.vector_unit``) on the ifmap: its ``VECTOR`` commands from
        the sequencer, its operand reads and result writes through the core's ``vec_*`` ports."""
        m.submodules.vector = vec = self.vector_factory(lanes=self.config.vector_lanes, addr_bits=addr_bits)
        ctl = seq.vec
        m.d.comb += [vec.start.eq(ctl.start), vec.kind.eq(ctl.kind),
                     vec.colmajor.eq(ctl.colmajor), vec.src.eq(ctl.src), vec.src2.eq(ctl.src2),
                     vec.dst.eq(ctl.dst), vec.rows.eq(ctl.rows), vec.words.eq(ctl.words), vec.n.eq(ctl.n),
                     vec.qrows.eq(ctl.qrows), vec.params.eq(ctl.params), ctl.busy.eq(vec.busy),
                     core.vec_rd_addr.eq(vec.rd_addr), core.vec_rd2_addr.eq(vec.rd2_addr),
                     core.vec_we.eq(vec.wr_en), core.vec_wr_addr.eq(vec.wr_addr)]
        fmt = door_format(self.config.act_fmt)
        if fmt is None:  # int8 activations: the unit reads and writes the ifmap's words as they are
            m.d.comb += [vec.rd_data.eq(core.vec_rd_data), vec.rd2_data.eq(core.vec_rd2_data),
                         core.vec_wr_data.eq(vec.wr_data)]
            return
        # other activation formats convert at the unit's door (rtl_gen.core.vector_door), combinationally
        m.submodules.vector_door = door = VectorDoor(lanes=self.config.vector_lanes, number_format=fmt)
        m.d.comb += [door.start.eq(ctl.start), door.kind.eq(ctl.kind),
                     door.buf_rd_data.eq(core.vec_rd_data), vec.rd_data.eq(door.unit_rd_data),
                     door.buf_rd2_data.eq(core.vec_rd2_data), vec.rd2_data.eq(door.unit_rd2_data),
                     door.unit_wr_data.eq(vec.wr_data), core.vec_wr_data.eq(door.buf_wr_data)]

    def _qparam_lane(self, lane: Value) -> Value:
        """A 16-byte DRAM qparam lane -> the output stage's parameter fields (low bits first)."""
        at = {"bias": 0, "multiplier": 32, "shift": 64, "zero_point": 80, "act_min": 96, "act_max": 112}
        return Cat(*(lane[at[name]:at[name] + bits] for name, bits in param_fields(self.config.input_bits)))



def memory_system_units(config: ArrayConfig) -> list[tuple[str, dict[str, Any], Callable[[], wiring.Component]]]:
    """The SoC block's parts outside the core, as it builds them: ``(name, parameters, build)``
    for the load and store DMA engines, the on-chip move engine, the sequencer (with a 2-command
    queue: synthesis and the area model price the queue as SRAM) and the control registers."""
    soc = AxiAccelerator(config, queue_depth=2)
    lay, b = soc.core.layout, soc.beats
    for unit in (soc, soc.core, soc.csr):
        unit._MustUse__silence = True  # type: ignore[attr-defined]  # parameters only, never elaborated
    common = {"data_bytes": soc.data_bytes, "max_beats": soc.max_beats, "outstanding": soc.outstanding,
              "buf_addr_bits": max(lay.host_addr_bits, 16)}
    depths = (lay.ifmap.depth, lay.weight.depth, lay.ofmap.depth, lay.qparam.depth)
    seq = {"data_bytes": soc.data_bytes, "depth": 2, "load_beats": (b["ifmap"], b["weight"], b["ofmap"], b["qparam"]),
           "store_beats": (b["ofmap"], b["requant"]), "depths": depths,
           "load_lanes": tuple(soc.word_lanes[k] for k in ("ifmap", "weight", "ofmap", "qparam")),
           "store_lanes": (soc.word_lanes["ofmap"], soc.word_lanes["requant"]),
           "buf_addr_bits": common["buf_addr_bits"],
           "max_beats": soc.max_beats, "can_move": soc.core.can_move, "can_window": config.dataflow is Dataflow.WS,
           "max_pack": exact_log2(soc.core.max_groups),
           **({"vector_lanes": config.vector_lanes} if config.vector_unit else {})}
    move = {"latency": STORE_LATENCIES[1], "src_bits": common["buf_addr_bits"], "dst_bits": common["buf_addr_bits"]}
    csr = {"rows": config.rows, "cols": config.cols, "dataflow": config.dataflow, "axi_data_bytes": soc.data_bytes,
           "ifmap_depth": lay.ifmap.depth, "weight_depth": lay.weight.depth, "ofmap_depth": lay.ofmap.depth,
           "queue_depth": QUEUE_DEPTH}
    return [
        ("dma_load", common, lambda: DmaLoad(**common, slide_beats=soc.slide_beats)),
        ("dma_store", {**common, "latencies": STORE_LATENCIES},
         lambda: DmaStore(**common, latencies=STORE_LATENCIES)),
        ("move", move, lambda: MoveEngine(**move)),
        ("sequencer", seq, lambda: Sequencer(**seq)),  # type: ignore[arg-type]
        ("control_registers", {**csr, "dataflow": config.dataflow.value}, lambda: ControlRegisters(**csr)),  # type: ignore[arg-type]
    ]
