"""Accuracy against efficiency and area per operand format, on BERT-base and LLaMA decode (edge array).

For each format pair: the SQNR (dB) of the workload's matrix products against float32 JAX
(``workloads.accuracy``), and, for the pairs the RTL builds, the model's TOPS/W, area and EDP of
the ``edge`` preset (16x16 WS, 28 nm) with that pair, at the preset's clock or, when the pair's PE
or output path cannot close it, at its f_max (``perf_model.physical.fmax``; the ``MHz`` column);
then the Pareto front of SQNR (max) against TOPS/W (max) and area (min). Pairs no PE builds
(none today): their accuracy is shown, their cost is not. Rows marked ``packed`` run the int4
operands two a byte in DRAM and on the bus (``pack_int4``); ``DRAM MB`` is the bytes read and
written.

    .venv/bin/python bench/format_pareto.py [--workloads bert_base,llama_decode]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.errors import ConfigError
from perf_model.physical.fmax import design_fmax
from workloads.accuracy import workload_sqnr_db

PAIRS = (("int4", "int4"), ("int4", "int8"), ("int8", "int8"), ("int8", "int16"), ("int16", "int16"),
         ("fp8_e5m2", "fp8_e5m2"), ("fp8_e4m3", "fp8_e4m3"), ("bf16", "bf16"))
#: Pairs also run with ``pack_int4``.
PACKED = (("int4", "int4"), ("int4", "int8"), ("int8", "int4"))


def _front(rows: list[dict]) -> set[int]:
    """Indices of rows no other row beats on SQNR (max), TOPS/W (max) and area (min)."""
    built = [i for i, r in enumerate(rows) if r["tops_per_w"] is not None]
    keys = {i: (rows[i]["sqnr"], rows[i]["tops_per_w"], -rows[i]["area"]) for i in built}

    def dominated(i: int) -> bool:
        return any(all(x >= y for x, y in zip(keys[j], keys[i], strict=True)) and keys[j] != keys[i] for j in built)

    return {i for i in built if not dominated(i)}


#: Accumulator width per weight format (default 48): an fp8_e4m3 sum of K exact products needs
#: 37 + log2(K) bits (perf_model's overflow rule), 49 for BERT-base's K = 3072; bf16's and
#: fp8_e5m2's are a float32.
ACC_BITS = {"fp8_e4m3": 52, "bf16": 32, "fp8_e5m2": 32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="bert_base,llama_decode")
    args = parser.parse_args()
    edge = load_design("edge")
    for spec in args.workloads.split(","):
        wl = workloads.resolve(spec)
        rows = []
        for weight, act, packed in [(w, a, False) for w, a in PAIRS] + [(w, a, True) for w, a in PACKED]:
            t0 = time.perf_counter()
            sqnr = workload_sqnr_db(wl, weight, act)
            seconds = time.perf_counter() - t0
            row = {"pair": f"W {weight} A {act}" + (" packed" if packed else ""), "sqnr": sqnr, "s": seconds,
                   "tops_per_w": None, "area": None, "edp": None, "mhz": None, "dram": None}
            try:
                acc = ACC_BITS.get(weight, 48)
                config = dataclasses.replace(edge, weight_format=weight, act_format=act, acc_bits=acc,
                                             pack_int4=packed)
            except ConfigError:
                rows.append(row)
                continue
            fmax = design_fmax(config)["f_max_mhz"]
            if fmax < config.clock_mhz:
                config = dataclasses.replace(config, clock_mhz=float(int(fmax // 10) * 10))
            total = perf_model.evaluate(config, wl).total
            row.update(tops_per_w=total["tops_per_w"], area=total["area_mm2"], edp=total["edp"], mhz=config.clock_mhz,
                       dram=(total["dram_read_bytes"] + total["dram_write_bytes"]) / 1e6)
            rows.append(row)
        front = _front(rows)
        print(f"\n{spec} on edge (16x16 WS, 28 nm, acc 48 bits; fp8 52: its exact bound for K = 3072 is 49; "
              f"bf16 and fp8_e5m2 32, float32)")
        print(f"{'formats':24s} {'SQNR dB':>8s} {'MHz':>6s} {'TOPS/W':>8s} {'area mm2':>9s} {'EDP J*s':>10s} "
              f"{'DRAM MB':>8s} {'front':>6s} {'sqnr s':>7s}")
        for i, r in enumerate(rows):
            cost = (f"{r['mhz']:6.0f} {r['tops_per_w']:8.3f} {r['area']:9.3f} {r['edp']:10.3e} {r['dram']:8.1f}"
                    if r["tops_per_w"] is not None else f"{'-':>6s} {'no PE':>8s} {'-':>9s} {'-':>10s} {'-':>8s}")
            print(f"{r['pair']:24s} {r['sqnr']:8.2f} {cost} {'*' if i in front else '':>6s} {r['s']:7.2f}")


if __name__ == "__main__":
    main()
