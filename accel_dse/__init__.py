"""accel-dse: design-space exploration for TPU-style systolic-array accelerators.

Kept light on purpose: importing ``accel_dse`` loads neither JAX, Amaranth nor Optuna.
"""

from __future__ import annotations

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import AccelDseError, ConfigError

__all__ = ["ArrayConfig", "Dataflow", "AccelDseError", "ConfigError", "__version__"]

__version__ = "0.1.0"
