"""The vectorised core: a block of designs x ops in one pass of numpy (internal).

Every design-op pair becomes one element of a flat :class:`~perf_model.evaluator.problem.Problem`;
tiling, schedule and energy are array expressions over all elements at once. Results come back
as ``(designs, ops)`` arrays so totals over a workload are plain sums along the op axis.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays
from perf_model.evaluator.conv_ops import CHIP, ConvFigures, ConvOverlay, ConvScorers, conv_overlay
from perf_model.evaluator.design_figures import DesignFigures, design_figures
from perf_model.evaluator.failures import failures, overflows
from perf_model.evaluator.problem import (
    BUFFER_NAMES,
    FREE_OPERAND,
    MAPPED_GEMM,
    OPERAND_FREE,
    Problem,
    build_problem,
    row_index,
    take_rows,
)
from perf_model.evaluator.reuse_links import candidate_links, flags_from_links, ifmap_depth
from perf_model.evaluator.schedule import Schedule, op_cycles, schedule
from perf_model.evaluator.tiling import ORDERS, Tiling, choose_tiles, gemm_tile, smallest_fits, unfit_tiling
from perf_model.evaluator.transfers import memory_arrays
from perf_model.physical.checksum import BUILD_REASON
from perf_model.physical.energy import EnergyTable
from perf_model.physical.fmax import clock_reason
from perf_model.physical.pe_area import AreaCoefficients
from workloads.ops import Conv2d

__all__ = ["Block", "evaluate_block", "ENERGY_PARTS"]

#: Components of the energy breakdown, in report order.
ENERGY_PARTS = ("mac", "register", "sram_ifmap", "sram_weight", "sram_ofmap", "output_stage", "checksum", "dram",
                "leakage")
_GEMM_DIMS = "mkn"
_NO_LIMIT = 1 << 50  # ifmap words of an op whose A is on chip already: its A tiles need none


@dataclass
class Block:
    """Per design-op results of a block, arrays of shape ``(designs, ops)``.

    Traffic arrays have a leading axis of 3: the operands by free dim (see ``Schedule``);
    ``energy`` holds the breakdown by part (per buffer for SRAM). Infeasible pairs hold zeros.
    ``boundary_cycles``: how many cycles the queue-load boundaries of a double-buffered program may
    add to ``total_cycles`` at most (``perf_model.evaluator.schedule``; 0 when the program fits the queue).
    ``resident`` marks tilings holding a resident input strip (``perf_model.evaluator.tiling``);
    ``a_on_chip``/``c_on_chip`` ops whose input the op before left in the ifmap and whose output
    stays there for the next (on-chip reuse, ``perf_model.evaluator.reuse_links``).
    ``area_mm2`` is per design (``(designs,)``). ``overflow`` marks pairs whose tiles fit but
    whose reduction can overflow the accumulator (:func:`overflows`); they are not feasible.
    Per design too: ``f_max_mhz`` (:mod:`perf_model.physical.fmax`), ``vdd`` (the supply that meets
    ``clock_mhz``, :func:`perf_model.physical.technology.supply_voltage`) and ``clock_ok``
    (``clock_mhz <= f_max_mhz``; a design that fails it is infeasible in every op).
    """

    feasible: np.ndarray
    overflow: np.ndarray
    compute_cycles: np.ndarray
    total_cycles: np.ndarray
    boundary_cycles: np.ndarray
    folds: np.ndarray
    macs: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    sram_read: np.ndarray
    sram_write: np.ndarray
    energy: dict[str, np.ndarray]
    latency_s: np.ndarray
    area_mm2: np.ndarray
    tile: np.ndarray
    order: np.ndarray
    resident: np.ndarray
    a_on_chip: np.ndarray
    c_on_chip: np.ndarray
    f_max_mhz: np.ndarray
    vdd: np.ndarray
    clock_ok: np.ndarray
    build_ok: np.ndarray
    _critical: np.ndarray
    _depths: np.ndarray
    _problem: Problem
    _names: tuple[str, ...]
    _designs: DesignArrays
    _convs: ConvOverlay
    _conv_count: int = 0

    def chip_figures(self, i: int, o: int) -> ConvFigures | None:
        """The figures of op ``o`` on design ``i`` when it is a conv run on chip, else ``None``."""
        e = i * len(self._names) + o
        return self._convs.figures.get(e) if self._convs.path[e] == CHIP else None

    def conv_note(self, i: int, o: int) -> tuple[str, str]:
        """``(path, note)`` of op ``o`` on design ``i``: ``("chip", "")`` for a conv run on chip,
        (``("chip", form)`` when its program reshapes it: ``ConvFigures.form``),
        ``("host", why)`` for a conv left to the host's im2col, ``("infeasible", why)`` for one
        that does not fit on chip, ``("", "")`` for a GEMM."""
        e = i * len(self._names) + o
        if e in self._convs.infeasible:
            return "infeasible", self._convs.infeasible[e]
        if self._convs.path[e] == CHIP:
            figures = self._convs.figures.get(e)
            return "chip", figures.form if figures is not None else ""
        if e in self._convs.notes:
            return "host", self._convs.notes[e]
        return "", ""

    def host_conv_notes(self) -> dict[int, str]:
        """Design index -> why its convs left to the host's im2col GEMM are there (designs with
        one): how many of the workload's convs, and the first one's reason (``conv_note``)."""
        per: dict[int, list[int]] = {}
        for e in sorted(self._convs.notes):
            per.setdefault(e // len(self._names), []).append(e)
        return {i: (f"{len(es)} of {self._conv_count} convs run as the host's im2col GEMM "
                    f"({self._convs.notes[es[0]]})") for i, es in per.items()}

    def first_failures(self) -> dict[int, str]:
        """Design index -> reason of its first infeasible op (designs with one)."""
        bad = ~self.feasible
        rows = np.flatnonzero(bad.any(axis=1))
        if rows.size == 0:
            return {}
        first = bad[rows].argmax(axis=1)
        flat = rows * len(self._names) + first
        texts = failures(self._problem, flat, self._names, self._designs, self.overflow.reshape(-1)[flat])
        convs = self._convs.infeasible  # one mask over the elements, not one a design
        if convs:
            texts = [convs.get(e, t) for e, t in zip(flat.tolist(), texts, strict=True)]
        # the same order as failure(): a clock the design cannot reach wins over a build rule
        for j in np.flatnonzero(~self.build_ok[rows]).tolist():
            texts[j] = BUILD_REASON
        for j in np.flatnonzero(~self.clock_ok[rows]).tolist():
            texts[j] = self.clock_failure(int(rows[j]))
        return dict(zip(rows.tolist(), texts, strict=True))

    def clock_failure(self, i: int) -> str:
        """Why design ``i`` cannot run at its clock (``""`` if it can)."""
        if self.clock_ok[i]:
            return ""
        stage = int(self._critical[i])
        return clock_reason(float(self._designs.clock_mhz[i]), float(self.f_max_mhz[i]),
                            int(self._designs.tech_nm[i]), stage, float(self._depths[stage, i]))

    def failure(self, i: int, o: int) -> str:
        """Reason op ``o`` is infeasible on design ``i`` (``""`` if it is feasible)."""
        if self.feasible[i, o]:
            return ""
        if not self.clock_ok[i]:
            return self.clock_failure(i)
        if not self.build_ok[i]:
            return BUILD_REASON
        e = i * len(self._names) + o
        if e in self._convs.infeasible:
            return self._convs.infeasible[e]
        return failures(self._problem, np.array([e]), self._names, self._designs, self.overflow[i, o:o + 1])[0]


def evaluate_block(
    designs: DesignArrays, ops: OpArrays, energy: EnergyTable, area: AreaCoefficients,
    *, scorers: ConvScorers | None, allow_spill: bool = False, reuse: bool = False,
    ifmap_reserve: np.ndarray | None = None, a_on_chip: np.ndarray | None = None,
    c_on_chip: np.ndarray | None = None, conv_chains: bool = False, figures: DesignFigures | None = None,
) -> Block:
    """Evaluate every design of ``designs`` on every op of ``ops``.

    ``scorers``: what scores a conv on chip (``perf_model.evaluator.conv_ops.ConvScorers``: the
    compiler's ``perf_model.compiler.scorers.COMPILER_SCORERS``); ``None`` scores every conv as its
    im2col GEMM (the caller says which: the evaluator holds no scorer of its own).

    ``reuse``: keep the workload's links on chip where a design can (``perf_model.evaluator.reuse_links``,
    and chains of convs on chip: ``perf_model.evaluator.conv_ops``; ``conv_chains`` asks for the
    latter alone).
    The flags it derives, per ``(designs, ops)`` element, may also be given directly (the
    compiler's plan of one op): ``ifmap_reserve``, ifmap words the op's tiles may not use;
    ``a_on_chip``, ``A`` is in the ifmap already; ``c_on_chip``, the output is moved there.

    ``figures``: the designs' :class:`~perf_model.evaluator.design_figures.DesignFigures` for ``energy``
    and ``area`` when the caller has them (computed here otherwise).
    """
    if figures is None:
        figures = design_figures(designs, energy, area)
    if reuse and ops.link.any():
        return _with_reuse(designs, ops, energy, area, allow_spill, scorers, figures)
    conv_chains = (conv_chains or reuse) and bool(ops.conv_link.any())
    nd, no = len(designs), len(ops)
    shape = (nd, no)
    d = designs

    def rep(values: np.ndarray) -> np.ndarray:
        return np.repeat(values, no, axis=-1)

    fig = figures
    a_bits, b_bits, q_bits = fig.a_bits, fig.b_bits, fig.q_bits  # packed int4: 4 bits in DRAM and in the buffers
    buf = rep(fig.buffer_words)
    a_chip = None if a_on_chip is None or not a_on_chip.any() else a_on_chip.reshape(-1)
    c_chip = None if c_on_chip is None or not c_on_chip.any() else c_on_chip.reshape(-1)
    if ifmap_reserve is not None:
        left = np.maximum(rep(ifmap_depth(d)) - np.asarray(ifmap_reserve, dtype=np.int64).reshape(-1), 0)
        buf[0] = np.where(rep(d.double_buffered), left // 2, left)
    if a_chip is not None:  # A is in the ifmap already: its tiles take no room
        buf[0] = np.where(a_chip, _NO_LIMIT, buf[0])
    requant = np.tile(ops.requant, nd)
    # An output leaves as input_bits lanes (requantised) or as raw accumulator lanes of 4 or 8
    # bytes (accel_spec.isa.dram_lane_bytes: the DRAM layout the RTL writes).
    out_bits = np.where(requant, rep(d.input_bits), np.where(rep(d.acc_bits) <= 32, 32, 64))  # as build_problem's
    dram_bits = (rep(a_bits), rep(b_bits), np.where(requant, rep(q_bits), out_bits))
    p = build_problem(rep(d.dataflow), rep(d.rows), rep(d.cols), rep(d.input_bits), rep(d.acc_bits),
                      buf, np.tile(ops.gemm, (1, nd)), rep(d.shadow_stationary), out_bits, dram_bits,
                      operand_bits=(rep(a_bits), rep(b_bits)))
    tiling, sched = _tile_and_schedule(p, d, fig, no, requant, out_bits, allow_spill, a_chip, c_chip)
    inst = np.tile(ops.instances, nd)
    compute, total = op_cycles(sched, inst)
    keep = None if a_chip is None and c_chip is None and ifmap_reserve is None else (
        _flag(a_chip, nd * no) | _flag(c_chip, nd * no)
        | (np.zeros(nd * no, dtype=bool) if ifmap_reserve is None else np.asarray(ifmap_reserve).reshape(-1) > 0))
    folds = sched.folds * inst
    dram_read, dram_write = sched.dram_read * inst, sched.dram_write * inst
    convs = conv_overlay(d, ops, total, dram_read.sum(axis=0) + dram_write.sum(axis=0), tiling.feasible, keep,
                         conv_chains, scorers=scorers)
    images = np.tile(np.asarray(ops.counts, dtype=np.float64), nd)  # a conv's figures are its whole batch's
    sram_read, sram_write = sched.sram_read * inst, sched.sram_write * inst
    tile = gemm_tile(p, tiling.t)
    feasible = tiling.feasible
    if convs.any:
        compute = convs.apply(compute, lambda f: f.compute, images)
        total = convs.apply(total, lambda f: f.total, images)
        folds = convs.apply(folds, lambda f: f.folds, images)
        # (3, N) traffic by the operand free in r, c, s: the figures are by operand A, B, C
        dram_read = convs.apply(dram_read, lambda f: _by_free(f.read), images)
        dram_write = convs.apply(dram_write, lambda f: _by_free(f.write), images)
        sram_read = convs.apply(sram_read, lambda f: _by_free(f.sram_read), images)
        sram_write = convs.apply(sram_write, lambda f: _by_free(f.sram_write), images)
        tile = convs.apply(tile, lambda f: f.tile, np.ones(nd * no))
        feasible = feasible.copy()
        for e in convs.figures:
            feasible[e] = True
        for e in convs.infeasible:
            feasible[e] = False
    f_max, critical, clock_ok, vdd = fig.f_max_mhz, fig.critical, fig.clock_ok, fig.vdd
    # (nd, no) against (nd, 1): the powers of two per design, broadcast over its ops
    k = p.gemm[1].reshape(shape)
    product = fig.max_product[:, None]
    overflow = feasible & overflows(k, d.input_bits[:, None], d.acc_bits[:, None], product).reshape(-1) & rep(clock_ok)
    build_ok = fig.build_ok  # the RTL builds the checksum for WS and IS only
    ok = feasible & ~overflow & rep(clock_ok) & rep(build_ok)
    macs = np.tile(ops.macs, nd)

    # Energy (pJ): per-access figures at 45 nm times the node's scale and (V / V_nom)^2 (DesignFigures.scale).
    scale = rep(fig.scale)
    # Figures that depend on the design alone are computed per design and repeated over its ops.
    ib_d, ab_d = d.input_bits.astype(np.float64), d.acc_bits.astype(np.float64)
    ib = rep(ib_d)
    macs_f = macs.astype(np.float64)
    reg_bits = rep(np.where(d.dataflow == 1, 2 * ib_d + ab_d, ib_d + ab_d))  # registers written per MAC (rtl_gen PE)
    sram_pj = rep(fig.sram_pj) * scale
    area_mm2 = fig.area_mm2
    latency = total / rep(d.clock_mhz * 1e6)
    # The stationary column chain, per PE and fold: plain, R shifts (the WS/IS load, the OS
    # drain); with shadows, row r's window is R - r (WS/IS) or r + 1 (OS) steps, (R + 1) / 2 on
    # average, plus the swap (WS/IS) or capture (OS) into or out of the shadow.
    R_f, C_f = p.R, p.C
    chain_writes = rep(np.where(d.shadow_stationary, (d.rows + 1) / 2 + 1, d.rows))
    chain_bits = folds * R_f * C_f * chain_writes * rep(np.where(d.dataflow == 1, ab_d, ib_d))
    parts = {
        "mac": macs_f * rep(fig.mac_pj) * scale,
        "register": (macs_f * reg_bits + chain_bits) * energy.reg_bit_pj * scale,
        "dram": (dram_read.sum(axis=0) + dram_write.sum(axis=0))
        * rep(fig.dram_pj),
        "output_stage": np.where(requant, p.out_bytes / (ib / 8.0) * inst, 0.0)
        * rep(fig.output_stage_pj) * scale,
        "checksum": (macs_f * rep(fig.checksum_pj)
                     + np.where(requant, p.out_bytes / (ib / 8.0) * inst, 0.0)  # the output stage's check
                     * rep(fig.output_check_pj)) * scale,
        "leakage": rep(fig.leak_w) * latency * 1e12,
    }
    # SRAM traffic is per operand (by free dim); each operand lives in its own buffer.
    by_free = (sram_read + sram_write) * take_rows(sram_pj, row_index(FREE_OPERAND, p.df))
    sram_energy = take_rows(by_free, row_index(OPERAND_FREE, p.df))  # back to buffer order
    for b, name in enumerate(BUFFER_NAMES):
        parts[f"sram_{name}"] = sram_energy[b]
    energy_parts = {name: _zero(parts[name], ok).reshape(shape) for name in ENERGY_PARTS}
    a_flags, c_flags = convs.chain_flags(a_chip, c_chip, nd * no)

    return Block(
        feasible=ok.reshape(shape),
        overflow=overflow.reshape(shape),
        compute_cycles=_zero(compute, ok).reshape(shape),
        total_cycles=_zero(total, ok).reshape(shape),
        boundary_cycles=_zero(np.where(rep(d.double_buffered) & (convs.path != CHIP), sched.boundary_bound * inst,
                                       0.0), ok).reshape(shape),
        folds=_zero(folds, ok).reshape(shape),
        macs=np.where(ok, macs, 0).reshape(shape),
        dram_read=_zero(dram_read, ok).reshape((3,) + shape),
        dram_write=_zero(dram_write, ok).reshape((3,) + shape),
        sram_read=_zero(sram_read, ok).reshape((3,) + shape),
        sram_write=_zero(sram_write, ok).reshape((3,) + shape),
        energy=energy_parts,
        latency_s=_zero(latency, ok).reshape(shape),
        area_mm2=area_mm2,
        tile=tile.reshape((3,) + shape),
        order=tiling.order.reshape(shape),
        resident=tiling.resident.reshape(shape),
        a_on_chip=a_flags.reshape(shape) & ok.reshape(shape),
        c_on_chip=c_flags.reshape(shape) & ok.reshape(shape),
        f_max_mhz=f_max,
        vdd=vdd,
        clock_ok=clock_ok,
        build_ok=build_ok,
        _critical=critical,
        _depths=fig.depths,
        _problem=p,
        _names=ops.names,
        _designs=d,
        _convs=convs,
        _conv_count=sum(isinstance(op, Conv2d) for op in ops.ops),
    )


def _with_reuse(designs: DesignArrays, ops: OpArrays, energy: EnergyTable, area: AreaCoefficients,
                allow_spill: bool, scorers: ConvScorers | None, figures: DesignFigures) -> Block:
    """:func:`evaluate_block` with the links ``perf_model.evaluator.reuse_links`` keeps on chip: the candidate
    links' producers are first tiled beside their regions; those that fit keep their link."""
    candidate, size = candidate_links(designs, ops)
    links = candidate
    if candidate.any():  # the tiling rule: each producer fits beside its region as a run's first op
        trial = evaluate_block(designs, ops, energy, area, scorers=scorers, allow_spill=allow_spill,
                               ifmap_reserve=size, c_on_chip=candidate, figures=figures)
        links = candidate & trial.feasible
    flags = flags_from_links(links, size)
    return evaluate_block(designs, ops, energy, area, scorers=scorers, allow_spill=allow_spill,
                          ifmap_reserve=flags.reserve, a_on_chip=flags.a_on_chip, c_on_chip=flags.c_on_chip,
                          conv_chains=True, figures=figures)


def _tile_and_schedule(p: Problem, d: DesignArrays, fig: DesignFigures, no: int, requant: np.ndarray,
                       out_bits: np.ndarray,
                       allow_spill: bool, a_chip: np.ndarray | None = None,
                       c_chip: np.ndarray | None = None) -> tuple[Tiling, Schedule]:
    """Tiling and schedule of every element of ``p`` (designs ``d`` x ``no`` ops, design-major).

    ``a_chip``/``c_chip``: per element, ``A`` is in the ifmap already (the tiling counts no DRAM
    bytes for it, the schedule loads none) and the output is moved there (on-chip reuse).

    Only the elements whose smallest tile fits are searched and scheduled (often a quarter of a
    sweep's are not): the others get :func:`unfit_tiling` and a schedule of zeros, which the
    caller zeroes anyway (they are infeasible).
    """
    live = smallest_fits(p)
    index = None if live.all() else np.flatnonzero(live)
    design = None if index is None else index // no  # the design of each live element

    def per_element(values: np.ndarray) -> np.ndarray:  # a design column at the live elements
        return np.repeat(values, no, axis=-1) if design is None else values.take(design, axis=-1)

    def live_only(values: np.ndarray) -> np.ndarray:  # an element column at the live elements
        return values if index is None else values.take(index, axis=-1)

    lp = p if index is None else p.take(index)
    a_live = None if a_chip is None else live_only(a_chip)
    c_live = None if c_chip is None else live_only(c_chip)
    # A already on chip costs the tiling no DRAM bytes.
    searched = lp if a_live is None else replace(lp, bytes=np.where(a_live & (lp.operand == 0), 0.0, lp.bytes))
    tiling = choose_tiles(searched, allow_spill=allow_spill)
    bw = per_element(fig.bandwidth)
    axi = fig.axi_bytes
    a_bits, b_bits, q_bits = fig.a_bits, fig.b_bits, fig.q_bits
    memory = memory_arrays(lp.df, lp.R, lp.C, per_element(d.input_bits), per_element(d.acc_bits),
                           per_element(axi), bw, live_only(requant), lp.gemm[2],
                           (per_element(a_bits), per_element(b_bits), per_element(q_bits)))
    if c_live is not None:
        memory.move = c_live
    with np.errstate(divide="ignore", invalid="ignore"):
        sched = schedule(lp, tiling, memory, per_element(d.double_buffered), a_live, c_live)
    _accumulators_in_sram(lp, sched, per_element(d.acc_bits) / live_only(out_bits), live_only(requant))
    if index is None:
        return tiling, sched
    full = unfit_tiling(p, allow_spill=allow_spill)
    full.put(index, tiling)
    return full, sched.widen(index, len(p))


def _accumulators_in_sram(p: Problem, sched: Schedule, ratio: np.ndarray, requant: np.ndarray) -> None:
    """Put the output's on-chip and spilled traffic back at ``acc_bits`` (``ratio = acc / out bits``).

    The schedule counts the output at ``p.elem_bytes`` (as it leaves: ``input_bits`` when
    requantised, else the 4- or 8-byte raw lane): right for its final store to DRAM, but the
    ofmap buffer holds ``acc_bits`` partial sums and the output stage reads them there, so the
    output's SRAM bytes scale by ``ratio``, and partial sums of a requantised op spilled to DRAM
    (``allow_spill``: every DRAM read of the output) go both ways at ``acc_bits`` (a raw op's
    spill is in its stored lanes already). (The roofline's transfer times still use the stored
    width for spilled partial sums: a small underestimate of stalls, with spilling only.)
    """
    out = p.is_out
    scale = np.where(out, ratio, 1.0)
    sched.sram_read = sched.sram_read * scale
    sched.sram_write = sched.sram_write * scale
    chip = sched.dram_read / p.dram_scale  # partial sums spill as accumulators, never packed
    spilled = np.where(out & requant, chip * ratio - sched.dram_read, 0.0)
    sched.dram_read = sched.dram_read + spilled
    sched.dram_write = sched.dram_write + spilled


def resident_name(df: int, order: int, resident: bool) -> str:
    """The input a tiling holds resident: ``"a"`` (middle loop n) or ``"b"`` (m), ``""`` if none."""
    if not resident:
        return ""
    return "a" if order_names(df, order).split(",")[1] == "n" else "b"


def order_names(df: int, order: int) -> str:
    """Loop order of a tiling as GEMM dims outer to inner, e.g. ``"m,n,k"``."""
    return ",".join(_GEMM_DIMS[MAPPED_GEMM[df][x]] for x in ORDERS[order])


def _flag(values: np.ndarray | None, n: int) -> np.ndarray:
    """A per-element flag array, all False for ``None``."""
    return np.zeros(n, dtype=bool) if values is None else values.astype(bool)


def _by_free(values: tuple[float, float, float]) -> tuple[float, ...]:
    """Per-operand ``(A, B, C)`` figures of a weight-stationary element by its free dims ``(r, c, s)``."""
    return tuple(values[int(j)] for j in FREE_OPERAND[0])


def _zero(values: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``values`` with infeasible elements (last axis) set to 0 (whatever they held).

    Feasible elements are finite by construction (every division is by a positive tile size,
    buffer capacity, bandwidth or clock); infeasible ones may hold anything and are replaced.
    """
    return np.where(ok, values, 0.0)
