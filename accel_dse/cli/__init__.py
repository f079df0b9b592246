"""The ``accel-dse`` command line.

Each subcommand lives in its own module of this package, listed in :data:`COMMANDS`; a module
exposes ``register(subparsers)`` that adds its parser and sets ``func(args) -> int``.
User errors (:class:`AccelDseError`) become one line on stderr and their exit code (2 for
usage/config errors); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from collections.abc import Iterator, Sequence

from accel_dse import __version__
from accel_dse.errors import AccelDseError

__all__ = ["main", "build_parser", "COMMANDS"]

#: Subcommand modules of ``accel_dse.cli``, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "design", "workloads", "evaluate", "sweep", "simulate", "rtl", "export", "report", "verify",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="accel-dse",
        description="Design-space exploration for TPU-style systolic-array accelerators: "
        "generate RTL, verify it against JAX, model it, search it.",
    )
    parser.add_argument("--version", action="version", version=f"accel-dse {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"accel_dse.cli.{name}").register(sub)
    return parser


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end a command as Ctrl-C does: its simulator or worker processes are
    stopped with it (they run in their own sessions) and the exit status is 130. The sweep
    routes both signals to its own handler while it runs (a trial is never cut mid-write)."""
    names = ("SIGTERM", "SIGHUP")
    previous = {}
    try:
        for name in names:
            if hasattr(signal, name):
                previous[name] = signal.signal(getattr(signal, name), _interrupt)
    except ValueError:  # not the main thread: leave the handlers alone
        pass
    try:
        yield
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _terminate_as_interrupt():
            return int(args.func(args) or 0)
    except AccelDseError as exc:
        if args.debug:
            raise
        print(f"accel-dse: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("accel-dse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
