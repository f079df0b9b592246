"""Print what tracing a user's module in a child process costs, against tracing it in-process.

Run: ``.venv/bin/python bench/user_module_child.py``. Figures only, no pass/fail. Each way
traces a small two-GEMM module (written to a temporary directory) five times; the in-process
way imports the module once (later runs reuse it), the child ways import it every time.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

MODULE = '''
import jax, jax.numpy as jnp

def forward(x, w1, w2):
    return jnp.maximum(x @ w1, 0) @ w2

forward.example_args = (jax.ShapeDtypeStruct((64, 256), jnp.int8), jax.ShapeDtypeStruct((256, 512), jnp.int8),
                        jax.ShapeDtypeStruct((512, 10), jnp.int8))
'''
RUNS = 5


def _time(fn) -> tuple[float, float]:
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def main() -> None:
    import jax  # noqa: F401  (imported once, as the CLI's workload registry does)

    from workloads._requant import recording
    from workloads._tracer import trace
    from workloads._user import load_user_function
    from workloads._user_child import trace_user

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bench_user_mod.py").write_text(MODULE)
        os.chdir(tmp)
        sys.path.insert(0, tmp)
        spec = "bench_user_mod:forward"

        def in_process() -> None:
            fn, args = load_user_function(spec)
            with recording([]):
                trace(fn, *args, name=spec, source="jax")

        rows = [("in-process (before issue 24)", _time(in_process)),
                ("forked child (the default)", _time(lambda: trace_user(spec))),
                ("fresh interpreter (fallback)", _time(lambda: trace_user(spec, path=sys.path)))]
    print(f"{'way':32s} {'median s':>9s} {'min s':>7s}")
    for name, (median, low) in rows:
        print(f"{name:32s} {median:9.3f} {low:7.3f}")


if __name__ == "__main__":
    main()
