"""Where in a run an output element was written: the STORE of the program and its cycle.

``simulate`` compares an op's C with JAX after the run and knows a mismatch only by its index.
The program the compiler emitted says which ``STORE`` last wrote that element to DRAM (the
command whose rows of words cover the element's byte address in C's layout), and the
program walk (:func:`perf_model.program_timing.program_cycles`, the model's per-command issue
cycles) says when, counted from its queue-load's start. The DRAM testbench records the cycle of
the run at which each queue-load was started (``DramResult.starts``); the two added give the
cycle of the run, which :func:`mismatch_window` turns into a waves window: ``before`` cycles up to
the store's issue and the store itself (its beats and the DRAM latency, plus
:data:`TAIL_MARGIN` cycles).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from accel_dse.simulate.waves import WavesWindow

__all__ = ["StoreAt", "store_for_element", "placed", "mismatch_window", "TAIL_MARGIN"]

#: Cycles traced past the store's expected end (the host's register writes start a queue-load a
#: few cycles after the recorded cycle).
TAIL_MARGIN = 32


@dataclasses.dataclass(frozen=True)
class StoreAt:
    """The STORE that last wrote one output element.

    Attributes:
        command: Index of the ``STORE`` in the program's commands.
        chunk: Its queue-load (index into ``program.chunks``).
        issue: Cycle of its issue, counted from the start of its queue-load (the program walk).
        cycles: Cycles it is expected to take: its DRAM beats plus the DRAM latency.
        address: The element's DRAM byte address.
    """

    command: int
    chunk: int
    issue: int
    cycles: int
    address: int


def _element_address(layout: Any, row: int, col: int) -> int:
    """Byte address of C[row, col] (row of M, column of N) in ``layout`` (C^T when transposed)."""
    r, q = (col, row) if layout.transposed else (row, col)
    return int(layout.base + r * layout.pitch + int(q * layout.elem_size))


def store_for_element(design: Any, program: Any, row: int, col: int, *, latency: int,
                      rate: Any = None) -> StoreAt | None:
    """The last ``STORE`` of ``program`` that writes C[``row``, ``col``], with its issue cycle.

    Args:
        design: The design (``ArrayConfig``).
        program: A ``perf_model`` ``GemmProgram`` (``commands``, ``chunks``, ``queue_base``, ``tensors["c"]``).
        row, col: The element: row of C (M) and column (N).
        latency: The DRAM model's latency, cycles.
        rate: The DRAM pacing (``perf_model.dram_rate``), ``None``: a beat a cycle.

    Returns:
        ``None`` when no STORE writes the element (an output kept on chip).
    """
    from accel_spec.isa import COMMAND_BYTES, Opcode
    from perf_model.program_timing import axi_data_bytes, program_cycles, transfer_bytes, word_beats

    address = _element_address(program.tensors["c"], row, col)
    beats, width = word_beats(design), axi_data_bytes(design)
    found = None
    for at, cmd in enumerate(program.commands):
        if cmd.opcode != Opcode.STORE or cmd["rows"] < 1:
            continue
        row_bytes = transfer_bytes(cmd, beats, width) // cmd["rows"]
        offset = address - cmd["dram_addr"]
        if offset < 0:
            continue
        stride = cmd["dram_stride"]
        line = min(offset // stride, cmd["rows"] - 1) if stride else 0
        if offset - line * stride < row_bytes:
            found = at
    if found is None:
        return None
    chunk = next(j for j, (a, b) in enumerate(program.chunks) if a <= found < b)
    first, end = program.chunks[chunk]
    commands = program.commands[first:end]
    walk = program_cycles(design, commands, queue_base=program.queue_base + first * COMMAND_BYTES,
                          latency=latency, rate=rate)
    issued = sum(1 for cmd in commands[:found - first] if cmd.opcode != Opcode.VECTOR_PARAMS)
    store = program.commands[found]
    return StoreAt(found, chunk, int(walk.issue[issued]),
                   -(-transfer_bytes(store, beats, width) // width) + latency, address)


def mismatch_window(cycle: int, store_cycles: int, before: int, run_end: int | None = None) -> WavesWindow:
    """The waves window of a mismatch: ``before`` cycles up to the store's issue, the store and a margin.

    Args:
        cycle: The run's cycle of the store's issue (``OpResult.mismatch_store["cycle"]``).
        store_cycles: Cycles the store is expected to take (``mismatch_store["store_cycles"]``).
        before: Cycles to trace before the store's issue.
        run_end: The run's measured length, cycles (the window never passes it).
    """
    first = max(0, cycle - before)
    cycles = cycle - first + store_cycles + TAIL_MARGIN
    if run_end is not None:
        cycles = max(1, min(cycles, run_end - first))
    return WavesWindow(first, cycles, run_end)


def placed(design: Any, program: Any, raw: Any, result: Any, latency: int) -> Any:
    """``result`` (an ``OpResult``) with ``mismatch_store``: the STORE that wrote its first mismatch
    and the run's cycle of its issue, where the op ran from its own GEMM ``program`` (``None``:
    a network's or a sampled check's program, left unplaced) and the testbench recorded its
    queue-loads' starts (``raw``: the op's ``DramResult``)."""
    starts = getattr(raw, "starts", None)
    if not result.first_mismatches or program is None or starts is None:
        return result
    import perf_model

    first = result.first_mismatches[0]
    instance, row, col = first.index
    store = store_for_element(design, program, row, col, latency=latency, rate=perf_model.dram_rate(design))
    if store is None or instance >= len(starts) or store.chunk >= starts.shape[1] or starts[instance, store.chunk] < 0:
        return result
    start = int(starts[instance, store.chunk])
    return dataclasses.replace(result, mismatch_store={
        "index": list(first.index), "instance": instance, "command": store.command, "queue_load": store.chunk,
        "queue_load_start": start, "issue": store.issue, "cycle": start + store.issue,
        "store_cycles": store.cycles})
