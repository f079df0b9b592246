"""The simulation top: the SoC block with the DRAM model on its AXI4 port (testbenches only)."""

from __future__ import annotations

import re
from typing import Any

from amaranth import ClockDomain, ClockSignal, DomainRenamer, Module, ResetSignal, Signal
from amaranth.lib import wiring

from accel_spec.config import ArrayConfig
from rtl_gen.core.pe import Fault
from rtl_gen.soc.axi import axi4_signature
from rtl_gen.soc.dram_model import DramModel
from rtl_gen.soc.system import AxiAccelerator, system_name

__all__ = ["SimSystem", "sim_name", "with_file_backdoor", "BACKDOOR"]

#: The file backdoor of the simulation top's DRAM model (:func:`with_file_backdoor`): registers
#: ``cmd``, ``lo``, ``hi`` of module ``<top>.dram`` and the files (in the simulator's working
#: directory) that command ``load`` reads and command ``dump`` writes at a clock edge.
BACKDOOR = {"cmd": "bd_cmd", "lo": "bd_lo", "hi": "bd_hi", "load": 1, "dump": 2,
            "load_file": "dram_load.hex", "dump_file": "dram_dump.hex"}


def sim_name(config: ArrayConfig, fault: Fault | None = None) -> str:
    """Verilog module name of the simulation top."""
    return system_name(config, fault).replace("accel_axi_", "accel_sim_", 1)


class SimSystem(wiring.Component):
    """:class:`AxiAccelerator` + :class:`DramModel` (``dram_words`` words, ``latency`` cycles,
    ``stall_seed`` for back-pressure, ``rate`` ``(num, den)`` bytes a cycle for a paced memory).

    Ports: the accelerator's ``s_axil_*`` and ``irq``, and the DRAM model's backdoor ``bd_*``.

    The reset input ``rst`` reaches the design through one register (``rst_q``; the design leaves
    reset one cycle after ``rst`` falls). So no logic of the design depends combinationally on a
    top-level port but the register block's and the DRAM backdoor's, and Verilator evaluates the
    array's next-state logic once a clock edge instead of on every call of its ``eval()`` (it
    re-evaluates everything reachable from a top-level input on each call, which the testbench
    makes several times a cycle): measured in ``bench/sim_scaling.py``.
    """

    def __init__(self, config: ArrayConfig, *, latency: int, dram_words: int, fault: Fault | None = None,
                 stall_seed: int = 0, rate: tuple[int, int] | None = None, **kwargs: Any) -> None:
        self.soc = AxiAccelerator(config, fault=fault, **kwargs)
        self.dram = DramModel(data_bytes=self.soc.data_bytes, words=dram_words, latency=latency,
                              stall_seed=stall_seed, rate=rate)
        self.config = config
        self.fault = fault
        members = {name: member for name, member in self.soc.signature.members.items()
                   if name.startswith("s_axil_") or name == "irq"}
        members.update({name: member for name, member in self.dram.signature.members.items()
                        if name.startswith("bd_")})
        super().__init__(members)

    @property
    def name(self) -> str:
        """Verilog module name (see :func:`sim_name`)."""
        return sim_name(self.config, self.fault)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        # The design runs in domain "live": the same clock, reset from a register of ``rst``.
        m.domains.live = live = ClockDomain("live", local=True)
        rst_q = Signal(reset_less=True)
        m.d.sync += rst_q.eq(ResetSignal("sync"))
        m.d.comb += [live.clk.eq(ClockSignal("sync")), live.rst.eq(rst_q)]
        soc, dram = self.soc, self.dram
        m.submodules.soc = DomainRenamer("live")(soc)
        m.submodules.dram = DomainRenamer("live")(dram)
        for name in self.signature.members:
            inner = getattr(dram if name.startswith("bd_") else soc, name)
            outer = getattr(self, name)
            flow = self.signature.members[name].flow
            m.d.comb += inner.eq(outer) if flow == wiring.In else outer.eq(inner)
        for name, member in axi4_signature(soc.data_bytes).members.items():
            port, sub = getattr(soc, f"m_axi_{name}"), getattr(dram.axi, name)
            m.d.comb += sub.eq(port) if member.flow == wiring.Out else port.eq(sub)
        return m




def with_file_backdoor(verilog: str, top: str) -> str:
    """``verilog`` of the simulation top ``top`` with a file backdoor added to its DRAM model.

    At a rising clock edge with register ``bd_cmd`` (of module ``<top>.dram``) = ``load`` the
    model's word array takes the words of ``dram_load.hex`` (``$readmemh``: hex words, one a
    line, ``@<word address>`` lines between runs); with ``dump`` it writes words ``bd_lo ..
    bd_hi`` to ``dram_dump.hex`` (``$writememh``). So a testbench loads and reads a whole image in
    one clock cycle instead of one cycle a word through the ``bd_*`` port (see :data:`BACKDOOR`).
    Simulation only; the design's own logic is untouched.

    Raises:
        RtlError: the DRAM model's array or clock is not where Yosys writes them.
    """
    from accel_spec.errors import RtlError

    module = re.search(rf"^module \\{re.escape(top)}\.dram\s.*?^endmodule", verilog, re.M | re.S)
    memory = re.compile(r"^(\s*reg \[\d+:0\] mem \[\d+:0\];\n)\s*always @\(posedge (\w+)\)", re.M)
    found = memory.search(verilog, module.start(), module.end()) if module is not None else None
    if found is None:
        raise RtlError(f"no DRAM model array in the simulation top {top!r}")
    b = BACKDOOR
    block = (f"  reg [1:0] {b['cmd']} = 2'd0;\n  reg [31:0] {b['lo']} = 32'd0;\n  reg [31:0] {b['hi']} = 32'd0;\n"
             f"  always @(posedge {found.group(2)}) begin\n"
             f"    if ({b['cmd']} == 2'd{b['load']}) $readmemh(\"{b['load_file']}\", mem);\n"
             f"    if ({b['cmd']} == 2'd{b['dump']}) $writememh(\"{b['dump_file']}\", mem, {b['lo']}, {b['hi']});\n"
             "  end\n")
    return verilog[:found.end(1)] + block + verilog[found.end(1):]
