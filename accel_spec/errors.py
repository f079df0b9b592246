"""The exception hierarchy of accel-dse (stdlib only).

Every error a user can cause derives from :class:`AccelDseError`. Messages state the
field or value, the rule it breaks and the bad value, for example
``rows must be a positive integer, not 0``. The CLI prints ``accel-dse: error: <message>``
on one line and exits with :attr:`AccelDseError.exit_code` (2 for usage/config errors).
Exceptions that do not derive from it are programmer errors and keep their traceback.
"""

from __future__ import annotations

__all__ = [
    "AccelDseError",
    "ConfigError",
    "ConfigErrors",
    "WorkloadError",
    "ModelError",
    "SearchError",
    "StorageError",
    "RtlError",
    "FpgaToolError",
    "SimulationError",
    "ExportError",
]


class AccelDseError(Exception):
    """Root of all user-facing errors. ``exit_code`` is what the CLI exits with."""

    exit_code: int = 2


class ConfigError(AccelDseError, ValueError):
    """An invalid design, design file, preset name or design-space file."""


class ConfigErrors(ConfigError):
    """Several problems found in one pass over a design (each its own :class:`ConfigError` message).

    ``messages`` holds them in the order found; ``str()`` is one per line, which the CLI prints as
    one ``accel-dse: error:`` line each.
    """

    def __init__(self, messages: list[str] | tuple[str, ...]) -> None:
        self.messages = tuple(messages)
        super().__init__("\n".join(self.messages))

    @classmethod
    def of(cls, messages: list[str] | tuple[str, ...]) -> ConfigError:
        """One :class:`ConfigError` for one message, a :class:`ConfigErrors` for several."""
        return ConfigError(messages[0]) if len(messages) == 1 else cls(messages)

    def prefixed(self, prefix: str) -> ConfigErrors:
        """The same problems, each message starting with ``prefix``."""
        return ConfigErrors([f"{prefix}{m}" for m in self.messages])


class WorkloadError(AccelDseError, ValueError):
    """An unknown workload, a bad workload option, or a function that cannot be traced."""


class ModelError(AccelDseError, ValueError):
    """Invalid input to the performance model (not an infeasible design: that is a result)."""


class SearchError(AccelDseError):
    """A sweep that cannot run as asked: unknown sampler, incompatible existing study, ..."""


class StorageError(AccelDseError):
    """A study storage URL that is malformed or cannot be reached."""


class RtlError(AccelDseError):
    """A design the RTL generator cannot build, or a failing Yosys/Verilog step."""


class FpgaToolError(RtlError):
    """Yosys or nextpnr failed on a design (a tool failure, exit 1; a design that does not fit is a result)."""

    exit_code = 1


class SimulationError(AccelDseError):
    """A simulator that is missing, a build that fails, or a simulation that cannot run."""


class ExportError(AccelDseError):
    """An export or report that cannot be written where asked."""
