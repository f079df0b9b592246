"""One program for a chain of convolutions: each conv's output kept on chip as the next one's input.

A conv network here is a chain of requantised convolutions (:class:`~workloads.ops.Conv2d`, run
with windows built on chip: ``perf_model.compiler.conv``) where conv ``i + 1``'s input is conv
``i``'s output (the same images, rows, columns and channels), with on any link (and after the
last conv) vector ops applied in order to the producer's output, in place: the element-wise ops
of ``perf_model.compiler.network`` (``relu``, ``relu6``, ``gelu``, ungated ``silu``) and the
residual ``add``, whose second operand is the input of an earlier conv (by default the first
conv of its block: ``network.residual_skips``) held in the ifmap while the convs between run, or
an input of the network of its own (``network.EXTERNAL``), and, last on a link before another
conv, a max or average pooling (windowed or global): the next conv reads the pooled tensor.

On chip, a tensor between two convs is an ifmap region holding the whole NHWC tensor as the
consumer's window reads it: pixel ``p``'s channel word ``f`` (``R`` channels a word; ``R == C``)
at ``region + p * words + f``, the pixels of all images in order. Regions are placed first fit from
the top of the ifmap (``network._Regions``). Conv ``i``:

* reads its input in place (``compile_conv``'s ``a_region``: no band is loaded, the pads are made
  on chip by the window as from a band), or, for conv 0 when its input is no skip operand, loads
  its bands from DRAM into the ifmap words below every live region (``ifmap_words``); a skip
  operand that is the network's input is LOADed whole into its region first;
* MOVEs its output into a new region instead of storing it (``c_region``); the link's ``VECTOR``
  commands run there once the MOVEs are in (``wait_dma``), and the next conv's RUNs wait for the
  unit (``wait_vec``);
* the last conv stores its output to DRAM, unless ops follow it: then they run on its region and
  a ``STORE`` of the region (``wait_vec``) writes the network's output;
* a pooling reads the conv's output region (after the link's other ops) and writes the pooled
  tensor to a region of its own, which the next conv reads in place.

When the regions do not fit the ifmap together with the bands of a conv, the compiler keeps what
fits, per group of tensors (:func:`_ties`: an add's output with its operand, every other tensor on
its own), greedily in order, and keeps that program when its walk is not slower than every link
through DRAM (:func:`_keep_links`); a tensor not kept goes through DRAM as below, a conv reading it
tiles its bands, and its link's chunks run, in the ifmap words below the regions live then.
With ``keep_on_chip=False`` (or on a design that cannot ``MOVE`` into its ifmap) every link goes
through DRAM, still in the one program: conv ``i`` stores its output, the link's
ops run on it in ifmap chunks of its DRAM rows (``network._chunk_commands`` with ``pipeline``: at
least ``network.PIPELINE_CHUNKS`` chunks taking turns in the two halves of the ifmap, the next
loading while the unit runs this one, a chunk's pixels moved as one run of words), conv ``i + 1``
loads its bands from it; a pooling runs over the stored output in bands of rows
(``conv_dram_links.pool_bands``, in the two halves alike) and stores the pooled tensor ``p{i}``, laid out as
the next conv's input. A whole NHWC tensor or band of pixels moves as DRAM rows of as many pixels
as the command's ``words`` field holds (``conv_dram_links.nhwc``): the same bytes and ifmap words as a row a
pixel, in longer bursts. The DRAM layouts (``a``,
``b``, ``c``, ``q`` per conv, named ``a0``, ``b{i}``, ``q{i}``, ``c{last}``) are ``compile_conv``'s;
the programs are assembled as one queue-load by ``network._assemble``.

The network's input is the host's to write: with ``input_form`` (the whole workload's program,
``network_figures``), when conv 0 alone reads it, the host writes it in the layout of conv 0's
fastest form (:func:`input_steps`: the form the per-op plan runs that conv in on chip,
``conv_score.conv_steps``, over its space-to-depth input or its kernel rows stacked as channels; or
its windows as channels, ``im2col_form``, the host's im2col GEMM as a 1x1 conv, where that scores
fewer cycles), and conv 0's program runs that form (``ConvNetworkProgram.input_steps``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import QUEUE_DEPTH, Command, Opcode
from accel_spec.vector_isa import POOL_KINDS, pool_geometry
from perf_model.compiler.conv import ConvProgram, ConvTiling, compile_conv
from perf_model.compiler.conv_dram_links import TimedLink, pool_bands
from perf_model.compiler.conv_dram_links import nhwc as _nhwc
from perf_model.compiler.conv_forms import form_conv
from perf_model.compiler.conv_score import conv_figures, conv_steps
from perf_model.compiler.conv_timed import timed_conv, unbuffered_key
from perf_model.compiler.im2col_form import im2col_conv
from perf_model.compiler.network import (
    EXTERNAL,
    TWO_OPERAND,
    Link,
    _align,
    _assemble,
    _chunked,
    _Part,
    _Regions,
    link_ops,
    residual_skips,
)
from perf_model.compiler.program import (
    PAGE,
    GemmProgram,
    TensorLayout,
    _buffer_depths,
    reuse_possible,
)
from perf_model.compiler.vector import vector_commands, vector_registers
from perf_model.evaluator.conv_ops import ConvFigures
from perf_model.program_timing import dram_rate, gemm_program_cycles
from workloads.ops import Conv2d, Gemm
from workloads.vector_ops import VectorOp

__all__ = ["compile_conv_network", "ConvNetworkProgram", "CONV_LINK_KINDS", "input_steps", "input_words",
           "output_words", "pooled_shape", "tensor_shapes"]


@dataclasses.dataclass(frozen=True)
class ConvNetworkProgram(GemmProgram):
    """The one program of a conv network, with each conv's own program (its tiling, runs and the
    layout of its weights ``b{i}``: ``perf_model.compiler.conv.conv_weight_matrix``), whether every
    link stayed on chip (``on_chip``), else the tensors kept on chip (``kept``: tensor ``t`` is the
    network's input for 0, conv ``t - 1``'s output after its link's ops; ``()``: all through DRAM).
    ``input_steps``: the reshapes (``conv_forms``) of the network's input the
    host writes, conv 0's program being over that reshaped input (``compile_conv_network``'s
    ``input_form``), or ``()``."""

    convs: tuple[ConvProgram, ...] = ()
    on_chip: bool = False
    input_steps: tuple[str, ...] = ()
    kept: tuple[int, ...] = ()

    @property
    def links(self) -> str:
        """Where the activations between convs go: ``"on chip"``, ``"through DRAM"``, or how many
        tensors stayed on chip with the others through DRAM (``kept``)."""
        if self.on_chip:
            return "on chip"
        if not self.kept:
            return "through DRAM"
        count = len(self.kept)
        return f"partly on chip ({count} tensor{'' if count == 1 else 's'} kept in the ifmap), the others through DRAM"


#: Vector ops a conv link may carry (element-wise over the NHWC words, ``f(0) = 0``; the add; a
#: pooling, last on its link: it writes the pooled tensor to a region of its own).
CONV_LINK_KINDS = ("relu", "relu6", "gelu", "silu", "add", "maxpool", "avgpool")


def input_words(config: ArrayConfig, conv: Conv2d) -> int:
    """Ifmap words ``conv``'s whole NHWC input takes in a region (whole words of ``R`` channels)."""
    return conv.n * conv.h * conv.w * -(-conv.c_in // config.rows)


def output_words(config: ArrayConfig, conv: Conv2d) -> int:
    """Ifmap words ``conv``'s whole NHWC output takes in a region (whole words of ``C`` channels)."""
    return conv.n * conv.out_h * conv.out_w * -(-conv.c_out // config.cols)


def pooled_shape(op: VectorOp) -> tuple[int, int, int, int]:
    """The NHWC output of pooling ``op`` (``ModelError`` if its geometry is not one the unit runs)."""
    g = pool_geometry(op.kind, op.shape, dict(op.params), 1)
    if isinstance(g, str):
        raise ModelError(g)
    return (op.shape[0], g.out_h, g.out_w, op.shape[3])


def tensor_shapes(convs: Sequence[Conv2d], ops: Sequence[Sequence[VectorOp]]) -> list[tuple[int, int, int, int]]:
    """NHWC shape of each tensor of a conv network: ``0`` the network's input, ``i + 1`` conv ``i``'s
    output after the ops of its link ``ops[i]`` (pooled where a pooling ends the link; ``ModelError``
    if its geometry is not one the unit runs)."""
    shapes = [(convs[0].n, convs[0].h, convs[0].w, convs[0].c_in)]
    for conv, link in zip(convs, ops, strict=True):
        pooled = link and link[-1].kind in POOL_KINDS
        shapes.append(pooled_shape(link[-1]) if pooled else (conv.n, conv.out_h, conv.out_w, conv.c_out))
    return shapes


def _flat(op: VectorOp, words: int, lanes: int) -> VectorOp:
    return dataclasses.replace(op, shape=(words * lanes,), out_shape=(words * lanes,), axis=None)


def compile_conv_network(config: ArrayConfig, convs: Sequence[Conv2d], links: Sequence[Link],
                         skips: Sequence[int | None] | None = None, *, inputs: Sequence[int] | None = None,
                         keep_on_chip: bool = True, queue_depth: int = QUEUE_DEPTH,
                         tilings: Sequence[ConvTiling | None] | None = None,
                         require_on_chip: bool = False, input_form: bool = False,
                         timed: bool = False) -> ConvNetworkProgram:
    """The one program of ``convs`` with the ops of ``links[i]`` after conv ``i`` (module docstring;
    ``links`` as ``perf_model.compiler.network.compile_network``'s).

    Tensors are numbered: ``0`` the network's input, ``i + 1`` conv ``i``'s output after its link's
    ops. ``inputs[i]``: the tensor conv ``i`` reads (default ``i``: a chain); ``inputs = (0, 1, 0)``
    with an add on link 2 of ``skips[2] = 2`` is a ResNet block with its downsample: conv 0, conv 1,
    the 1x1 stride-2 downsample of the block's input, then ``downsample + conv 1``. ``skips[i]``: the
    tensor of the second operand of an add on link ``i`` (default: the input of the first conv of its
    block, ``network.residual_skips``), or ``network.EXTERNAL``. A program of more than
    ``queue_depth`` commands runs as several queue-loads (the ifmap keeps its regions from one to the
    next; ``network._split``). ``tilings[i]`` replaces the search's tiling of conv ``i`` (tests).
    ``require_on_chip``: raise instead of compiling the links through DRAM (the model's chain scorer,
    which only wants the program on chip). ``input_form``: the host writes the network's input in
    the layout of conv 0's fastest form (:func:`input_steps`: over its space-to-depth input, its
    kernel rows stacked, or its windows as channels), when conv 0 alone reads that input and no
    tiling is given; the program's ``input_steps`` name the reshapes (none: the input as it is).
    ``timed``: each conv's program as ``perf_model.compiler.conv_timed`` lays it out (its transfers
    and runs as their cycles and bytes, each transfer with its geometry for a paced DRAM): the same
    walk and bytes, for figures only (the program is not encodable).

    Raises:
        ModelError: no vector unit while a link has ops, ``links``/``skips``/``inputs`` of the wrong
            length, a conv reading a tensor of another shape or not earlier, a tensor nothing reads
            (but the last conv's output), an unrequantised conv, an op the unit cannot run on a conv
            link, a skip operand of another shape or not earlier, or a conv that cannot be tiled.
    """
    args = (config, convs, links, skips)
    kwargs: dict[str, Any] = dict(inputs=inputs, keep_on_chip=keep_on_chip, queue_depth=queue_depth, tilings=tilings,
                                  require_on_chip=require_on_chip, input_form=input_form)
    prog = _compile(*args, **kwargs, timed=timed)
    if timed and prog.dram_bytes > 1 << 32:  # addresses past 32 bits once placed: what the compiler makes of them
        return _compile(*args, **kwargs, timed=False)
    return prog


def _compile(config: ArrayConfig, convs: Sequence[Conv2d], links: Sequence[Link], skips: Sequence[int | None] | None,
             *, inputs: Sequence[int] | None, keep_on_chip: bool, queue_depth: int,
             tilings: Sequence[ConvTiling | None] | None, require_on_chip: bool, input_form: bool,
             timed: bool) -> ConvNetworkProgram:
    """:func:`compile_conv_network`."""
    count = len(convs)
    if len(links) not in (max(0, count - 1), count):
        raise ModelError(f"a network of {count} convs has {max(0, count - 1)} links (or one more op after the "
                         f"last conv), not {len(links)}")
    ops = [link_ops(link) for link in links] + [()] * (count - len(links))
    trailing = len(links) == count and bool(ops[-1])
    if any(ops) and not config.vector_lanes:
        raise ModelError(f"design {config.short_name()} has no vector unit (vector_unit = false)")
    reads = list(range(count)) if inputs is None else list(inputs)
    given_tilings: list[ConvTiling | None] = list(tilings) if tilings is not None else [None] * count
    if len(given_tilings) != count:
        raise ModelError(f"tilings must have one entry per conv ({count}), not {len(given_tilings)}")
    if len(reads) != count:
        raise ModelError(f"inputs must have one tensor per conv ({count}), not {len(reads)}")
    if skips is None:
        skip_of: list[int | None] = [None if j is None else reads[j] for j in residual_skips(ops)]
    else:
        skip_of = list(skips)
    if len(skip_of) > count:
        raise ModelError(f"skips must have at most one entry per link and op ({count}), not {len(skip_of)}")
    skip_of += [None] * (count - len(skip_of))
    for i, c in enumerate(convs):
        out = (c.n, c.out_h, c.out_w, c.c_out)
        for at, op in enumerate(ops[i]):
            if op.kind in POOL_KINDS and (at + 1 != len(ops[i]) or op.shape != out):
                raise ModelError(f"link {i}: a {op.kind} must be the link's last op, on conv {i}'s "
                                 f"{'x'.join(map(str, out))} output (NHWC), not {'x'.join(map(str, op.shape))}")
    shapes = tensor_shapes(convs, ops)
    used = set(reads)
    for i, conv in enumerate(convs):
        k = reads[i]
        if not 0 <= k <= i or shapes[k] != (conv.n, conv.h, conv.w, conv.c_in):
            got = "x".join(map(str, shapes[k])) if 0 <= k <= i else "none yet"
            raise ModelError(f"conv {i} reads {conv.n}x{conv.h}x{conv.w}x{conv.c_in} (NHWC), not tensor {k} "
                             f"({got}): its input must be the network's input or an earlier conv's output")
        if conv.requant is None:
            raise ModelError(f"conv {i} is not requantised: only int8 outputs stay on chip")
        out = (conv.n, conv.out_h, conv.out_w, conv.c_out)
        for op in ops[i]:
            if op.kind not in CONV_LINK_KINDS or (op.kind == "silu" and op.param("gated", 0)):
                raise ModelError(f"link {i}: a {op.kind} cannot run in place on a conv link (one of "
                                 f"{', '.join(CONV_LINK_KINDS)}, ungated)")
            j = skip_of[i]
            if op.kind in TWO_OPERAND and j != EXTERNAL:
                if j is None or not 0 <= j <= i or shapes[j] != out:
                    raise ModelError(f"link {i}: the {op.kind}'s second operand must be a tensor 0 .. {i} of shape "
                                     f"{'x'.join(map(str, out))} (NHWC), not tensor {j}")
                used.add(j)
    for k in range(1, count):
        if k not in used:
            raise ModelError(f"conv {k - 1}'s output (tensor {k}) is read by no later conv or add")
    # link -> the tensor its add reads as the second operand (or EXTERNAL), for the links with an add
    adds = {i: j for i, j in enumerate(skip_of) if j is not None and any(o.kind in TWO_OPERAND for o in ops[i])}
    externals = [i for i, j in adds.items() if j == EXTERNAL]
    if trailing and ops[-1][-1].kind in POOL_KINDS:
        raise ModelError("a pooling after the last conv: the network's output is the last conv's (store, then pool)")
    steps: tuple[str, ...] = ()
    if input_form and reads.count(0) == 1 and 0 not in adds.values() and given_tilings[0] is None:
        steps = input_steps(config, convs[0])
    runs = [form_conv(convs[0], steps), *convs[1:]] if steps else list(convs)
    reason = "asked for (keep_on_chip = False)"
    if keep_on_chip and not reuse_possible(config):
        reason = f"design {config.short_name()} cannot move an output into its ifmap (WS with R == C)"
    elif keep_on_chip:
        try:
            return _program(config, _on_chip(config, runs, ops, adds, reads, trailing, given_tilings, timed=timed),
                            externals, True, queue_depth, steps, timed=timed)
        except ModelError as exc:
            reason = str(exc)
    if require_on_chip:
        raise ModelError(f"the links cannot stay on chip: {reason}")

    memo: dict[tuple[object, ...], Any] = {}

    def plan(kept: frozenset[int]) -> object:
        return _on_chip(config, runs, ops, adds, reads, trailing, given_tilings, kept, memo, timed)

    def build(kept: frozenset[int]) -> ConvNetworkProgram:
        return _program(config, _on_chip(config, runs, ops, adds, reads, trailing, given_tilings, kept, memo, timed),
                        externals, False, queue_depth, steps, tuple(sorted(kept)), timed)

    try:
        prog = build(frozenset())
    except ModelError as exc:
        raise ModelError(f"{exc} (links through DRAM, because on chip: {reason})") from exc
    if keep_on_chip and reuse_possible(config):
        prog = _keep_links(config, prog, build, plan, _ties(count, adds, reads, trailing))
    return prog


def _ties(count: int, adds: dict[int, int], reads: list[int], trailing: bool) -> list[frozenset[int]]:
    """The tensors a network may keep on chip, in groups kept together, in order of their first
    tensor: an add's output and its operand are one group (the add runs on the output's region with
    the operand's region, or over both in DRAM), so a ResNet's residual trunk (each block's input and
    output, a downsample's output and the block's last conv's) is one group, each block's inner link
    one of its own. Tensor 0 (the network's input, always in DRAM) is one only when it is read again
    (held whole from the start), the network's output only when ops follow the last conv."""
    group = list(range(count + 1))

    def root(t: int) -> int:
        while group[t] != t:
            t = group[t]
        return t

    for i, j in adds.items():
        if j >= 0:
            group[root(i + 1)] = root(j)
    candidates = [t for t in range(1, count + 1) if t < count or trailing]
    if reads.count(0) > 1 or 0 in adds.values():
        candidates.insert(0, 0)
    out: dict[int, set[int]] = {}
    for t in candidates:
        out.setdefault(root(t), set()).add(t)
    return sorted((frozenset(g) for g in out.values()), key=min)


def _keep_links(config: ArrayConfig, prog: ConvNetworkProgram,
                build: Callable[[frozenset[int]], ConvNetworkProgram], plan: Callable[[frozenset[int]], object],
                groups: list[frozenset[int]]) -> ConvNetworkProgram:
    """``prog`` (every link through DRAM), or the program with the groups of tensors kept on chip
    chosen greedily in order when its walk is not slower: a group is kept when the network still
    plans with it beside those kept already (``plan``: its regions, and every conv's bands and every
    DRAM link's chunks and bands below them, fit the ifmap; each conv's program memoised, so a
    group costs the convs whose regions or room change). Then two walks (``program_timing``, at the
    design's DRAM pacing): that program's and ``prog``'s, the faster kept (on a tie, the one with
    the links on chip). Keeping a group by its walk instead (a walk per group) measured no better on
    random ResNet-18 and MobileNetV2 designs and took 2-3x the CPU (``docs/memory_system.md``)."""
    kept: frozenset[int] = frozenset()
    for g in groups:
        try:
            plan(kept | g)
        except ModelError:
            continue
        kept |= g
    if not kept:
        return prog
    try:
        cand = build(kept)
    except ModelError:  # a field past its bits only once placed: the program without the groups
        return prog
    rate = dram_rate(config)
    if gemm_program_cycles(config, cand, rate=rate).total <= gemm_program_cycles(config, prog, rate=rate).total:
        return cand
    return prog


def input_steps(config: ArrayConfig, conv: Conv2d) -> tuple[str, ...]:
    """The reshapes of a network's input the host writes for its first conv ``conv``: the form the
    per-op plan runs that conv in on chip (``conv_score.conv_steps``), or its windows as channels
    (``"im2col"``: the host's im2col GEMM as a 1x1 conv, ``im2col_form``) when that conv scores fewer
    cycles (``conv_score.conv_figures``, then fewer DRAM bytes)."""
    steps = conv_steps(config, conv, True)
    flat = im2col_conv(conv)
    if flat is None:
        return steps
    best = conv_figures(config, conv, True)
    other = conv_figures(config, flat, True)
    if isinstance(other, ConvFigures) and other.feasible and (
            not isinstance(best, ConvFigures) or not best.feasible or _rank(other) < _rank(best)):
        return ("im2col",)
    return steps


def _rank(figures: ConvFigures) -> tuple[float, float]:
    return figures.total, sum(figures.read) + sum(figures.write)


def _program(config: ArrayConfig, planned: tuple[list[tuple[str, int]], list[_Part]], externals: list[int],
             on_chip: bool, queue_depth: int, input_steps: tuple[str, ...],
             kept: tuple[int, ...] = (), timed: bool = False) -> ConvNetworkProgram:
    head, parts = planned
    prog = _assemble(config, head, parts, externals, whole=_nhwc, queue_depth=queue_depth, timed=timed)
    fields = {f.name: getattr(prog, f.name) for f in dataclasses.fields(GemmProgram)}
    return ConvNetworkProgram(**fields, convs=tuple(p[0] for p in parts), on_chip=on_chip,  # type: ignore[misc]
                              input_steps=input_steps, kept=kept)


def _on_chip(config: ArrayConfig, convs: Sequence[Conv2d], ops: list[tuple[VectorOp, ...]],
             adds: dict[int, int], reads: list[int], trailing: bool, tilings: list[ConvTiling | None],
             kept: frozenset[int] | None = None,
             memo: dict[tuple[object, ...], Any] | None = None,
             timed: bool = False) -> tuple[list[tuple[str, int]], list[_Part]]:
    """The tensors ``kept`` (default: every tensor) in ifmap regions, each held until its last reader,
    the others through DRAM (module docstring; ``adds``: per link with an add, the tensor of its
    second operand, or ``EXTERNAL``; an add's output and operand are both kept or neither:
    :func:`_ties`). A conv reading a tensor in DRAM tiles its bands, and a link whose output goes to
    DRAM runs its chunks (or pooling bands), in the ifmap words below the regions live then. ``memo``:
    conv ``i``'s program (or why it cannot be built) by ``(i, a_region, c_region, ifmap words)``,
    shared by the builds of one network (:func:`_keep_links`); ``timed``: each conv's program timed
    (``conv_timed``)."""
    lanes = config.vector_lanes
    compile_one = timed_conv if timed else compile_conv
    count = len(convs)
    keep = frozenset(range(count + 1)) if kept is None else kept
    pooled = {i for i in range(count) if ops[i] and ops[i][-1].kind in POOL_KINDS}

    def name(t: int) -> str:  # tensor t in DRAM
        if t == 0:
            return "a0"
        return f"p{t - 1}" if t - 1 in pooled else f"c{t - 1}"

    last: dict[int, int] = {}  # tensor -> the last conv (or link) reading it
    for i in range(count):
        last[reads[i]] = max(last.get(reads[i], i), i)
    for i, j in adds.items():
        if j >= 0:
            last[j] = max(last.get(j, i), i)
    regions = _Regions(_buffer_depths(config)[0])
    head: list[tuple[str, int]] = []
    for i, j in adds.items():
        if j == EXTERNAL and i + 1 in keep:
            head.append((f"s{i}", regions.take(f"s{i}", output_words(config, convs[i]))))
    if 0 in keep and (last.get(0, 0) > 0 or 0 in adds.values()):  # read again: held whole from the start
        head.append(("a0", regions.take("x0", input_words(config, convs[0]))))
    programs: list[ConvProgram] = []
    aliases: list[str | None] = []
    builds: list[Callable[[dict[str, TensorLayout]], list[Command]]] = []
    for i, conv in enumerate(convs):
        k = reads[i]
        a_region = regions.at(f"x{k}") if f"x{k}" in regions.live else None
        c_region = None
        pool_region = 0
        pool = ops[i][-1] if i in pooled else None
        on_chip = i + 1 in keep and (i + 1 < count or bool(ops[i]))
        if pool is not None and on_chip:  # the conv's output, then the pooled tensor in a region of its own
            c_region = regions.take(f"y{i}", output_words(config, conv))
            g = vector_registers(pool, lanes).plan
            pool_region = regions.take(f"x{i + 1}", g.rows * g.out_words)
        elif on_chip:
            c_region = regions.take(f"x{i + 1}", output_words(config, conv))
        words_below = regions.low() if a_region is None else None
        key = (i, a_region, c_region, words_below)
        got = memo.get(key) if memo is not None else None
        if got is None:
            try:
                got = compile_one(config, conv, requant=True, a_region=a_region, c_region=c_region,
                                  ifmap_words=words_below, tiling=tilings[i])
            except ModelError as exc:
                got = ModelError(f"conv {i} beside the network's live tensors: {exc}") if regions.live else exc
            if memo is not None:
                memo[key] = got
        if isinstance(got, ModelError):
            raise got
        program = got
        programs.append(program)
        aliases.append(name(k) if a_region is None and i > 0 else None)  # its input in DRAM
        operand = adds.get(i)
        if not on_chip:  # its output stored; the link's ops over it in DRAM, below the live regions
            rows = conv.n * conv.out_h * conv.out_w  # the output as the chunks see it: a DRAM row a pixel
            stand_in = Gemm(m=rows, k=1, n=conv.c_out)
            skip = None if operand is None else f"s{i}" if operand == EXTERNAL else name(operand)
            if pool is not None:
                build = functools.partial(pool_bands, config, conv, stand_in, ops[i], i, skip, depth=regions.low())
            else:
                build = functools.partial(_chunked, config, stand_in, ops[i], f"c{i}", skip, pipeline=True,
                                          depth=regions.low())
            # timed: the link's commands built once a network (each placement moves its tensors by whole
            # pages), and shared by the networks of designs that differ in what they do not read
            if timed and memo is not None:
                reads_ = (f"c{i}", *((f"p{i}",) if pool is not None else ()), *((skip,) if skip else ()))
                builds.append(TimedLink(config, build, memo, ("link", i, skip, regions.low()),
                                    (unbuffered_key(config), conv, ops[i], regions.low()), reads_))
            else:
                builds.append(build)
        else:
            at = c_region if c_region is not None else 0  # c_region is set whenever ops[i] is
            src2 = at
            if operand is not None:
                src2 = regions.at(f"s{i}" if operand == EXTERNAL else f"x{operand}")
            vector_key = ("vector", i, at, pool_region, src2)
            vector = memo.get(vector_key) if memo is not None else None
            if vector is None:
                vector = _link_vector(config, ops[i], pool, output_words(config, conv), at, pool_region, src2)
                if memo is not None:
                    memo[vector_key] = vector
            store_at = c_region if i + 1 == count and trailing else None
            builds.append(functools.partial(_fixed, config, vector, store_at, f"c{i}"))
        for t, end in last.items():
            if end == i:
                regions.free(f"x{t}")
        regions.free(f"s{i}")
        regions.free(f"y{i}")
    parts: list[_Part] = []
    for i, program in enumerate(programs):
        if i in pooled and i + 1 not in keep:  # the pooled tensor laid out as its reader's input
            reader = programs[reads.index(i + 1)]
            a = reader.tensors["a"]
            tail = (1 << reader.pack) - 1 if getattr(reader, "pack", 0) else 0
            top = max(t.base + t.nbytes for t in program.tensors.values())
            layout = dataclasses.replace(a, name="p", base=_align(top, PAGE), rows=a.rows - tail)
            program = dataclasses.replace(program, tensors={**program.tensors, "p": layout})
        # a conv's RUNs wait for the unit once a link before it ran ops on chip (its input, or a region it reuses)
        after_vector = any(ops[t] for t in range(i) if t + 1 in keep)
        parts.append((program, builds[i], after_vector, aliases[i]))
    if kept is not None:  # the DRAM links' chunks and bands fit below the regions (ModelError if not)
        _dry_run(parts, adds)
    return head, parts


def _link_vector(config: ArrayConfig, link: tuple[VectorOp, ...], pool: VectorOp | None, words: int, at: int,
                 pool_region: int, src2: int) -> list[Command]:
    """An on-chip link's ``VECTOR`` commands: its ops in place on the region at ``at`` of ``words``
    words (a two-operand op's second operand at ``src2``), a pooling into ``pool_region``."""
    lanes = config.vector_lanes
    vector: list[Command] = []
    for op in link:
        if op is pool:
            vector += vector_commands(vector_registers(op, lanes, src=at, src2=at, dst=pool_region), wait_dma=1)
            continue
        second = src2 if op.kind in TWO_OPERAND else at
        vector += vector_commands(vector_registers(_flat(op, words, lanes), lanes, src=at, src2=second, dst=at),
                                  wait_dma=1)
    return vector


def _dry_run(parts: list[_Part], adds: dict[int, int]) -> None:
    """Build every DRAM link's commands of ``parts`` over their tensors as compiled (unplaced: the
    addresses do not matter, the chunks' and bands' fit does), raising the builder's ``ModelError``."""
    tensors: dict[str, TensorLayout] = {}
    for i, (program, _, _, _) in enumerate(parts):
        tensors.update({f"{name}{i}": t for name, t in program.tensors.items()})
    for i, j in adds.items():
        if j == EXTERNAL:
            tensors[f"s{i}"] = tensors[f"c{i}"]
    for _, build, _, _ in parts:
        if build.func is not _fixed:  # type: ignore[attr-defined]
            build(tensors)


def _fixed(config: ArrayConfig, vector: list[Command], store_at: int | None, name: str,
           tensors: dict[str, TensorLayout]) -> list[Command]:
    """An on-chip link's commands; with ``store_at``, then the STORE of that region to tensor ``name``."""
    if store_at is None:
        return list(vector)
    return [*vector, _nhwc(config, tensors[name], Opcode.STORE, store_at, wait_vec=1)]


