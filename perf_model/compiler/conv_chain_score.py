"""The figures of a chain of convs kept on chip, from its one program (the evaluator's chain scorer).

A chain is two or more requantised convolutions where each reads the previous one's NHWC output
as is (``workloads.conv_chain_link``; ResNet's ``conv1 -> conv2`` inside a basic block, whose ReLU
is the output stage's clamp). On a design that can keep a layer's output in its ifmap (weight
stationary with ``R == C``), ``perf_model.compiler.conv_network.compile_conv_network`` builds the
chain as one program with every link on chip: conv ``i`` MOVEs its output into an ifmap region,
conv ``i + 1``'s window reads it in place (one tap a word: an input on chip has no sliding words,
so tap packing is lost). ``perf_model.evaluator.conv_ops`` asks :func:`chain_figures` for that
program's figures and keeps the chain when it beats the convs' own programs
(``conv_ops.choose_path``).

The figures are the program's own:

* the chain's total cycles are the program walk's (``gemm_program_cycles`` at the design's DRAM
  pacing: the RTL's counters, ``tests/rtl_gen/test_rtl_conv_network.py``); the
  program is timed (``perf_model.compiler.conv_timed``: its transfers and runs as their cycles and
  bytes, the same walk), which ``tests/perf_model/test_model_conv_timed.py`` holds equal to the
  compiled program's figures;
* each conv's compute cycles are those of its ``RUN`` commands (they add up to the walk's);
* each conv's DRAM bytes are its own transfers' (``conv_score.program_bytes``: the first conv's
  bands and weights, the others' weights, the last one's output), its SRAM bytes by the rules of
  ``conv_score.run_figures``, the ifmap written by its MOVEs too;
* the walk's stall cycles (``total - compute``) are shared among the convs in proportion to their
  DRAM bytes: the one program has no per-conv counter, so this split is a display; every total
  over the chain is exact.

A chain the compiler cannot keep on chip (the regions do not fit beside the first conv's bands)
gives the compiler's reason instead (it is not compiled through DRAM: ``require_on_chip``).
Results are cached by the design fields a program sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Opcode
from perf_model import timing
from perf_model.compiler.conv_network import compile_conv_network, output_words
from perf_model.compiler.conv_score import design_key, program_bytes, run_figures
from perf_model.evaluator.conv_ops import ConvFigures
from perf_model.program_timing import TimedCommand, dram_rate, gemm_program_cycles
from workloads.ops import Conv2d

__all__ = ["chain_figures"]

_CACHE: dict[tuple[object, ...], tuple[ConvFigures, ...] | str] = {}
_CACHE_SIZE = 1 << 12


def chain_figures(config: ArrayConfig, convs: Sequence[Conv2d]) -> tuple[ConvFigures, ...] | str:
    """Per conv of the chain ``convs`` kept on chip as one program on ``config``, or the reason it is not."""
    key = (design_key(config), tuple(convs))
    out = _CACHE.get(key)
    if out is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        out = _CACHE[key] = _figures(config, tuple(convs))
    return out


def _figures(config: ArrayConfig, convs: tuple[Conv2d, ...], timed: bool = True
             ) -> tuple[ConvFigures, ...] | str:
    """The chain's figures from its program: timed (``conv_timed``, the same walk and bytes) unless
    ``timed`` is false (compiled: the reference)."""
    rate = dram_rate(config)
    try:
        program = compile_conv_network(config, convs, [None] * (len(convs) - 1), require_on_chip=True,
                                       timed=timed)
    except ModelError as exc:
        return str(exc)
    walk = gemm_program_cycles(config, program, rate=rate)
    df = timing.dataflow_code(config.dataflow.value)
    computes = [sum(c.cycles if type(c) is TimedCommand else
                    timing.run_cycles_of(df, config.rows, config.cols, c["m"], c["k"], c["n"],
                                         bool(config.shadow_stationary))
                    for c in part.commands if c.opcode == Opcode.RUN) for part in program.convs]
    transfers = [program_bytes(config, part) for part in program.convs]
    moved = [sum(t) for t in transfers]
    stall = walk.total - walk.compute
    total_bytes = sum(moved)
    out: list[ConvFigures] = []
    for i, (conv, part) in enumerate(zip(convs, program.convs, strict=True)):
        share = stall * moved[i] // total_bytes if total_bytes else (stall if i == 0 else 0)
        if i == len(convs) - 1:  # the rest, so the chain's cycles add up to the walk's
            share = stall - sum(f.total - f.compute for f in out)
        a, b, c = transfers[i]
        # the ifmap is written by the first conv's band loads and by every MOVE of an output into it
        moved_in = output_words(config, conv) * config.rows * config.input_bits / 8 if i + 1 < len(convs) else 0.0
        folds, sram_read, sram_write, tile = run_figures(config, conv, part, a + moved_in, float(b))
        out.append(ConvFigures(True, "", compute=computes[i], total=computes[i] + share, folds=folds,
                               read=(float(a), float(b), 0.0), write=(0.0, 0.0, float(c)),
                               sram_read=sram_read, sram_write=sram_write, tile=tile))
    return tuple(out)
