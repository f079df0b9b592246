"""The compiler's conv scorers, as the evaluator takes them (``perf_model.evaluator.conv_ops.ConvScorers``).

The evaluator sits below the compiler and imports none of it; whoever asks it to score convs on
chip passes these (``perf_model.figures``, the compiler's own plans, the benches): a conv by its
program (``conv_score.conv_figures``), a chain of convs with its links on chip by its one program
(``conv_chain_score.chain_figures``) and every design at once (``conv_designs.design_groups``).
:func:`conv_path` asks the evaluator, with them, which path one conv takes on one design.
"""

from __future__ import annotations

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.conv_chain_score import chain_figures
from perf_model.compiler.conv_designs import design_groups
from perf_model.compiler.conv_geometry import conv_served
from perf_model.compiler.conv_score import conv_figures
from perf_model.evaluator.conv_ops import ConvScorers
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Conv2d

__all__ = ["COMPILER_SCORERS", "conv_path"]

#: The scorers of the compiler's programs: what every figure of a conv on chip comes from.
COMPILER_SCORERS = ConvScorers(conv=conv_figures, chain=chain_figures, designs=design_groups)


def conv_path(config: ArrayConfig, conv: Conv2d, *, requant: bool = False) -> tuple[str, str]:
    """``("chip", "")`` when ``config`` runs ``conv`` with windows built on chip, else ``("host",
    reason)``: the host builds the im2col ``A`` (a design that does not build windows, or one on
    which the model scores the im2col GEMM, all images in one program, faster than the on-chip
    programs, one an image: few input channels on many array rows, as in a network's first layer,
    or a batch whose weights the per-image programs read once an image). An on-chip conv that does
    not fit is ``("infeasible", reason)`` (the reason names the op and the words it needs).

    The choice is the model's (``perf_model.evaluator.conv_ops``): ``evaluate`` and the sweep
    score the conv the way this path runs it. ``requant`` must say what ``conv.requant`` does.
    """
    why = conv_served(config)
    if why:
        return "host", why
    if requant != (conv.requant is not None):
        raise ModelError(f"requant={requant} but the conv's requant is {conv.requant!r}")
    block = evaluate_block(DesignArrays.from_configs([config]), op_arrays([(conv, 1)]), DEFAULT_ENERGY,
                           area_coefficients(), scorers=COMPILER_SCORERS)
    path, note = block.conv_note(0, 0)
    return path or "host", note
