"""Buffer geometry of the generated accelerator, derived from an ``ArrayConfig``.

This mirrors ``perf_model.timing`` (``word_elems``, ``buffer_depth_words``) in plain integers
because ``rtl_gen`` may import only Amaranth and ``accel_dse``; ``tests/rtl_gen`` checks the two
agree for a grid of configs, so the timing module stays the one statement of the contract.
"""

from __future__ import annotations

import dataclasses

from amaranth.utils import ceil_log2

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ConfigError
from rtl_gen.core.output_stage import QPARAM_CHANNELS, param_bits

__all__ = ["BufferGeometry", "BufferLayout", "buffer_layout", "CYCLES_BITS", "DIM_BITS"]

#: Width of the ``m``, ``k``, ``n`` ports (unsigned).
DIM_BITS = 32
#: Width of the ``cycles`` output (unsigned, counts start -> done).
CYCLES_BITS = 32


@dataclasses.dataclass(frozen=True)
class BufferGeometry:
    """One on-chip buffer: ``depth`` words of ``elems`` lanes of ``bits`` bits each.

    Attributes:
        name: ``"ifmap"``, ``"weight"`` or ``"ofmap"``.
        field: the ``ArrayConfig`` field sizing it (``<name>_sram_kib``).
        kib: capacity in KiB.
        elems: elements (lanes) per word.
        bits: bits per element.
        depth: words held, ``floor(kib * 8192 / (elems * bits))``.
    """

    name: str
    field: str
    kib: int
    elems: int
    bits: int
    depth: int

    @property
    def width(self) -> int:
        """Word width in bits (``elems * bits``)."""
        return self.elems * self.bits

    @property
    def mem_depth(self) -> int:
        """Words of the memory instantiated: ``depth``, but at least 2.

        A one-word memory would have a 0-bit address, which Verilog cannot declare
        (``wire [-1:0]`` is two bits); the spare word is never addressed by a run.
        """
        return max(2, self.depth)

    @property
    def addr_bits(self) -> int:
        """Address width in bits, ``ceil(log2(mem_depth))`` (at least 1)."""
        return ceil_log2(self.mem_depth)


@dataclasses.dataclass(frozen=True)
class BufferLayout:
    """The three buffers of one design, and the output stage's parameter buffer.

    ``qparam``: one word per column fold of ``C`` channels (WS/OS: lane ``c`` of word ``f`` is
    channel ``f*C + c``), or for IS one channel per word (word ``n``, broadcast to every lane:
    an IS ofmap word holds one output channel), for :data:`QPARAM_CHANNELS` channels; each lane
    ``param_bits(input_bits)`` bits. ``field`` is ``""`` and ``kib`` its size rounded up.
    """

    ifmap: BufferGeometry
    weight: BufferGeometry
    ofmap: BufferGeometry
    qparam: BufferGeometry

    @property
    def host_addr_bits(self) -> int:
        """Width of the host word address (wide enough for every buffer, at least 1)."""
        return max(1, self.ifmap.addr_bits, self.weight.addr_bits, self.ofmap.addr_bits, self.qparam.addr_bits)

    @property
    def host_data_bits(self) -> int:
        """Width of the host write-data port: the widest buffer word (parameter words included)."""
        return max(self.ifmap.width, self.weight.width, self.ofmap.width, self.qparam.width)


def buffer_layout(config: ArrayConfig) -> BufferLayout:
    """Geometry of the ifmap, weight and ofmap buffers of ``config``.

    Raises:
        ConfigError: a buffer too small to hold a single word, naming the SRAM field.
    """
    r, c = config.rows, config.cols
    is_is = config.dataflow is Dataflow.IS
    elem_bits = config.buffer_bits  # packed int4 operands: 4-bit lanes
    spec = (
        ("ifmap", c if is_is else r, elem_bits[0]),
        ("weight", r if is_is else c, elem_bits[1]),
        ("ofmap", c, elem_bits[2]),
    )
    out = []
    for name, elems, bits in spec:
        field = f"{name}_sram_kib"
        kib = getattr(config, field)
        depth = kib * 8192 // (elems * bits)
        if depth < 1:
            need = -(-(elems * bits) // 8192)
            raise ConfigError(
                f"{field} must hold at least one {elems} x {bits}-bit word "
                f"(>= {need} KiB for a {r}x{c} {config.dataflow.value} array), not {kib}"
            )
        out.append(BufferGeometry(name, field, kib, elems, bits, depth))
    q_lanes = 1 if is_is else c
    q_depth = -(-QPARAM_CHANNELS // q_lanes)
    q_bits = param_bits(config.input_bits)
    out.append(BufferGeometry("qparam", "", -(-(q_depth * q_lanes * q_bits) // 8192), q_lanes, q_bits, q_depth))
    return BufferLayout(*out)
