"""Waveform traces within bounds: a cycle window, the expected size, and a limit.

``simulate --waves`` traces ``cycles`` cycles of the run from cycle ``first`` (the window,
:class:`WavesWindow`); before the run :func:`waves_plan` estimates the trace's size and refuses a
window whose estimate passes the limit (default :data:`DEFAULT_LIMIT_BYTES`, 1 GB), naming the
window that fits.

The estimate (:func:`bytes_per_cycle`) is the design's traced signal bits (the ``reg``/``wire``
declarations of its Verilog, memories excluded: neither Icarus's ``$dumpvars`` nor a VCD of the
top dumps them) times a bytes-per-bit factor per format, measured on the ``tiny`` preset:

* VCD (text, Verilator before FST became the default): 1.46 GB for 102,822 cycles of ``mlp``'s
  ``fc.3`` on ``tiny`` (issue 54) is 14,200 B/cycle over ``tiny``'s 61,374 signal bits:
  :data:`VCD_BYTES_PER_BIT` = 0.25 bytes per signal bit per cycle (0.23, rounded up);
* FST (compressed): Icarus on ``tiny`` running ``gemm:m=8,k=8,n=8`` wrote 82,829 B for 271
  cycles (306 B/cycle, hierarchy included): :data:`FST_BYTES_PER_BIT` = 0.005 (an estimate errs
  large).

The real size depends on how many signals toggle; the estimate is meant to be within a factor of
about 2, enough to keep a 90 GB trace from starting.
"""

from __future__ import annotations

import dataclasses
import math
import re

from accel_dse.units import eng
from accel_spec.errors import SimulationError

__all__ = ["WavesRequest", "plan_for_run", "window_plusargs", "DEFAULT_LIMIT_BYTES", "VCD_BYTES_PER_BIT",
           "FST_BYTES_PER_BIT", "WavesWindow", "WavesPlan", "signal_bits", "bytes_per_cycle", "waves_plan"]

#: The default bound on a trace's estimated size, bytes (1 GB); ``--waves-limit-mb`` raises it.
DEFAULT_LIMIT_BYTES = 1_000_000_000

#: VCD bytes per traced signal bit per cycle (measured on ``tiny``; see the module docstring).
VCD_BYTES_PER_BIT = 0.25

#: FST bytes per traced signal bit per cycle (measured on ``tiny``; see the module docstring).
FST_BYTES_PER_BIT = 0.005

_DECL = re.compile(r"^\s*(?:reg|wire)\b(?:\s+signed)?\s*(?:\[(\d+):(\d+)\])?\s*"
                   r"(\\\S+|[A-Za-z_][\w$]*)\s*(\[[^\]]*\])?\s*(?:=[^;]*)?;", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class WavesWindow:
    """The cycles a trace covers.

    Attributes:
        first: The first traced cycle, counted from the start of the simulation (cycles of the
            design's clock; 0: from the start).
        cycles: How many cycles to trace (``None``: to the end of the run).
        run_end: The run's length, cycles, as a previous run of the same measured it (a window
            placed from that run: ``simulate(waves_around_mismatch=...)``); ``None``: the model's
            count, which leaves out the host's register writes between programs.
    """

    first: int = 0
    cycles: int | None = None
    run_end: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 0:
            raise SimulationError(f"--waves-from must be a cycle number >= 0, not {self.first!r}")
        if self.cycles is not None and (isinstance(self.cycles, bool) or not isinstance(self.cycles, int)
                                        or self.cycles < 1):
            raise SimulationError(f"--waves-cycles must be a positive number of cycles, not {self.cycles!r}")


@dataclasses.dataclass(frozen=True)
class WavesPlan:
    """What a traced run will write.

    Attributes:
        window: The cycles traced (``cycles`` resolved: never ``None``).
        fmt: ``"fst"`` or ``"vcd"``.
        bits: Traced signal bits of the design.
        bytes_per_cycle: The estimate's bytes per traced cycle.
        limit_bytes: The bound the estimate was checked against.
    """

    window: WavesWindow
    fmt: str
    bits: int
    bytes_per_cycle: float
    limit_bytes: int

    @property
    def expected_bytes(self) -> float:
        """The estimated trace size, bytes."""
        return (self.window.cycles or 0) * self.bytes_per_cycle

    def line(self) -> str:
        """One line for the user, printed before the run."""
        last = self.window.first + (self.window.cycles or 0) - 1
        return (f"waves: cycles {self.window.first:,}..{last:,} ({self.window.cycles:,} cycles) as "
                f"{self.fmt.upper()}, expected about {eng(self.expected_bytes, 'B')} "
                f"({self.bits:,} signal bits, ~{self.bytes_per_cycle:,.0f} B/cycle; limit "
                f"{eng(self.limit_bytes, 'B')})")


def signal_bits(verilog: str) -> int:
    """Bits of every ``reg``/``wire`` declared in ``verilog``, memories (arrays) excluded (Yosys's
    Verilog declares each port a second time as a ``wire`` or ``reg``: ports count once)."""
    total = 0
    for msb, lsb, _name, array in _DECL.findall(verilog):
        if array:
            continue
        total += abs(int(msb) - int(lsb)) + 1 if msb else 1
    return total


def bytes_per_cycle(bits: int, fmt: str) -> float:
    """Estimated trace bytes per cycle for ``bits`` traced signal bits in format ``fmt``."""
    if fmt not in ("fst", "vcd"):
        raise SimulationError(f"waveform format must be 'fst' or 'vcd', not {fmt!r}")
    return max(1, bits) * (FST_BYTES_PER_BIT if fmt == "fst" else VCD_BYTES_PER_BIT)


def waves_plan(window: WavesWindow, *, run_cycles: int, bits: int, fmt: str,
               limit_bytes: int = DEFAULT_LIMIT_BYTES, option: str = "--waves-limit-mb",
               windows: bool = True) -> WavesPlan:
    """Resolve ``window`` on a run of ``run_cycles`` cycles and check its estimated size.

    Args:
        window: The cycles asked for.
        run_cycles: The run's expected cycles (the model's), > 0.
        bits: The design's traced signal bits (:func:`signal_bits`).
        fmt: ``"fst"`` or ``"vcd"``.
        limit_bytes: The bound on the estimate, bytes.
        option: The option that raises the bound (named in the refusal).
        windows: The simulator can trace a window (Icarus); without it (cocotb's Verilator
            harness traces every cycle of the run) only the whole run can be traced.

    Raises:
        SimulationError: the window starts after the run ends, or its estimated size passes
            ``limit_bytes`` (the message names the window that fits), or a window on a
            simulator that traces whole runs only.
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 1:
        raise SimulationError(f"{option} must be a positive size, not {limit_bytes!r}")
    run_cycles = max(1, int(run_cycles if window.run_end is None else window.run_end))
    if window.first >= run_cycles:
        raise SimulationError(f"--waves-from {window.first:,} is past the run's end: it lasts about "
                              f"{run_cycles:,} cycles (the model's count)")
    if not windows and window != WavesWindow():
        raise SimulationError("--waves-from/--waves-cycles need --simulator icarus: cocotb's Verilator harness "
                              "traces every cycle of the run")
    cycles = run_cycles - window.first if window.cycles is None else min(window.cycles, run_cycles - window.first)
    per_cycle = bytes_per_cycle(bits, fmt)
    plan = WavesPlan(WavesWindow(window.first, cycles, window.run_end), fmt, bits, per_cycle, limit_bytes)
    if plan.expected_bytes > limit_bytes:
        fits = max(1, math.floor(limit_bytes / per_cycle))
        how = "" if windows else "--simulator icarus "
        raise SimulationError(
            f"--waves over {cycles:,} cycles would write about {eng(plan.expected_bytes, 'B')} "
            f"({per_cycle:,.0f} B/cycle as {fmt.upper()}), over the {eng(limit_bytes, 'B')} limit: "
            f"{how}--waves-from {window.first} --waves-cycles {fits} fits (or raise {option})")
    return plan


@dataclasses.dataclass(frozen=True)
class WavesRequest:
    """A traced run as asked for: the window and the bound on the estimated size (bytes)."""

    window: WavesWindow = WavesWindow()
    limit_bytes: int = DEFAULT_LIMIT_BYTES


def plan_for_run(verilog: str, request: WavesRequest, *, run_cycles: int, simulator: str) -> WavesPlan:
    """:func:`waves_plan` for a run of ``verilog`` on ``simulator`` (FST; Verilator without lz4: VCD)."""
    from accel_dse.simulate.runner.build import verilator_fst

    fmt = "fst" if simulator == "icarus" or verilator_fst() else "vcd"
    return waves_plan(request.window, run_cycles=run_cycles, bits=signal_bits(verilog), fmt=fmt,
                      limit_bytes=request.limit_bytes, windows=simulator == "icarus")


def window_plusargs(plan: WavesPlan, period_ns: float) -> list[str]:
    """Icarus plusargs of the dump module (``runner.build.icarus_dump_module``): the window in ns."""
    first = round(plan.window.first * period_ns)
    span = round((plan.window.cycles or 0) * period_ns)
    return [f"+waves_from_ns={first}", f"+waves_for_ns={span}"]
