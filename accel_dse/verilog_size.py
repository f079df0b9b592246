"""The size of a design's Verilog, estimated before it is generated, and the limit it is held to.

``rtl_gen.to_verilog`` writes the PE and the PE row once as modules of their own; what grows
with the design is a part per row, a part per column (its lanes' gates, update and output stage)
and the array's wiring per PE. The SRAM depths do not count (a memory is one declaration: the
``tiny`` design with 16 MiB buffers gave 161,808 bytes against 161,320 with its own). Fitted on
``tiny`` at 4x4, 4x16, 16x4 and 16x16 (161,320, 424,970, 218,737 and 502,493 bytes: exact on
the four); ``edge`` (16x16 with the vector unit) gave 515,293, 2.5 % above the fit. The flat
export (``flat=True``: a module per PE instance) is estimated with :data:`FLAT_PER_PE` more a PE
(``tiny`` flat at 4x4 and 8x8: 216,873 and 507,282 bytes, 3,472 and 3,698 more a PE).

A design whose estimate passes :data:`MAX_VERILOG_BYTES` is refused before anything is
generated (:func:`check_verilog_size`): generating it would take hours and gigabytes (about
25 ms a PE on 2 cores).
"""

from __future__ import annotations

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError

__all__ = ["verilog_bytes", "check_verilog_size", "MAX_VERILOG_BYTES"]

#: Bytes of the hierarchical Verilog: fixed, per row, per column, per PE (module docstring).
BASE, PER_ROW, PER_COL, PER_PE = 56_534, 4_226, 21_412, 140
#: Bytes more a PE in the flat export (each PE instance its own module).
FLAT_PER_PE = 3_700
#: Most bytes of Verilog generated for one design (128 MiB: about 850,000 PEs of hierarchical
#: Verilog, 35,000 flat).
MAX_VERILOG_BYTES = 128 * 2**20


def verilog_bytes(config: ArrayConfig, *, flat: bool = False) -> int:
    """Estimated bytes of ``rtl_gen.to_verilog(config, flat=flat)`` (module docstring)."""
    pes = config.rows * config.cols
    return BASE + PER_ROW * config.rows + PER_COL * config.cols + (PER_PE + (FLAT_PER_PE if flat else 0)) * pes


def check_verilog_size(config: ArrayConfig, what: str = "the design", *, flat: bool = False) -> None:
    """Refuse ``config`` if its Verilog would pass :data:`MAX_VERILOG_BYTES`, before it is generated.

    Raises:
        ConfigError: one line naming rows and cols, the estimate and the limit.
    """
    size = verilog_bytes(config, flat=flat)
    if size > MAX_VERILOG_BYTES:
        kind = "flat Verilog" if flat else "Verilog"
        raise ConfigError(
            f"{what}: rows = {config.rows:,} and cols = {config.cols:,} ({config.rows * config.cols:,} PEs) give "
            f"about {size / 2**20:,.0f} MiB of {kind}, beyond the {MAX_VERILOG_BYTES // 2**20} MiB a generated "
            "design may have; make rows x cols smaller"
        )
