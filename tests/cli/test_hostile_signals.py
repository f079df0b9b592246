"""SIGTERM and SIGINT end a command at once with 130, also inside a JAX trace and a long evaluate.

The signal used to raise ``KeyboardInterrupt`` in the handler; raised inside JAX's garbage
collection callback it was printed as "Exception ignored" and lost (a command ran on for 20 s
and more). The bound below is the 2 s of the rule plus slack for a loaded machine; it bounds a
hang, it does not time anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The rule's 2 s, plus slack for a machine whose cores other jobs share.
BOUND_S = 2.0 + 4.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: A user function whose trace takes half a minute (100,000 matrix products, traced in a child process).
SLOW_TRACE = """import jax.numpy as jnp


def f():
    x = jnp.ones((8, 8), jnp.float32)
    for _ in range(100_000):
        x = x @ x
    return x
"""


def _family(pid: int) -> list[int]:
    """``pid`` and its children."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{entry}/stat").read_text()
                if text[text.rfind(")") + 2:].split()[1] == str(pid):
                    kids.append(int(entry))
    return [pid, *kids]


def _jax_loaded(pid: int, *, in_child: bool = False) -> bool:
    """Whether JAX's library is loaded in ``pid`` or one of its children (``in_child``: in a child)."""
    for member in _family(pid)[1 if in_child else 0:]:
        with contextlib.suppress(OSError):
            if "jaxlib" in Path(f"/proc/{member}/maps").read_text(errors="replace"):
                return True
    return False


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:][:1] not in ("Z", "X")


def _stop_while_running(argv: list[str], sig: int, tmp_path: Path, settle_s: float, *, in_child: bool = False
                        ) -> tuple[int, str, list[int]]:
    """Start ``accel-dse argv``; once JAX is loaded (in a child: ``in_child``), after ``settle_s``, send ``sig``.

    Returns:
        Its exit code, its stderr, and the pids of its children when the signal went.
    """
    proc = subprocess.Popen([sys.executable, "-m", "accel_dse", *argv], env=_env(), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(1200):
            if _jax_loaded(proc.pid, in_child=in_child) or proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(settle_s)
        assert proc.poll() is None, f"{argv} ended before the signal: {proc.stderr.read() if proc.stderr else ''}"
        children = _family(proc.pid)[1:]
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv}: still running {BOUND_S} s after {signal.Signals(sig).name}")
        return proc.returncode, err, children
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see JAX loaded")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_jax_trace_ends_the_command(tmp_path, sig):
    (tmp_path / "slowtrace.py").write_text(SLOW_TRACE)
    code, err, children = _stop_while_running(["workloads", "show", "slowtrace:f"], sig, tmp_path, settle_s=2.0,
                                              in_child=True)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == "accel-dse: interrupted", err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert children, "the trace runs in a child process"
    for _ in range(40):  # SIGKILL is delivered asynchronously
        if not [p for p in children if _alive(p)]:
            break
        time.sleep(0.05)
    assert not [p for p in children if _alive(p)]  # stopped with it, not left tracing


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see JAX loaded")
def test_sigterm_during_a_long_evaluate_ends_it(tmp_path):
    # llama_block:seq=2048,batch=4 on edge takes some 40 s on a fast machine (trace, one-program compile of
    # 267 GEMMs, walk): surely still running. (seq=8192 no longer served: its softmax's own program is past the
    # 32-bit DRAM addresses, found in 6 s.)
    code, err, _ = _stop_while_running(["evaluate", "--design", "edge", "--workload", "llama_block:seq=2048,batch=4",
                                        "--json"], signal.SIGTERM, tmp_path, settle_s=8.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == '{"error": "interrupted", "kind": "interrupted"}', err
    assert "Exception ignored" not in err and "Traceback" not in err, err


def test_a_stop_removes_the_registered_half_written_outputs(tmp_path):
    """The watcher's clean-up: a registered temporary file and directory go, others stay."""
    from accel_dse.exit_cleanup import clean_up_for_stop, removed_if_stopped

    part, folder, kept = tmp_path / ".x.part", tmp_path / ".d.tmp-1", tmp_path / "kept"
    part.write_text("half")
    folder.mkdir()
    (folder / "a").write_text("half")
    kept.write_text("mine")
    with removed_if_stopped(part), removed_if_stopped(folder):
        clean_up_for_stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    with removed_if_stopped(kept):
        pass
    clean_up_for_stop()  # registered no more: left alone
    assert kept.read_text() == "mine"
