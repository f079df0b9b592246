"""Print how long tracing the builtin workloads and building reference data take.

Run: ``.venv/bin/python bench/trace_time.py``. Figures only, no pass/fail.
"""

from __future__ import annotations

import time


def main() -> None:
    t0 = time.perf_counter()
    import jax  # noqa: F401  (measured separately from tracing)

    import workloads

    print(f"import jax + workloads: {time.perf_counter() - t0:.2f} s")
    print(f"{'workload':14s} {'ops':>4s} {'GMACs':>9s} {'trace s':>8s} {'cached ms':>10s}")
    for name in workloads.builtin_names():
        t = time.perf_counter()
        w = workloads.resolve(name)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        workloads.resolve(name)
        warm = (time.perf_counter() - t) * 1e3
        print(f"{name:14s} {len(w.ops):4d} {w.total_macs / 1e9:9.3f} {cold:8.3f} {warm:10.3f}")

    print("\nreference(op, seed) per GEMM instance (first call includes JAX compilation):")
    resnet = workloads.resolve("resnet18")
    cases = [op for op in resnet.ops if op.name in ("conv1", "layer1.0.conv1", "layer4.1.conv2", "fc")]
    cases.append(workloads.Gemm(m=256, k=256, n=160, name="gemm 256x256x160 (1.0e7 MACs)"))
    mobilenet = workloads.resolve("mobilenet_v2")
    cases.append(next(op for op in mobilenet.ops if op.kind == "conv2d" and op.groups > 1))
    for op in cases:
        g = op.to_gemm()
        times = []
        for seed in (0, 1):
            t = time.perf_counter()
            workloads.reference(op, seed)
            times.append(time.perf_counter() - t)
        macs = g.m * g.k * g.n
        print(f"  {op.name:32s} {g.m}x{g.k}x{g.n} ({macs / 1e6:7.1f} M MACs): "
              f"first {times[0] * 1e3:7.1f} ms, again {times[1] * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
