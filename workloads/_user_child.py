"""Tracing a user's function in a child process: whatever its module does cannot end or corrupt ours.

A ``package.module:function`` workload runs the user's code twice over (the import, the trace).
:func:`trace_user` runs both in a child process (a fork of this one where that is safe: POSIX,
and JAX's runtime not started; else a fresh interpreter running this module) that sends back
the traced op records, pickled (only the op-record classes are unpickled):

* the module's stdout goes to our stderr, so ``--json`` output stays parseable;
* any exception it raises, ``BaseException`` subclasses (``SystemExit``, ``GeneratorExit``,
  ...) too, comes back as one :class:`~accel_spec.errors.WorkloadError` naming the module;
  ``KeyboardInterrupt`` comes back as ``KeyboardInterrupt``;
* a process that ends without a result (``os._exit``, a crash, a signal) is a ``WorkloadError``
  with its exit status, never a success.

A forked child costs little (``bench/user_module_child.py`` prints the figures), a fresh
interpreter one more JAX import; results are cached per spec for the life of the process
(:func:`workloads._registry.resolve`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from accel_spec.errors import WorkloadError
from accel_spec.text import shown

__all__ = ["trace_user", "ptq_user"]

#: Classes a child's result may hold (anything else in the pickle is refused).
_ALLOWED = {
    ("workloads.ops", "Workload"), ("workloads.ops", "Gemm"), ("workloads.ops", "Conv2d"),
    ("workloads.requant_record", "Requant"), ("workloads.vector_ops", "VectorOp"), ("builtins", "tuple"),
    ("builtins", "list"), ("builtins", "dict"),
    ("builtins", "frozenset"), ("builtins", "set"),
}

_BOOT = "import json, sys; sys.path[:] = json.loads(sys.argv[3]); from workloads._user_child import _child; _child()"


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not an op record")
        return super().find_class(module, name)


def _run_traced(spec: str) -> tuple[Any, ...]:
    """In the child: import and trace ``spec``; ``("ok", workload, requant params, flow)`` or an error tuple."""
    from workloads._requant import recording
    from workloads._torch_trace import lower_module, torch_pair
    from workloads._tracer import trace
    from workloads._user import load_user_function, split_user_spec

    try:
        fn, args = load_user_function(split_user_spec(spec)[0])
        doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
        source = "jax"
        origins: Sequence[str] = ()
        pair = torch_pair(fn, args, spec)
        if pair is not None:  # a PyTorch model: exported, lowered to the JAX primitives of the same layers
            model = lower_module(*pair, spec)
            fn, args, source, origins = model.fn, model.shapes(), "torch", model.origins
        flow: list[bool] = []
        with recording(flow) as params:
            workload = trace(fn, *args, name=spec, description=doc[0] if doc else "", source=source,
                             check_values=True, origins=origins)
        return "ok", workload, tuple(params), tuple(flow)
    except KeyboardInterrupt:
        return ("interrupted",)
    except WorkloadError as exc:
        return "error", str(exc)
    except SystemExit as exc:
        return "error", (f"workload {spec!r}: its module raised SystemExit({exc.code!r}) (a workload module must "
                         "not call sys.exit or exit)")
    except BaseException as exc:  # noqa: BLE001  # GeneratorExit and the user's own BaseException subclasses
        text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        return "error", f"workload {spec!r}: its module raised {detail}"


def _run_ptq(spec: str, weight: str, act: str) -> tuple[Any, ...]:
    """In the child: quantise ``spec``'s float model (:mod:`workloads._ptq`); ``("ok", sqnr_db, how)``,
    ``("skip", reason)`` for a model it does not take, or an error tuple."""
    from workloads._ptq import CALIBRATION_SAMPLES, NotQuantisable, quantise_model
    from workloads._torch_trace import lower_module, torch_pair
    from workloads._user import load_user_function, split_user_spec

    try:
        fn_spec, opts = split_user_spec(spec)
        fn, args = load_user_function(fn_spec)
        pair = torch_pair(fn, args, spec)
        if pair is not None:
            model = lower_module(*pair, spec)
            if model.on_meta:
                raise NotQuantisable("its weights are on the meta device (no values to quantise)")
            fn, args = model.fn, (model.weights, *model.inputs)
        result = quantise_model(fn, args, weight, act, granularity=str(opts.get("quant", "channel")),
                                calibration=str(opts["calib"]) if "calib" in opts else None,
                                samples=int(opts.get("samples", CALIBRATION_SAMPLES)))
        return "ok", float(result.sqnr_db), result.calibration
    except KeyboardInterrupt:
        return ("interrupted",)
    except NotQuantisable as exc:
        return "skip", str(exc)
    except WorkloadError as exc:
        return "error", str(exc)
    except BaseException as exc:  # noqa: BLE001  # as _run_traced
        text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        return "error", f"workload {spec!r}: quantising it raised {type(exc).__name__}: {text}"


def _run_task(task: str) -> tuple[Any, ...]:
    """In the child: the task ``[kind, spec, ...]`` (JSON): ``trace`` or ``ptq``."""
    kind, spec, *rest = json.loads(task)
    return _run_ptq(spec, *rest) if kind == "ptq" else _run_traced(spec)


def _write_result(task: str, result_file: str) -> None:
    """In the child: run ``task`` (:func:`_run_task`) and write the pickled outcome to ``result_file``."""
    spec = json.loads(task)[1]
    outcome = _run_task(task)
    try:
        data = pickle.dumps(outcome)
    except Exception as exc:  # noqa: BLE001  # a record holding something that does not pickle
        data = pickle.dumps(("error", f"workload {spec!r}: its ops cannot be sent back ({type(exc).__name__})"))
    with open(result_file, "wb") as out:
        out.write(data)


def _child() -> None:
    """Entry of a spawned child process: ``argv`` is ``-c TASK RESULT_FILE SYS_PATH`` (TASK: JSON)."""
    task, result_file = sys.argv[1], sys.argv[2]
    sys.argv = [sys.argv[0]]
    _write_result(task, result_file)
    sys.stdout.flush()


def _can_fork() -> bool:
    """True where a forked child is safe: POSIX, and JAX's runtime (its threads) not started here yet."""
    if not hasattr(os, "fork"):
        return False
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bridge is None or getattr(bridge, "_backends", None) == {}


def _forked(task: str, result_file: str) -> int:
    """Trace in a forked child (the modules imported here are shared: no second JAX import); its exit code."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's frames
        code = 0
        try:
            with contextlib.suppress(OSError):
                os.dup2(2, 1)
            sys.stdout = sys.stderr
            _write_result(task, result_file)
        except BaseException:  # noqa: BLE001  # nothing may escape a forked child
            code = 70
        finally:
            with contextlib.suppress(BaseException):
                sys.stderr.flush()
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status)


def _spawned(task: str, result_file: str, path: Sequence[str]) -> int:
    """Trace in a fresh interpreter (this module run by ``python -c``); its exit code."""
    stderr_fd = _stderr_fd()
    argv = [sys.executable, "-c", _BOOT, task, result_file, json.dumps(list(path))]
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                             stdout=stderr_fd if stderr_fd is not None else subprocess.PIPE,
                             stderr=None if stderr_fd is not None else subprocess.STDOUT)
    try:
        printed, _ = child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if printed:
        sys.stderr.write(printed.decode("utf-8", "replace"))
    return child.returncode


def _stderr_fd() -> int | None:
    """The file descriptor of our stderr, or ``None`` when it is not a real file (captured in tests)."""
    try:
        sys.stderr.flush()
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _read(result: BinaryIO) -> tuple[Any, ...] | None:
    data = result.read()
    if not data:
        return None
    try:
        outcome = _ResultUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001  # a truncated or foreign result file
        return None
    return outcome if isinstance(outcome, tuple) and outcome else None


def _in_child(task: str, path: Sequence[str] | None) -> tuple[tuple[Any, ...] | None, int]:
    """Run ``task`` in a child process: its outcome (``None``: none came back) and exit code."""
    with tempfile.TemporaryDirectory(prefix="accel-dse-trace-") as tmp:
        result_file = str(Path(tmp) / "result.pickle")
        if path is None and _can_fork():
            code = _forked(task, result_file)
        else:
            code = _spawned(task, result_file, sys.path if path is None else path)
        outcome = None
        if os.path.exists(result_file):
            with open(result_file, "rb") as result:
                outcome = _read(result)
    return outcome, code


def ptq_user(spec: str, weight: str, act: str) -> tuple[float, str] | str:
    """Quantise the user's float model ``spec`` to the formats in a child process (as :func:`trace_user`).

    Returns:
        ``(sqnr_db, calibration)``, or the reason (a string) the model is not one
        :func:`workloads._ptq.quantise_model` takes.

    Raises:
        WorkloadError: the module raised, a bad option or calibration file, or no result came back.
        KeyboardInterrupt: the child was interrupted.
    """
    outcome, code = _in_child(json.dumps(["ptq", spec, weight, act]), None)
    if outcome is None:
        raise WorkloadError(f"workload {shown(repr(spec))}: the process quantising it {_ended(code)} without "
                            "a result (does the module call os._exit, or crash?)")
    if outcome[0] == "interrupted":
        raise KeyboardInterrupt
    if outcome[0] == "error":
        raise WorkloadError(shown(str(outcome[1]), 1000))
    if outcome[0] == "skip":
        return str(outcome[1])
    return float(outcome[1]), str(outcome[2])


def trace_user(spec: str, path: Sequence[str] | None = None) -> tuple[Any, tuple[Any, ...], tuple[bool, ...]]:
    """Import and trace the user's ``package.module:function`` in a child process.

    Args:
        spec: The workload spec ``package.module:function``.
        path: The ``sys.path`` of a fresh child interpreter. By default the child is a fork of
            this process (no second JAX import) where that is safe, else a fresh interpreter
            with our ``sys.path``.

    Returns:
        The traced :class:`~workloads.ops.Workload`, the :class:`~workloads.ops.Requant` records
        its output stages noted, and the flow flags (as :func:`workloads._requant.with_flow` takes).

    Raises:
        WorkloadError: the module or function raised (any exception but ``KeyboardInterrupt``), or
            the child ended without a result.
        KeyboardInterrupt: the child was interrupted.
    """
    outcome, code = _in_child(json.dumps(["trace", spec]), path)
    if outcome is None:
        raise WorkloadError(f"workload {shown(repr(spec))}: the process tracing it {_ended(code)} without "
                            "a result (does the module call os._exit, or crash?)")
    if outcome[0] == "interrupted":
        raise KeyboardInterrupt
    if outcome[0] == "error":
        raise WorkloadError(shown(str(outcome[1]), 1000))
    _, workload, params, flow = outcome
    return workload, tuple(params), tuple(flow)
