"""The control registers: an AXI4-Lite slave over ``rtl_gen.soc.regmap.CONTROL_REGMAP``.

Bus side: AXI4-Lite, 32-bit data, 12-bit byte address (``s_axil_*`` ports, the names
cocotbext-axi's ``AxiLiteBus.from_prefix(dut, "s_axil")`` looks for; no ``*prot``). The
address is decoded on bits 11:2 (bits 1:0 are ignored, WSTRB selects the bytes).

* Write: AW and W are accepted independently, in either order or in the same cycle, each
  into a one-entry holding register (``awready``/``wready`` are high while it is empty). The
  cycle after both are held the write takes effect and ``bvalid`` rises; the holding
  registers refill only after the response is taken (``bvalid & bready``), so at most one
  address and one data beat wait behind an unaccepted response.
* Read: ``arready`` is high while no response waits; the read is decoded in the cycle AR is
  accepted and ``rdata``/``rresp`` are registered, so they hold still until ``rready``.
* Responses: OKAY for every register address, SLVERR for an address with no register (a
  write there changes nothing, a read returns 0). Writes to RO registers are ignored, reads
  of WO registers return 0, both OKAY.
* RW registers honour WSTRB per byte; W1C and WO bits act only in strobed bytes.

Internal side (ports of the component, all synchronous to the one clock domain):

    start       out  1   one-cycle pulse after a write of CTRL.START = 1 while ``busy`` is low
    busy        in   1   a program is running (STATUS.BUSY)
    done        in   1   one-cycle pulse: the program finished
    error       in   1   one-cycle pulse: the program stopped; ``error_code``/``error_pc`` valid
    error_code  in   4   ``ErrorCode`` of the error, latched on ``error``
    error_pc    in   32  index of the failing command, latched on ``error``
    queue_base  out  64  QUEUE_BASE_HI:QUEUE_BASE_LO
    queue_len   out  32  QUEUE_LEN
    cycles_*    in   64  counters (total, compute, dma_stall), read as LO/HI: reading LO
                         snapshots bits 63:32, which HI then returns
    irq         out  1   level: high while any bit of IRQ_STATUS & IRQ_ENABLE is set

An event and a clear in the same cycle: the event wins (DONE/ERROR and IRQ_STATUS bits
end up set). START (accepted) and CLEAR clear STATUS.DONE/ERROR, ERROR_CODE and ERROR_PC.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import Dataflow
from accel_spec.errors import RtlError
from rtl_gen.soc.regmap import CONTROL_REGMAP, DATAFLOW_CODES, Register

__all__ = ["ControlRegisters", "AXIL_OKAY", "AXIL_SLVERR", "COUNTERS"]

#: AXI response codes.
AXIL_OKAY = 0b00
AXIL_SLVERR = 0b10
#: The 64-bit counters: port ``cycles_<name>``, registers ``CYCLES_<NAME>_LO``/``_HI``.
COUNTERS = ("total", "compute", "dma_stall")
_DATA_BITS = 32
_STRB_BITS = _DATA_BITS // 8


def _axil_members(addr_bits: int) -> dict[str, wiring.Member]:
    p = "s_axil_"
    return {
        f"{p}awaddr": In(addr_bits), f"{p}awvalid": In(1), f"{p}awready": Out(1),
        f"{p}wdata": In(_DATA_BITS), f"{p}wstrb": In(_STRB_BITS), f"{p}wvalid": In(1), f"{p}wready": Out(1),
        f"{p}bresp": Out(2), f"{p}bvalid": Out(1), f"{p}bready": In(1),
        f"{p}araddr": In(addr_bits), f"{p}arvalid": In(1), f"{p}arready": Out(1),
        f"{p}rdata": Out(_DATA_BITS), f"{p}rresp": Out(2), f"{p}rvalid": Out(1), f"{p}rready": In(1),
    }


class ControlRegisters(wiring.Component):
    """AXI4-Lite control/status registers of the accelerator (module docstring; the map is
    ``CONTROL_REGMAP``, documented in ``docs/registers.md``).

    Args:
        rows: PE rows (CONFIG_ROWS).
        cols: PE columns (CONFIG_COLS).
        dataflow: the dataflow (CONFIG_DATAFLOW: ws 0, os 1, is 2).
        axi_data_bytes: bytes per beat of the memory interface (CONFIG_AXI_DATA_BYTES).
        ifmap_depth: ifmap buffer words (CONFIG_IFMAP_DEPTH).
        weight_depth: weight buffer words (CONFIG_WEIGHT_DEPTH).
        ofmap_depth: ofmap buffer words (CONFIG_OFMAP_DEPTH).
        queue_depth: command-queue entries (CONFIG_QUEUE_DEPTH).

    Raises:
        RtlError: a constant that is not a positive integer below 2**32, or a dataflow that
            is not a ``Dataflow``.
    """

    def __init__(self, *, rows: int, cols: int, dataflow: Dataflow, axi_data_bytes: int, ifmap_depth: int,
                 weight_depth: int, ofmap_depth: int, queue_depth: int) -> None:
        if not isinstance(dataflow, Dataflow):
            raise RtlError(f"control registers dataflow must be a Dataflow (ws, os, is), not {dataflow!r}")
        constants = {"ROWS": rows, "COLS": cols, "AXI_DATA_BYTES": axi_data_bytes, "IFMAP_DEPTH": ifmap_depth,
                     "WEIGHT_DEPTH": weight_depth, "OFMAP_DEPTH": ofmap_depth, "QUEUE_DEPTH": queue_depth}
        for name, value in constants.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 32:
                raise RtlError(f"control registers {name.lower()} must be a positive integer below 2**32, "
                               f"not {value!r}")
        self.regmap = CONTROL_REGMAP
        self.dataflow = dataflow
        self.constants = {**constants, "DATAFLOW": DATAFLOW_CODES[dataflow.value]}
        code_bits = self.regmap["ERROR_CODE"].field("CODE").width
        super().__init__({
            **_axil_members(self.regmap.addr_bits),
            "start": Out(1), "busy": In(1), "done": In(1), "error": In(1),
            "error_code": In(code_bits), "error_pc": In(32),
            "sdc_event": In(1), "sdc_count": In(32), "sdc_pc": In(32), "sdc_stop": Out(1),
            "queue_base": Out(64), "queue_len": Out(32),
            **{f"cycles_{name}": In(64) for name in COUNTERS},
            "irq": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rmap = self.regmap
        word_lo = 2  # address bits below the register index

        # Storage: RW registers and the state behind the RO/W1C registers.
        rw = {reg.name: Signal(32, name=f"reg_{reg.name.lower()}") for reg in rmap if reg.access == "RW"}
        irq_status = Signal(rmap["IRQ_STATUS"].mask.bit_length())
        done_flag = Signal()
        error_flag = Signal()
        error_code = Signal(len(self.error_code))
        error_pc = Signal(32)
        snapshots = {name: Signal(32, name=f"snap_{name}") for name in COUNTERS}

        # What each readable register reads, bit-placed by the map.
        status = {"BUSY": self.busy, "DONE": done_flag, "ERROR": error_flag}
        sources: dict[str, dict[str, Value]] = {
            "STATUS": status,
            "ERROR_CODE": {"CODE": error_code},
            "ERROR_PC": {"PC": error_pc},
            "SDC_COUNT": {"COUNT": self.sdc_count},
            "SDC_PC": {"PC": self.sdc_pc},
            "IRQ_STATUS": {f.name: irq_status[i] for i, f in enumerate(rmap["IRQ_STATUS"].fields)},
            **{f"CONFIG_{k}": {rmap[f"CONFIG_{k}"].fields[0].name: Const(v, 32)} for k, v in self.constants.items()},
        }
        for name in COUNTERS:
            counter = getattr(self, f"cycles_{name}")
            sources[f"CYCLES_{name.upper()}_LO"] = {"VALUE": counter[:32]}
            sources[f"CYCLES_{name.upper()}_HI"] = {"VALUE": snapshots[name]}

        def read_value(reg: Register) -> Value:
            # One concatenation, not a signal assigned piecewise: no ``always @*`` block, which
            # Icarus would not evaluate at time 0 for inputs that never change.
            parts: list[Value] = []
            at = 0
            for f in sorted(reg.fields, key=lambda f: f.lsb):
                if reg.access == "RW":
                    src: Value = rw[reg.name][f.lsb:f.lsb + f.width]
                elif f.value is not None:
                    src = Const(f.value, f.width)
                elif reg.name in sources and f.name in sources[reg.name]:
                    src = sources[reg.name][f.name]
                else:
                    raise RtlError(f"control registers: no source for {reg.name}.{f.name}")
                parts += [Const(0, f.lsb - at), src[:f.width]]
                at = f.lsb + f.width
            return Cat(*parts, Const(0, 32 - at))

        m.d.comb += [
            self.queue_base.eq(Cat(rw["QUEUE_BASE_LO"], rw["QUEUE_BASE_HI"])),
            self.queue_len.eq(rw["QUEUE_LEN"]),
            self.sdc_stop.eq(rw["SDC_CTRL"][rmap["SDC_CTRL"].field("STOP").lsb]),
            self.irq.eq((irq_status & rw["IRQ_ENABLE"][:len(irq_status)]).any()),
        ]

        # --- write channel -----------------------------------------------------------------
        aw_held, w_held, bvalid, b_err = Signal(), Signal(), Signal(), Signal()
        aw_index = Signal(rmap.addr_bits - word_lo)
        w_data = Signal(_DATA_BITS)
        w_strb = Signal(_STRB_BITS)
        m.d.comb += [
            self.s_axil_awready.eq(~aw_held),
            self.s_axil_wready.eq(~w_held),
            self.s_axil_bvalid.eq(bvalid),
            self.s_axil_bresp.eq(Cat(Const(0, 1), b_err)),
        ]
        with m.If(self.s_axil_awvalid & ~aw_held):
            m.d.sync += [aw_held.eq(1), aw_index.eq(self.s_axil_awaddr[word_lo:])]
        with m.If(self.s_axil_wvalid & ~w_held):
            m.d.sync += [w_held.eq(1), w_data.eq(self.s_axil_wdata), w_strb.eq(self.s_axil_wstrb)]
        with m.If(bvalid & self.s_axil_bready):
            m.d.sync += bvalid.eq(0)

        bytes_mask = Cat(*(w_strb[i].replicate(8) for i in range(_STRB_BITS)))
        written = w_data & bytes_mask  # the strobed 1 bits (W1C and WO act on these)
        do_write = aw_held & w_held & ~bvalid
        ctrl = rmap["CTRL"]
        start_bit = written[ctrl.field("START").lsb]
        clear_bit = written[ctrl.field("CLEAR").lsb]
        w1c = Signal(len(irq_status))
        start_now = Signal()
        clear_now = Signal()
        with m.If(do_write):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), bvalid.eq(1), b_err.eq(0)]
            with m.Switch(aw_index):
                for reg in rmap:
                    with m.Case(reg.offset >> word_lo):
                        if reg.access == "RW":
                            keep = rw[reg.name] & ~bytes_mask
                            m.d.sync += rw[reg.name].eq((keep | written) & reg.mask)
                        elif reg.name == "IRQ_STATUS":
                            m.d.comb += w1c.eq(written[:len(w1c)])
                        elif reg.name == "CTRL":
                            m.d.comb += [start_now.eq(start_bit & ~self.busy), clear_now.eq(clear_bit)]
                with m.Default():
                    m.d.sync += b_err.eq(1)

        # --- events (an event wins over a clear in the same cycle) -------------------------
        m.d.sync += self.start.eq(start_now)
        irq_events = Cat(self.done, self.error, self.sdc_event)
        m.d.sync += irq_status.eq((irq_status & ~w1c) | irq_events)
        with m.If(start_now | clear_now):
            m.d.sync += [done_flag.eq(0), error_flag.eq(0), error_code.eq(0), error_pc.eq(0)]
        with m.If(self.done):
            m.d.sync += done_flag.eq(1)
        with m.If(self.error):
            m.d.sync += [error_flag.eq(1), error_code.eq(self.error_code), error_pc.eq(self.error_pc)]

        # --- read channel ------------------------------------------------------------------
        rvalid, r_err = Signal(), Signal()
        rdata = Signal(_DATA_BITS)
        m.d.comb += [
            self.s_axil_arready.eq(~rvalid),
            self.s_axil_rvalid.eq(rvalid),
            self.s_axil_rdata.eq(rdata),
            self.s_axil_rresp.eq(Cat(Const(0, 1), r_err)),
        ]
        with m.If(rvalid & self.s_axil_rready):
            m.d.sync += rvalid.eq(0)
        with m.If(self.s_axil_arvalid & ~rvalid):
            m.d.sync += [rvalid.eq(1), r_err.eq(0), rdata.eq(0)]
            with m.Switch(self.s_axil_araddr[word_lo:]):
                for reg in rmap:
                    with m.Case(reg.offset >> word_lo):
                        if reg.access != "WO":
                            m.d.sync += rdata.eq(read_value(reg))
                        for name in COUNTERS:
                            if reg.name == f"CYCLES_{name.upper()}_LO":
                                m.d.sync += snapshots[name].eq(getattr(self, f"cycles_{name}")[32:])
                with m.Default():
                    m.d.sync += r_err.eq(1)
        return m
