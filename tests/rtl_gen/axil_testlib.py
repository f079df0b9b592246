"""An AXI4-Lite master for Amaranth 0.5 testbenches (``sim.add_testbench``), written from the
AXI handshake rules: a transfer happens on the clock edge where ``valid`` and ``ready`` are
both high; a source holds ``valid`` and its payload until then. The response waits check the
slave's side of the rules: once ``bvalid``/``rvalid`` is high it stays high, with its payload
unchanged, until the master's ``ready``."""

from __future__ import annotations

from typing import Any

OKAY, SLVERR = 0b00, 0b10
ORDERS = ("together", "aw_first", "w_first")
#: Cycles a handshake may take before the master gives up (a hung slave fails, not hangs).
TIMEOUT = 64


class AxilMaster:
    """Drive the ``<prefix>_*`` AXI4-Lite ports of ``dut`` from testbench context ``ctx``.

    ``cycles`` counts the clock edges this master has waited for.
    """

    def __init__(self, ctx: Any, dut: Any, prefix: str = "s_axil") -> None:
        self.ctx = ctx
        self.dut = dut
        self.prefix = prefix
        self.cycles = 0

    def sig(self, name: str) -> Any:
        return getattr(self.dut, f"{self.prefix}_{name}")

    async def tick(self, n: int = 1) -> None:
        for _ in range(n):
            await self.ctx.tick()
            self.cycles += 1

    async def reset(self) -> None:
        """All master outputs low (valids, readies), two idle cycles."""
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready", "awaddr", "wdata", "wstrb", "araddr"):
            self.ctx.set(self.sig(name), 0)
        await self.tick(2)

    async def send(self, *channels: str, payload: dict[str, int] | None = None) -> None:
        """Raise ``valid`` on each channel (``aw``, ``w``, ``ar``) with ``payload`` and hold each
        until its own handshake; returns after the last one."""
        for name, value in (payload or {}).items():
            self.ctx.set(self.sig(name), value)
        pending = set(channels)
        for ch in pending:
            self.ctx.set(self.sig(f"{ch}valid"), 1)
        for _ in range(TIMEOUT):
            if not pending:
                return
            fired = [ch for ch in pending if self.ctx.get(self.sig(f"{ch}ready"))]
            await self.tick()
            for ch in fired:
                self.ctx.set(self.sig(f"{ch}valid"), 0)
                pending.discard(ch)
        assert not pending, f"slave never raised ready on {sorted(pending)}"

    async def receive(self, ch: str, delay: int = 0) -> dict[str, int]:
        """Take one response on ``b`` or ``r``, holding ``ready`` low for ``delay`` cycles
        first; returns its payload (``resp``, and ``data`` for ``r``).

        Raises:
            AssertionError: the slave dropped ``valid`` or changed the payload before ``ready``.
        """
        names = ("bresp",) if ch == "b" else ("rresp", "rdata")
        held: tuple[int, ...] | None = None
        self.ctx.set(self.sig(f"{ch}ready"), 0)
        for _ in range(delay):
            if self.ctx.get(self.sig(f"{ch}valid")):
                now = tuple(self.ctx.get(self.sig(n)) for n in names)
                assert held is None or now == held, f"{ch} payload changed while waiting for ready: {held} -> {now}"
                held = now
            else:
                assert held is None, f"{ch}valid dropped before ready"
            await self.tick()
        self.ctx.set(self.sig(f"{ch}ready"), 1)
        for _ in range(TIMEOUT):
            if self.ctx.get(self.sig(f"{ch}valid")):
                break
            assert held is None, f"{ch}valid dropped before ready"
            await self.tick()
        else:
            raise AssertionError(f"slave never raised {ch}valid")
        got = {n[1:]: self.ctx.get(self.sig(n)) for n in names}
        assert held is None or tuple(got[n[1:]] for n in names) == held, f"{ch} payload changed before ready"
        await self.tick()
        self.ctx.set(self.sig(f"{ch}ready"), 0)
        return got

    async def write(self, addr: int, data: int, strb: int = 0xF, *, order: str = "together", gap: int = 0,
                    bready_delay: int = 0) -> int:
        """One write; ``order`` of AW and W (:data:`ORDERS`), ``gap`` idle cycles between them;
        returns BRESP."""
        aw = {"awaddr": addr}
        w = {"wdata": data, "wstrb": strb}
        if order == "together":
            await self.send("aw", "w", payload={**aw, **w})
        else:
            first, second = (("aw", aw), ("w", w)) if order == "aw_first" else (("w", w), ("aw", aw))
            await self.send(first[0], payload=first[1])
            await self.tick(gap)
            await self.send(second[0], payload=second[1])
        return (await self.receive("b", bready_delay))["resp"]

    async def read(self, addr: int, *, rready_delay: int = 0) -> tuple[int, int]:
        """One read; returns ``(RDATA, RRESP)``."""
        await self.send("ar", payload={"araddr": addr})
        got = await self.receive("r", rready_delay)
        return got["data"], got["resp"]

    async def read_ok(self, addr: int) -> int:
        """One read that must answer OKAY; returns RDATA."""
        data, resp = await self.read(addr)
        assert resp == OKAY, f"read of 0x{addr:03X} answered {resp:#04b}"
        return data

    async def write_ok(self, addr: int, data: int, strb: int = 0xF) -> None:
        """One write that must answer OKAY."""
        resp = await self.write(addr, data, strb)
        assert resp == OKAY, f"write of 0x{addr:03X} answered {resp:#04b}"
