"""One program for a network: GEMMs and the vector ops between them, activations on chip.

A network here is a chain of requantised GEMMs (``perf_model.compiler.chain``: op ``i + 1``'s
``A`` is op ``i``'s output) with, on any link (and after the last GEMM), vector ops applied in
order to the producer's requantised output, in place:

* an element-wise op of one operand (``relu``, ``relu6``, ``gelu``, ungated ``silu``);
* a residual ``add`` (:data:`TWO_OPERAND`): its second operand is the input of an earlier GEMM,
  by default the first GEMM of its block (the GEMM after the previous add, or GEMM 0:
  :func:`residual_skips`), held in the ifmap while the GEMMs between run;
* a ``layernorm`` or ``rmsnorm`` over each token's channels (:data:`ROW_KINDS`; WS only): the
  unit walks the region column-major (``vcolmajor``: a token's channel folds are ``M`` words
  apart), one row per token.

Element-wise ops map ``0`` (and ``0, 0``) to ``0`` and the unit writes 0 in a norm row's lanes
past its channels, so the zero padding lanes of the ``A`` words stay zero.
The ifmap holds every live tensor as a region in the layout of a run over the whole matrix
(``perf_model.compiler.program``: WS word ``region + (n // C) * M + m``, IS ``region + (m // C) * N
+ n``: DRAM row ``r`` of the matrix's ``A``/``C`` layout, word ``f`` at ``region + f * rows + r``).
Regions are placed first fit from the top of the ifmap and freed after their last reader
(:func:`_Regions`). GEMM ``i``:

* reads its ``A`` in place from its region, or, for GEMM 0 when its input is no skip operand,
  tiles it from DRAM in the ifmap words below every live region (no LOAD of the whole input);
* a skip operand that is the network's input is LOADed whole into its region first;
* MOVEs its output into a new region instead of storing it; the link's ``VECTOR`` runs there in
  place once the MOVEs are in (``wait_dma``), and the next GEMM's RUNs read the region once the
  unit is done (``wait_vec``);
* the last GEMM stores its output to DRAM, unless an op follows it: then that op runs on its
  region and a ``STORE`` of the ifmap (``wait_vec``) writes the network's output in the last
  GEMM's ``C`` layout.

All GEMMs' programs run back to back as ONE queue-load: their tensors are placed one after another
past the whole program, so there is no host step between the ops. Total cycles:
``perf_model.program_timing.program_cycles`` of :attr:`GemmProgram.commands`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accel_dse.commands import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode
from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ModelError
from perf_model.compiler.chain import region_words
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout, _buffer_depths, compile_gemm
from perf_model.compiler.vector import vector_commands, vector_registers
from workloads.ops import Gemm
from workloads.vector_ops import VectorOp

__all__ = ["compile_network", "residual_skips", "link_ops", "LINK_KINDS", "TWO_OPERAND", "ROW_KINDS"]

#: One link's ops: none, one, or several run in order.
Link = VectorOp | Sequence[VectorOp] | None

#: Vector ops a link may carry (element-wise with ``f(0) = 0``, an ungated ``silu``; norms per token).
LINK_KINDS = ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm")
#: Link kinds that reduce over a token's channels (one unit row per token, column-major).
ROW_KINDS = ("layernorm", "rmsnorm")
#: Link kinds whose second operand is an earlier GEMM's input held on chip.
TWO_OPERAND = ("add",)


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def _shifted(cmd: Command, shift: int, wait_vec: bool) -> Command:
    """``cmd`` with its DRAM address moved by ``shift`` bytes, and ``wait_vec`` on a RUN if asked."""
    if cmd.opcode in (Opcode.LOAD, Opcode.STORE):
        cmd = dataclasses.replace(cmd, fields=tuple((k, v + shift if k == "dram_addr" else v) for k, v in cmd.fields))
    if wait_vec and cmd.opcode == Opcode.RUN:
        cmd = dataclasses.replace(cmd, wait_vec=1)
    return cmd


def link_ops(link: Link) -> tuple[VectorOp, ...]:
    """The ops of one link, in order."""
    if link is None:
        return ()
    return (link,) if isinstance(link, VectorOp) else tuple(link)


def residual_skips(links: Sequence[Link]) -> tuple[int | None, ...]:
    """Per link, the GEMM whose input is its add's second operand (``None``: no add): the first
    GEMM of the add's block, i.e. the GEMM after the previous add (GEMM 0 for the first)."""
    out: list[int | None] = []
    block = 0
    for i, link in enumerate(links):
        if any(op.kind in TWO_OPERAND for op in link_ops(link)):
            out.append(block)
            block = i + 1
        else:
            out.append(None)
    return tuple(out)


class _Regions:
    """Live ifmap regions ``name -> (start, words)``, placed first fit from the top of ``depth`` words."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.live: dict[str, tuple[int, int]] = {}

    def take(self, name: str, words: int) -> int:
        top = self.depth
        for start, size in sorted(self.live.values(), reverse=True):
            if top - (start + size) >= words:
                break
            top = min(top, start)
        if top < words:
            held = ", ".join(f"{k} ({v[1]} words)" for k, v in self.live.items())
            raise ModelError(f"{name} needs {words} ifmap words beside {held or 'nothing'}: the ifmap has "
                             f"{self.depth}")
        self.live[name] = (top - words, words)
        return top - words

    def at(self, name: str) -> int:
        return self.live[name][0]

    def free(self, name: str) -> None:
        self.live.pop(name, None)

    def low(self) -> int:
        return min((start for start, _ in self.live.values()), default=self.depth)


def _whole(config: ArrayConfig, t: TensorLayout, opcode: int, region: int, wait_vec: int = 0) -> Command:
    """The LOAD (or STORE) of the whole matrix ``t`` to (from) its ifmap region at ``region``."""
    lanes = config.vector_lanes
    return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP, dram_addr=t.base, dram_stride=t.pitch,
                        rows=t.rows, words=t.row_elems // lanes, buf_addr=region, row_step=1, word_step=t.rows)


def compile_network(config: ArrayConfig, gemms: Sequence[Gemm], links: Sequence[Link],
                    skips: Sequence[int | None] | None = None) -> GemmProgram:
    """The one program of ``gemms`` with the ops of ``links[i]`` (``None``, one op or a sequence)
    after GEMM ``i``.

    ``links`` has one entry per link (``len(gemms) - 1``), or one more for ops after the last
    GEMM. ``skips[i]``: the GEMM whose input is the second operand of an add on link ``i``
    (default :func:`residual_skips`).

    Tensors: ``a0`` (the network's input), per GEMM ``i`` its weights ``b{i}`` and output-stage
    parameters ``q{i}``, and ``c{last}`` (the network's output, in the last GEMM's ``C`` layout);
    per GEMM the unused ``a``/``c`` layouts are placed too.

    Raises:
        ModelError: no vector unit, ``links`` or ``skips`` of the wrong length, an op the unit
            cannot run in place on a link, a skip operand of another shape or not earlier, an
            unrequantised GEMM, the live tensors not fitting the ifmap together, a GEMM that
            cannot be tiled beside them, or a program longer than one queue-load.
    """
    lanes = config.vector_lanes
    if not lanes:
        raise ModelError(f"design {config.short_name()} has no vector unit (vector_unit = false)")
    count = len(gemms)
    if len(links) not in (max(0, count - 1), count):
        raise ModelError(f"a network of {count} GEMMs has {max(0, count - 1)} links (or one more op after the "
                         f"last GEMM), not {len(links)}")
    trailing = len(links) == count and bool(link_ops(links[-1]))
    ops = [link_ops(link) for link in links] + [()] * (count - len(links))
    given = list(residual_skips(ops) if skips is None else skips)
    if len(given) > count:
        raise ModelError(f"skips must have at most one entry per link and op ({count}), not {len(given)}")
    skips = given + [None] * (count - len(given))
    for i, (link, g) in enumerate(zip(ops, gemms, strict=True)):
        if i + 1 < count and (gemms[i + 1].m, gemms[i + 1].k) != (g.m, g.n):
            raise ModelError(f"GEMMs {i} and {i + 1} do not chain: the next needs m = {g.m} and k = {g.n}, "
                             f"not m = {gemms[i + 1].m}, k = {gemms[i + 1].k}")
        if g.requant is None:
            raise ModelError(f"GEMM {i} is not requantised: only int8 outputs stay on chip")
        for op in link:
            if op.kind not in LINK_KINDS or (op.kind == "silu" and op.param("gated", 0)):
                raise ModelError(f"link {i}: a {op.kind} cannot run in place on a link (one of "
                                 f"{', '.join(LINK_KINDS)}, ungated)")
            if op.kind in ROW_KINDS and config.dataflow is not Dataflow.WS:
                raise ModelError(f"link {i}: a {op.kind} needs a token's channels in one row of words; an "
                                 f"{config.dataflow.value.upper()} output word holds {lanes} tokens of one channel")
            j = skips[i]
            if op.kind in TWO_OPERAND and (j is None or not 0 <= j <= i or (gemms[j].m, gemms[j].k) != (g.m, g.n)):
                raise ModelError(f"link {i}: the {op.kind}'s second operand must be the input of a GEMM 0 .. {i} "
                                 f"of shape {g.m}x{g.n}, not of GEMM {j}")
    held = {j: max(i for i in range(count) if skips[i] == j) for j in set(skips) if j is not None}
    depth = _buffer_depths(config)[0]
    regions = _Regions(depth)
    head: list[Command] = []  # the whole-input LOAD, placed before GEMM 0 once its layout is known
    parts: list[tuple[GemmProgram, list[Command], bool]] = []
    out_region = 0  # the last GEMM's output region, when an op follows it
    for i, gemm in enumerate(gemms):
        a_region = None
        if i > 0 or 0 in held:
            a_region = regions.at(f"x{i}") if i > 0 else regions.take("x0", region_words(config, Gemm(
                m=gemm.m, k=1, n=gemm.k)))
        c_region = None
        if i + 1 < count or ops[i]:
            c_region = regions.take(f"x{i + 1}", region_words(config, gemm))
        try:
            program = compile_gemm(config, gemm, requant=True, a_region=a_region, c_region=c_region,
                                   ifmap_words=regions.low() if a_region is None else None)
        except ModelError as exc:
            raise ModelError(f"GEMM {i} ({gemm.m}x{gemm.k}x{gemm.n}) beside the network's live tensors: {exc}") from exc
        if i == 0 and a_region is not None:
            head.append(_whole(config, program.tensors["a"], Opcode.LOAD, a_region))
        if held.get(i, -1) < i:
            regions.free(f"x{i}")
        vector: list[Command] = []
        for op in ops[i] if c_region is not None else ():  # c_region is set whenever ops[i] is
            out_region = c_region
            words = region_words(config, gemm)
            if op.kind in ROW_KINDS:  # one row per token: its channel folds M words apart
                shaped = dataclasses.replace(op, shape=(gemm.m, gemm.n), out_shape=(gemm.m, gemm.n), axis=1)
            else:
                shaped = dataclasses.replace(op, shape=(words * lanes,), out_shape=(words * lanes,), axis=None)
            j = skips[i]
            src2 = regions.at(f"x{j}") if op.kind in TWO_OPERAND and j is not None else c_region
            vector += vector_commands(vector_registers(shaped, lanes, src=c_region, src2=src2, dst=c_region,
                                                       colmajor=op.kind in ROW_KINDS), wait_dma=1)
        for j, last in held.items():
            if last == i:
                regions.free(f"x{j}")
        parts.append((program, vector, i > 0 and bool(parts[-1][1])))
    tail = int(trailing)
    total = len(head) + sum(len(p.commands) + len(v) for p, v, _ in parts) + tail
    if total > QUEUE_DEPTH:
        raise ModelError(f"the network's program has {total} commands, more than one queue-load of {QUEUE_DEPTH}")
    cursor = _align(total * COMMAND_BYTES, PAGE)
    commands: list[Command] = []
    tensors: dict[str, TensorLayout] = {}
    for i, (program, vector, after_vector) in enumerate(parts):
        first = min(t.base for t in program.tensors.values())
        shift = cursor - first
        for name, t in program.tensors.items():
            tensors[f"{name}{i}"] = dataclasses.replace(t, base=t.base + shift)
        if i == 0:
            commands += [_shifted(c, shift, False) for c in head]
        commands += [_shifted(c, shift, after_vector) for c in program.commands]
        cursor = _align(max(t.base + t.nbytes for t in program.tensors.values()) + shift, PAGE)
        commands += vector
    if tail:
        last = count - 1
        commands.append(_whole(config, tensors[f"c{last}"], Opcode.STORE, out_region, wait_vec=1))
    return GemmProgram(tuple(commands), tensors, 0, cursor, parts[0][0].data_bytes, True,
                       tuple(r for p, _, _ in parts for r in p.runs), ((0, len(commands)),))
