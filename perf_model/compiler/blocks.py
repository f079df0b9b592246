"""A workload as a transformer block run from one program: encoder layers or a LLaMA decoder block.

:func:`transformer_block` recognises the workload as either (``perf_model.compiler.encoder.encoder_layer``,
``perf_model.compiler.decoder.decoder_block``), :func:`compile_block` compiles it; ``evaluate``'s
one-program figure, ``simulate`` and ``bench/network_program.py`` ask here.
"""

from __future__ import annotations

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model.compiler.decoder import DecoderBlock, compile_decoder, decoder_block
from perf_model.compiler.encoder import EncoderLayer, compile_encoder, encoder_layer
from perf_model.compiler.program import GemmProgram
from workloads.ops import Workload

__all__ = ["transformer_block", "compile_block"]


def transformer_block(workload: Workload) -> EncoderLayer | DecoderBlock:
    """``workload`` as encoder layers, else as a decoder block.

    Raises:
        ModelError: it is neither (the decoder's reason: the encoder's rules come first).
    """
    try:
        return encoder_layer(workload)
    except ModelError:
        return decoder_block(workload)


def compile_block(config: ArrayConfig, block: EncoderLayer | DecoderBlock) -> GemmProgram:
    """``block``'s one program on ``config`` (``compile_encoder`` or ``compile_decoder``).

    Raises:
        ModelError: the compiler's reason.
    """
    return compile_decoder(config, block) if isinstance(block, DecoderBlock) else compile_encoder(config, block)
