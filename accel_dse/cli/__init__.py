"""The ``accel-dse`` command line.

Each subcommand lives in its own module of this package, listed in :data:`COMMANDS`; a module
exposes ``register(subparsers)`` that adds its parser and sets ``func(args) -> int``.
User errors (:class:`AccelDseError`) become one line on stderr and their exit code (2 for
usage/config errors); ``--debug`` shows the traceback instead. The same boundary turns what the
user's environment or input causes outside accel-dse's own checks into one line and exit 2: an
``OSError`` (disk full, permission denied, name too long, ...), a ``RecursionError`` (input
nested too deeply) and a ``SystemExit`` raised by a user's module while the command runs.
Ctrl-C, SIGTERM and SIGHUP end it with exit 130.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
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
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a full disk or closed pipe is reported here, not at exit
            return code
    except AccelDseError as exc:
        if args.debug:
            raise
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("accel-dse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except OSError as exc:
        if args.debug:
            raise
        _drop_stdout()
        return _fail(os_error_text(exc), 2)
    except RecursionError:
        if args.debug:
            raise
        return _fail("input nested too deeply (Python's recursion limit); flatten it", 2)
    except SystemExit as exc:  # accel-dse never exits from inside a command: a user's module did
        if args.debug:
            raise
        return _fail(f"a user module raised SystemExit({exc.code!r}) while {args.command} ran "
                     "(a workload module must not call sys.exit or exit when imported)", 2)


def os_error_text(exc: OSError) -> str:
    """One line for an ``OSError``: what failed, on which path, why (``[Errno 28] ...`` never shown)."""
    reason = exc.strerror or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = f" ({' -> '.join(repr(p) for p in paths)})" if paths else ""
    return f"{reason[:1].lower()}{reason[1:]}{where}"


def _fail(message: str, code: int) -> int:
    line = " ".join(message.split("\n"))
    try:
        print(f"accel-dse: error: {line}", file=sys.stderr)
    except OSError:
        pass
    return code


def _drop_stdout() -> None:
    """Point stdout at /dev/null when it cannot be written (full disk, closed pipe): no second error at exit."""
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
