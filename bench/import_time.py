"""Print how long reading workload files takes: ONNX (shape inference) and StableHLO (MLIR walk).

The ONNX graphs are the shape-only torchvision ResNet-18, MobileNetV2 and AlexNet that the tests
build (``tests/workloads/onnx_graphs.py``); the StableHLO files are ``jax.export`` of the same
builtins, as MLIR text and as the serialized artefact. Each is read twice: cold (a new file, so
the cache misses) and cached. The JAX trace of the builtin is printed beside it.

Run: ``.venv/bin/python bench/import_time.py``. Figures only, no pass/fail.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the seconds it took."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    sys.path.insert(0, str(REPO / "tests" / "workloads"))
    import jax
    import onnx_graphs
    from jax import export

    import workloads

    print(f"{'workload':14s} {'format':10s} {'ops':>4s} {'GMACs':>8s} {'read s':>8s} {'cached ms':>10s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("resnet18", "mobilenet_v2", "alexnet"):
            traced, trace_s = _timed(lambda n=name: workloads.resolve(n))
            print(f"{name:14s} {'jax trace':10s} {len(traced.ops):4d} {traced.total_macs / 1e9:8.3f} {trace_s:8.3f}")
            onnx_path = getattr(onnx_graphs, name)(Path(tmp) / f"{name}.onnx", batch=1)
            model = workloads.builtin_model(name)
            exp = export.export(jax.jit(model.fn))(*model.example_args())
            text, blob = Path(tmp) / f"{name}.mlir", Path(tmp) / f"{name}.bin"
            text.write_text(exp.mlir_module())
            blob.write_bytes(bytes(exp.serialize()))
            for fmt, path in (("onnx", onnx_path), ("mlir", text), ("jax.export", blob)):
                wl, cold = _timed(lambda p=path: workloads.resolve(str(p)))
                _, warm = _timed(lambda p=path: workloads.resolve(str(p)))
                same = "" if wl.total_macs == traced.total_macs else "  (MACs differ from the trace!)"
                print(f"{name:14s} {fmt:10s} {len(wl.ops):4d} {wl.total_macs / 1e9:8.3f} {cold:8.3f} "
                      f"{warm * 1e3:10.3f}{same}")


if __name__ == "__main__":
    main()
