"""The compiler's conv scorers, as the evaluator takes them (``perf_model.evaluator.conv_ops.ConvScorers``).

The evaluator sits below the compiler and imports none of it; whoever asks it to score convs on
chip passes these (``perf_model.figures``, the compiler's own plans, the benches): a conv by its
program (``conv_score.conv_figures``), a chain of convs with its links on chip by its one program
(``conv_chain_score.chain_figures``) and every design at once (``conv_designs.design_groups``).
"""

from __future__ import annotations

from perf_model.compiler.conv_chain_score import chain_figures
from perf_model.compiler.conv_designs import design_groups
from perf_model.compiler.conv_score import conv_figures
from perf_model.evaluator.conv_ops import ConvScorers

__all__ = ["COMPILER_SCORERS"]

#: The scorers of the compiler's programs: what every figure of a conv on chip comes from.
COMPILER_SCORERS = ConvScorers(conv=conv_figures, chain=chain_figures, designs=design_groups)
