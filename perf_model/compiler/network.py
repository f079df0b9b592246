"""One program for a network: GEMMs and the vector ops between them, activations on chip.

A network here is a chain of requantised GEMMs (``perf_model.compiler.chain``: op ``i + 1``'s
``A`` is op ``i``'s output) with, on any link (and after the last GEMM), vector ops applied in
order to the producer's requantised output, in place:

* an element-wise op of one operand (``relu``, ``relu6``, ``gelu``, ungated ``silu``);
* a residual ``add`` (:data:`TWO_OPERAND`): its second operand is the input of an earlier GEMM,
  by default the first GEMM of its block (the GEMM after the previous add, or GEMM 0:
  :func:`residual_skips`), held in the ifmap while the GEMMs between run, or an input of the
  network of its own (:data:`EXTERNAL`, e.g. a residual from before the network), LOADed whole
  into its region at the start;
* a ``layernorm`` or ``rmsnorm`` over each token's channels (:data:`ROW_KINDS`; WS only): the
  unit walks the region column-major (``vcolmajor``: a token's channel folds are ``M`` words
  apart), one row per token.

Element-wise ops map ``0`` (and ``0, 0``) to ``0`` and the unit writes 0 in a norm row's lanes
past its channels, so the zero padding lanes of the ``A`` words stay zero.
The ifmap holds every live tensor as a region in the layout of a run over the whole matrix
(``perf_model.compiler.program``: WS word ``region + (n // C) * M + m``, IS ``region + (m // C) * N
+ n``: DRAM row ``r`` of the matrix's ``A``/``C`` layout, word ``f`` at ``region + f * rows + r``).
Regions are placed first fit from the top of the ifmap and freed after their last reader
(:class:`_Regions`). On chip, GEMM ``i``:

* reads its ``A`` in place from its region, or, for GEMM 0 when its input is no skip operand,
  tiles it from DRAM in the ifmap words below every live region (no LOAD of the whole input);
* a skip operand that is the network's input is LOADed whole into its region first;
* MOVEs its output into a new region instead of storing it; the link's ``VECTOR`` commands run
  there in place once the MOVEs are in (``wait_dma``), and the next GEMM's RUNs read the region
  once the unit is done (``wait_vec``);
* the last GEMM stores its output to DRAM, unless ops follow it: then they run on its region and
  a ``STORE`` of the ifmap (``wait_vec``) writes the network's output in the last GEMM's ``C``
  layout.

When the live tensors do not fit the ifmap together (or ``keep_on_chip=False``), every link goes
through DRAM, still in the one program: GEMM ``i`` stores its output, the link's ops run on it in
chunks of its DRAM rows that fit the ifmap (LOAD the chunk, and the same rows of an add's skip
operand, which is then the DRAM input of its GEMM, in the column-major layout; the ``VECTOR``
commands; STORE it back in place), pipelined in the ifmap's two halves when a chunk fits half
(:func:`_chunk_commands`' ``pipeline``, as a conv network's links and a vector op's own program run),
and GEMM ``i + 1`` loads its ``A`` tiles from that tensor (the same layout: ``R == C`` WS, or IS).
The DMA engine runs one command at a time, so the chunks follow the output's last STORE and precede
the next GEMM's loads.

All GEMMs' programs run back to back as ONE queue-load: their tensors are placed one after another
past the whole program, so there is no host step between the ops. Total cycles:
``perf_model.program_timing.program_cycles`` of :attr:`GemmProgram.commands`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import COMMAND_BYTES, FIELDS, QUEUE_DEPTH, Buffer, Command, Opcode, queue_entry_commands
from perf_model.compiler.chain import region_words
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout, _buffer_depths, compile_gemm
from perf_model.compiler.vector import vector_commands, vector_registers
from perf_model.program_timing import TimedCommand
from workloads.ops import Gemm
from workloads.vector_ops import VectorOp

__all__ = ["compile_network", "residual_skips", "link_ops", "LINK_KINDS", "TWO_OPERAND", "ROW_KINDS", "EXTERNAL"]

#: One link's ops: none, one, or several run in order.
Link = VectorOp | Sequence[VectorOp] | None

#: Vector ops a link may carry (element-wise with ``f(0) = 0``, an ungated ``silu``; norms per token).
LINK_KINDS = ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm")
#: Link kinds that reduce over a token's channels (one unit row per token, column-major).
ROW_KINDS = ("layernorm", "rmsnorm")
#: Link kinds whose second operand is an earlier GEMM's input held on chip.
TWO_OPERAND = ("add",)
#: A skip (``compile_network``'s ``skips``) that is an input of the network of its own.
EXTERNAL = -1
#: How many chunks a DRAM link's ops are cut into at least, when a chunk fits half the ifmap: the
#: next chunk loads while the unit runs this one (:func:`pipelined`), so all but one chunk's ops
#: overlap the transfers; each chunk costs its commands' DRAM latency.
PIPELINE_CHUNKS = 8
#: The most words one row of a transfer holds (the command's ``words`` field).
_WORDS_MAX = (1 << FIELDS["words"][1]) - 1


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def _shifted(cmd: Command, shift: int, wait_vec: bool) -> Command:
    """``cmd`` with its DRAM address moved by ``shift`` bytes, and ``wait_vec`` on a RUN if asked (a
    ``TimedCommand`` keeps its cycles: its tensors move by whole pages, ``perf_model.compiler.conv_timed``)."""
    if type(cmd) is TimedCommand:
        return cmd.waiting_for_vector() if wait_vec and cmd.opcode == Opcode.RUN else cmd  # type: ignore[return-value]
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
                    skips: Sequence[int | None] | None = None, *, keep_on_chip: bool = True,
                    queue_depth: int | None = None) -> GemmProgram:
    """The one program of ``gemms`` with the ops of ``links[i]`` (``None``, one op or a sequence)
    after GEMM ``i``.

    ``links`` has one entry per link (``len(gemms) - 1``), or one more for ops after the last
    GEMM. ``skips[i]``: the GEMM whose input is the second operand of an add on link ``i``
    (default :func:`residual_skips`), or :data:`EXTERNAL`: an input of the network of its own,
    tensor ``s{i}`` (in the link's output layout), e.g. a residual from before the network.

    ``queue_depth``: a program longer than one queue-load runs as queue-loads of that many
    commands (default: refused).

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
            if op.kind in TWO_OPERAND and j != EXTERNAL and (j is None or not 0 <= j <= i
                                                             or (gemms[j].m, gemms[j].k) != (g.m, g.n)):
                raise ModelError(f"link {i}: the {op.kind}'s second operand must be the input of a GEMM 0 .. {i} "
                                 f"of shape {g.m}x{g.n}, not of GEMM {j}")
    externals = [i for i, j in enumerate(skips) if j == EXTERNAL and any(o.kind in TWO_OPERAND for o in ops[i])]
    if keep_on_chip:
        try:
            return _assemble(config, *_on_chip(config, gemms, ops, skips, trailing), externals,
                             queue_depth=queue_depth)
        except ModelError as exc:
            reason = str(exc)
    else:
        reason = "asked for (keep_on_chip = False)"
    try:
        return _assemble(config, *_through_dram(config, gemms, ops, skips, trailing), externals,
                         queue_depth=queue_depth)
    except ModelError as exc:
        raise ModelError(f"{exc} (links through DRAM, because on chip: {reason})") from exc


#: Per GEMM: its program, its link's commands from the placed tensors, whether its RUNs wait for
#: the unit, and the placed tensor its ``A`` is in DRAM (the previous GEMM's ``C``; ``None``: its own).
_Part = tuple[GemmProgram, Callable[[dict[str, TensorLayout]], list[Command]], bool, str | None]


def _on_chip(config: ArrayConfig, gemms: Sequence[Gemm], ops: list[tuple[VectorOp, ...]],
             skips: list[int | None], trailing: bool) -> tuple[list[tuple[str, int]], list[_Part]]:
    """Every link in an ifmap region, skips held there (module docstring)."""
    lanes = config.vector_lanes
    count = len(gemms)
    held = {j: max(i for i in range(count) if skips[i] == j) for j in set(skips) if j is not None and j >= 0}
    regions = _Regions(_buffer_depths(config)[0])
    head: list[tuple[str, int]] = []  # whole tensors LOADed into their regions first
    for i, j in enumerate(skips):
        if j == EXTERNAL and any(op.kind in TWO_OPERAND for op in ops[i]):
            head.append((f"s{i}", regions.take(f"s{i}", region_words(config, gemms[i]))))
    parts: list[_Part] = []
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
            head.append(("a0", a_region))
        if held.get(i, -1) < i:
            regions.free(f"x{i}")
        vector: list[Command] = []
        at = c_region if c_region is not None else 0
        for op in ops[i] if c_region is not None else ():  # c_region is set whenever ops[i] is
            words = region_words(config, gemm)
            if op.kind in ROW_KINDS:  # one row per token: its channel folds M words apart
                shaped = dataclasses.replace(op, shape=(gemm.m, gemm.n), out_shape=(gemm.m, gemm.n), axis=1)
            else:
                shaped = dataclasses.replace(op, shape=(words * lanes,), out_shape=(words * lanes,), axis=None)
            j = skips[i]
            src2 = at if op.kind not in TWO_OPERAND or j is None else regions.at(f"s{i}" if j == EXTERNAL else f"x{j}")
            vector += vector_commands(vector_registers(shaped, lanes, src=at, src2=src2, dst=at,
                                                       colmajor=op.kind in ROW_KINDS), wait_dma=1)
        store_at = c_region if i + 1 == count and trailing else None
        build = functools.partial(_fixed, config, vector, store_at, f"c{i}")
        for j, last in held.items():
            if last == i:
                regions.free(f"x{j}")
        regions.free(f"s{i}")
        parts.append((program, build, i > 0 and bool(ops[i - 1]), None))
    return head, parts


def _fixed(config: ArrayConfig, vector: list[Command], store_at: int | None, name: str,
           tensors: dict[str, TensorLayout]) -> list[Command]:
    """An on-chip link's commands; with ``store_at``, then the STORE of that region to tensor ``name``."""
    if store_at is None:
        return list(vector)
    return [*vector, _whole(config, tensors[name], Opcode.STORE, store_at, wait_vec=1)]


def _chunked(config: ArrayConfig, gemm: Gemm, link: tuple[VectorOp, ...], name: str, skip: str | None,
             tensors: dict[str, TensorLayout], pipeline: bool = False, depth: int | None = None) -> list[Command]:
    """A DRAM link's commands (:func:`_chunk_commands` on the placed tensors)."""
    if not link:
        return []
    return _chunk_commands(config, gemm, link, tensors[name], tensors[skip] if skip is not None else None,
                           pipeline, depth)


def _chunk_commands(config: ArrayConfig, gemm: Gemm, link: tuple[VectorOp, ...], t: TensorLayout,
                    skip: TensorLayout | None, pipeline: bool = False, depth: int | None = None) -> list[Command]:
    """``link``'s ops over DRAM tensor ``t`` (the GEMM's output) in place, in chunks of its DRAM rows
    that fit the ifmap: per chunk LOAD it (and the add's ``skip`` rows) into the ifmap in the
    column-major layout (word ``f`` of row ``r`` at ``f * rows + r``), run the ops, STORE it back.

    With ``pipeline`` (every network's links: a GEMM network's, ``conv_network``'s), when a chunk of the
    tensor's rows fits half the ifmap, the tensor is cut into at least :data:`PIPELINE_CHUNKS` chunks taking turns
    in the two halves (:func:`pipelined`: the next chunk loads while the unit runs on this one), and
    when the ops are element-wise and the rows whole words, a chunk's rows move as one run of words
    (row-major in the ifmap: the ops read any layout alike), in long bursts (a burst never spans two
    DRAM rows). ``depth``: the ifmap words from 0 the chunks may use (default: all of it).

    The commands depend on the design through its vector lanes only (and ``depth``): kept by those
    and the arguments (a sweep builds the same links for designs that differ elsewhere)."""
    depth = _buffer_depths(config)[0] if depth is None else depth
    return list(_link_commands(config.vector_lanes, gemm, tuple(link), t, skip, pipeline, depth))


@functools.lru_cache(maxsize=1 << 12)
def _link_commands(lanes: int, gemm: Gemm, link: tuple[VectorOp, ...], t: TensorLayout, skip: TensorLayout | None,
                   pipeline: bool, depth: int) -> tuple[Command, ...]:
    """:func:`_chunk_commands` of a design with ``lanes`` vector lanes."""
    if t.row_elems % lanes:
        raise ModelError(f"a DRAM row of {t.row_elems} elements of {gemm.m}x{gemm.n} is not whole words of "
                         f"{lanes} lanes")
    words = t.row_elems // lanes
    operands = 2 if skip is not None else 1
    halves = pipeline and depth // 2 // (operands * words) >= 1 and t.rows > 1
    room = (depth // 2 if halves else depth) // (operands * words)
    per = min(-(-t.rows // PIPELINE_CHUNKS) if halves else t.rows, room)
    if per < 1:
        raise ModelError(f"a row of {words} words of {gemm.m}x{gemm.n} does not fit the ifmap ({depth} words) "
                         f"{operands} times")
    flat = pipeline and not any(op.kind in ROW_KINDS for op in link) and words * lanes * t.elem_size == t.pitch and (
        skip is None or skip.pitch == t.pitch)
    if flat:
        per = min(per, _WORDS_MAX // words)
    steps = []
    for k, r0 in enumerate(range(0, t.rows, per)):
        rows = min(per, t.rows - r0)
        base = depth // 2 * (k % 2) if halves else 0

        def move(opcode: int, src: TensorLayout, at: int, wait_vec: int = 0, r0: int = r0, rows: int = rows) -> Command:
            if flat:  # the chunk's rows as one run of words (row-major in the ifmap: element-wise ops only)
                return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP, dram_addr=src.base + r0 * src.pitch,
                                    dram_stride=src.pitch * rows, rows=1, words=rows * words, buf_addr=at,
                                    row_step=rows * words, word_step=1)
            return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP, dram_addr=src.base + r0 * src.pitch,
                                dram_stride=src.pitch, rows=rows, words=words, buf_addr=at, row_step=1,
                                word_step=rows)

        loads = [move(Opcode.LOAD, t, base, wait_vec=1)]
        if skip is not None:
            loads.append(move(Opcode.LOAD, skip, base + per * words))
        vector: list[list[Command]] = []
        for op in link:
            if op.kind in ROW_KINDS:  # DRAM rows are tokens (WS): one unit row per token
                shaped = dataclasses.replace(op, shape=(rows, gemm.n), out_shape=(rows, gemm.n), axis=1)
            else:
                shaped = dataclasses.replace(op, shape=(rows * words * lanes,), out_shape=(rows * words * lanes,),
                                             axis=None)
            src2 = base + per * words if op.kind in TWO_OPERAND else base
            vector.append(vector_commands(vector_registers(shaped, lanes, src=base, src2=src2, dst=base,
                                                           colmajor=op.kind in ROW_KINDS), wait_dma=1))
        steps.append((loads, vector, move(Opcode.STORE, t, base, wait_vec=1)))
    if halves:
        return tuple(pipelined(steps))
    return tuple(c for loads, vector, store in steps for c in (*loads, *(c for op in vector for c in op), store))


def pipelined(steps: Sequence[tuple[list[Command], list[list[Command]], Command]]) -> list[Command]:
    """Chunks ``(loads, ops, store)`` (``ops``: each op's ``VECTOR`` commands, in order) in two
    alternating ifmap buffers, ordered so that chunk ``k + 1``'s loads run while the unit runs chunk
    ``k``: ``L0 | V0 L1 | S0 | V1 L2 | S1 ... S{n-1}``, chunk ``k + 1``'s ``j``-th load right after
    chunk ``k``'s ``j``-th op (commands issue in order: a load after an op that waits for the unit
    to finish the op before it would wait too).

    The first load waits for the unit (``wait_vec``, as every chunk's load does when the chunks run
    one after the other), the later loads do not: their buffer's last chunk was stored before them
    (one DMA engine, in order), after its ops (the store's ``wait_vec``). A chunk's first op waits
    for the DMA (``wait_dma``: its loads and the previous chunk's store), its later ops do not (the
    unit runs its commands in order); each store waits for the unit (only its chunk's ops are
    queued before it)."""
    out: list[Command] = list(steps[0][0]) if steps else []
    for k, (_, ops, store) in enumerate(steps):
        after = steps[k + 1][0] if k + 1 < len(steps) else []
        after = [dataclasses.replace(c, wait_vec=0) for c in after[:1]] + list(after[1:])
        first = True
        for j, commands in enumerate(ops):
            for c in commands:
                if c.opcode == Opcode.VECTOR:
                    c = dataclasses.replace(c, wait_dma=int(first))
                    first = False
                out.append(c)
            if j < len(after):
                out.append(after[j])
        out += after[len(ops):]
        out.append(store)
    return out


def _through_dram(config: ArrayConfig, gemms: Sequence[Gemm], ops: list[tuple[VectorOp, ...]],
                  skips: list[int | None], trailing: bool) -> tuple[list[tuple[str, int]], list[_Part]]:
    """Every link through DRAM: GEMM ``i`` stores its output, its link's ops run on it in ifmap
    chunks (:func:`_chunk_commands`), GEMM ``i + 1`` loads it as its ``A`` (the same layout)."""
    parts: list[_Part] = []
    for i, gemm in enumerate(gemms):
        program = compile_gemm(config, gemm, requant=True)
        j = skips[i]
        skip = None
        if j is not None and any(o.kind in TWO_OPERAND for o in ops[i]):
            skip = f"s{i}" if j == EXTERNAL else f"a{j}"
        parts.append((program, functools.partial(_chunked, config, gemm, ops[i], f"c{i}", skip, pipeline=True), False,
                      f"c{i - 1}" if i > 0 else None))
    return [], parts


def _split(commands: list[Command], depth: int, entry: int) -> tuple[list[Command], tuple[tuple[int, int], ...]]:
    """``commands`` cut into queue-loads of at most ``depth`` commands, each starting on a queue entry of
    ``entry`` commands (the last one padded with ``SYNC``): a ``VECTOR`` stays with its parameter
    block, and a window ``RUN`` that starts a queue-load before any ``WINDOW`` in it gets the last
    ``WINDOW`` again first (a ``START`` clears the window registers). Returns the commands and the
    ``(first, end)`` of each queue-load."""
    if depth < 1 or depth % entry:
        raise ModelError(f"queue_depth must be a positive multiple of {entry} commands, not {depth}")
    out: list[Command] = []
    chunks: list[tuple[int, int]] = []
    n = len(commands)
    ops = [c.opcode for c in commands]
    run, vector, window_op = Opcode.RUN, Opcode.VECTOR, Opcode.WINDOW
    window: Command | None = None  # the last WINDOW before the queue-load
    i = 0
    while i < n:
        # a window RUN before any WINDOW of the queue-load gets the last WINDOW again first (a slot)
        lead = -1  # where it goes
        end = min(i + depth, n)
        if window is not None:
            for j in range(i, end):
                if ops[j] == window_op:
                    break
                if ops[j] == run and commands[j]["window"]:
                    if j - i + 2 <= depth:
                        lead, end = j, min(i + depth - 1, n)
                    else:  # the queue-load ends before it (and it leads the next one)
                        end = j
                    break
        if end < n and ops[end - 1] == vector:  # a VECTOR stays with its parameter block
            end -= 1
        if end <= i:
            size = 1 + (ops[i] == vector and i + 1 < n) + (window is not None and ops[i] == run
                                                            and bool(commands[i]["window"]))
            raise ModelError(f"a group of {size} commands does not fit a queue-load of {depth}")
        start = len(out)
        if lead >= 0:
            out += commands[i:lead]
            out.append(window)  # type: ignore[arg-type]  # a lead implies a window
            out += commands[lead:end]
        else:
            out += commands[i:end]
        for j in range(end - 1, i - 1, -1):
            if ops[j] == window_op:
                window = commands[j]
                break
        i = end
        if i < n:
            out += [_SYNC] * (-(len(out) - start) % entry)  # (at most depth: a multiple of entry)
        chunks.append((start, len(out)))
    return out, tuple(chunks)


_SYNC = Command.make(Opcode.SYNC)


def _assemble(config: ArrayConfig, head: list[tuple[str, int]], parts: list[_Part],
              externals: Sequence[int], whole: Callable[..., Command] = _whole,
              queue_depth: int | None = None, timed: bool = False) -> GemmProgram:
    """The parts' programs back to back as one queue-load, their tensors after the whole program, then
    the external skip operands ``s{i}`` (laid out as ``c{i}``); ``head``: ``(tensor, region)`` of the
    whole tensors LOADed first, each by ``whole(config, tensor, Opcode.LOAD, region)``. With
    ``queue_depth``, a longer program runs as several queue-loads of that many commands
    (:func:`_split`; the buffers keep their contents from one to the next). The tensors are placed
    after the program, so its commands are emitted twice (to count them, then placed); ``timed``
    (the parts are ``perf_model.compiler.conv_timed``'s, for figures only): once, each part's
    commands as made, whole pages from their tensors once placed (a walk sees an address modulo a
    page only, as a timed conv's transfers do)."""
    def place(cursor: int) -> tuple[dict[str, TensorLayout], list[int], int]:
        tensors: dict[str, TensorLayout] = {}
        shifts = []
        for i, (program, _, _, alias) in enumerate(parts):
            first = min(t.base for t in program.tensors.values())
            shift = cursor - first
            shifts.append(shift)
            for name, t in program.tensors.items():
                tensors[f"{name}{i}"] = dataclasses.replace(t, base=t.base + shift)
            if alias is not None:
                a, c = tensors[f"a{i}"], tensors[alias]
                # A tap-packed conv's A has the sliding load's ``T - 1`` tail pixels past its input
                # (``perf_model.compiler.conv_pack``), which its window masks; read past the
                # producer's rows, they land in the tensors placed after it.
                pack = getattr(program, "pack", 0)
                tail = (1 << pack) - 1 if pack else 0
                if (a.rows, a.row_elems, a.elem_bytes, a.packed) != (c.rows + tail, c.row_elems, c.elem_bytes,
                                                                     c.packed):
                    raise ModelError(f"op {i}'s A ({a.rows} rows of {a.row_elems}) is not laid out as its input "
                                     f"{alias} ({c.rows} rows of {c.row_elems})")
                tensors[f"a{i}"] = dataclasses.replace(a, base=c.base)
            cursor = _align(max(t.base + t.nbytes for t in program.tensors.values()) + shift, PAGE)
        for i in externals:
            tensors[f"s{i}"] = dataclasses.replace(tensors[f"c{i}"], name=f"s{i}", base=cursor)
            cursor = _align(cursor + tensors[f"s{i}"].nbytes, PAGE)
        return tensors, shifts, cursor

    def emit(tensors: dict[str, TensorLayout], shifts: list[int]) -> tuple[list[Command], tuple[tuple[int, int], ...]]:
        commands = [whole(config, tensors[name], Opcode.LOAD, region) for name, region in head]
        for i, (program, build, after_vector, alias) in enumerate(parts):
            if timed:  # its transfers timed (none of them a compiled ifmap LOAD), left where they are
                moved = [_shifted(c, 0, True) for c in program.commands] if after_vector else list(program.commands)
                commands += moved + build(tensors)
                continue
            moved = [_shifted(c, shifts[i], after_vector) for c in program.commands]
            if alias is not None:  # the A loads read the previous GEMM's output
                a = program.tensors["a"]
                lo, hi = a.base + shifts[i], a.base + shifts[i] + a.nbytes
                delta = tensors[f"a{i}"].base - lo
                moved = [_shifted(c, delta, False) if c.opcode == Opcode.LOAD and type(c) is not TimedCommand
                         and c["buffer"] == Buffer.IFMAP and lo <= c["dram_addr"] < hi else c for c in moved]
            commands += moved + build(tensors)
        if queue_depth is None:
            if len(commands) > QUEUE_DEPTH:
                raise ModelError(f"the network's program has {len(commands)} commands, more than one queue-load of "
                                 f"{QUEUE_DEPTH}")
            return commands, ((0, len(commands)),)
        return _split(commands, queue_depth, queue_entry_commands(parts[0][0].data_bytes))

    draft, draft_shifts, _ = place(0)
    commands, chunks = emit(draft, draft_shifts)
    tensors, shifts, end = place(_align(len(commands) * COMMAND_BYTES, PAGE))
    if not timed:
        commands, chunks = emit(tensors, shifts)
    return GemmProgram(tuple(commands), tensors, 0, end, parts[0][0].data_bytes, True,
                       tuple(r for p, _, _, _ in parts for r in p.runs), chunks)

