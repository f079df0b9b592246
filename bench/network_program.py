"""How much of a workload runs as one program: one-program networks of GEMMs and vector ops (model only).

For each design and workload, the matrix ops are cut into segments, greedily from the first op:
a segment grows while the next op chains (``workloads.ops.chain_link``) and reads this op's
output (the tracer's ``a_from_previous``, or vector ops between them), every vector op on the link
is a link op the rules allow, and ``perf_model.compiler.network.compile_network`` builds the
segment's program on the design (the live tensors fit its ifmap, one queue-load). Vector ops
after a segment's last GEMM join it when the rules allow them there. An add's second operand is
the input of the first matrix op of its block (the op after the previous add, or op 0 of the
workload); with ``before``'s rules an add whose operand lies outside its segment ends the segment
before it, with ``now``'s it is an input of the segment's program of its own
(``perf_model.compiler.network.EXTERNAL``: loaded from DRAM, where that op's input is).

Five rule sets, on the same code:

* ``before`` (the first network compiler): ``relu``, ``relu6``, ``gelu``, ungated ``silu``, one op
  per link, only between two GEMMs, every link with an op on chip;
* ``gemms`` (GEMM networks only): also the residual ``add`` (its operand from outside the segment
  too) and ``layernorm``/``rmsnorm`` (WS), several ops per link, ops after the last GEMM, and links
  through DRAM inside the program when the ifmap cannot hold them;
* ``convs``: also chains of convolutions of one image (any kernel: conv ``i + 1`` reads conv ``i``'s
  NHWC output) with the same link ops, ``perf_model.compiler.conv_network.compile_conv_network``
  (each conv's output kept in the ifmap as the next one's input when the regions fit, else
  through DRAM inside the program); a ResNet downsample (a conv reading its block's input) starts
  a segment, its add's operand (the block's last conv's output) an input of its own;
* ``downsample``: also a downsample inside the segment of its block (``compile_conv_network``'s
  ``inputs``: it reads the block's input held in the ifmap, its add the block's last conv's
  output). Segments are cut greedily from the first op, so taking the downsample in can end a
  segment sooner (more programs, fewer bytes): both rows are printed;
* ``now``: also poolings on conv links (``compile_conv_network``: the unit pools the conv's output,
  in the ifmap or in bands of rows through DRAM, into the tensor the next conv reads; a pooling
  starts a block, so the next add's operand is its output), and a requantised GEMM reading a
  global pool's ``(m, 1, 1, k)`` output (a CNN's classifier) as the 1x1 conv over a 1x1 map it is;
  a workload that is one conv network as a whole (``perf_model.compiler.conv_workload``, whose
  add operands also serve MobileNetV2's blocks) is one segment, and so is a workload that is a
  stack of transformer encoder layers (``perf_model.compiler.encoder``: the keys transposed on the
  vector unit, the heads' scores and context over slices of Q, K^T and V, the softmax, the FFN
  chain) or one LLaMA decoder block (``perf_model.compiler.decoder``: its RMSNorms, RoPEs, causal
  softmax over the KV cache, adds and SwiGLU inside the program too); their bytes include the
  keys' transposes.

Printed per row: matrix ops and vector-op runs (of which host work: the unit cannot run them,
``perf_model.vector_timing.vector_plan``), the ops inside multi-op programs, the programs the
workload takes (a segment of several ops is one; every other matrix op and every vector op the
unit runs is one), the host steps (programs - 1 between them, plus the host-work ops),
``more_loads`` (the queue-loads past the first of the segments' programs: a conv network longer
than the command queue, where the host restarts the sequencer with no computation between), and
DRAM bytes: a segment's from its program's LOAD/STORE commands, a lone matrix op's from
``perf_model.evaluate`` (no reuse), a lone vector op's as its own program (operands in, result
out, whole words), host work as the same bytes read and written by the host.

Usage: ``.venv/bin/python bench/network_program.py [--design edge --workload bert_base:seq=64 ...]``
(default: bert_base:seq=64 on edge and resnet18:res=32 on tiny, both with ``vector_unit``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from accel_spec.config import ArrayConfig, Dataflow  # noqa: E402
from accel_spec.errors import ModelError  # noqa: E402
from accel_spec.isa import Opcode, dram_word_bytes  # noqa: E402
from accel_spec.vector_isa import POOL_KINDS  # noqa: E402
from perf_model.compiler.blocks import compile_block, transformer_block  # noqa: E402
from perf_model.compiler.conv_network import compile_conv_network, pooled_shape  # noqa: E402
from perf_model.compiler.conv_workload import after_global_pool, conv_network_spec  # noqa: E402
from perf_model.compiler.network import EXTERNAL, compile_network  # noqa: E402
from perf_model.vector_timing import vector_plan  # noqa: E402
from workloads.ops import chain_link  # noqa: E402

RULES = {
    "before": {"kinds": ("relu", "relu6", "gelu", "silu"), "several": False, "trailing": False, "dram": False,
               "convs": False},
    "gemms": {"kinds": ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm"), "several": True,
              "trailing": True, "dram": True, "convs": False},
    "convs": {"kinds": ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm"), "several": True,
              "trailing": True, "dram": True, "convs": True, "downsample": False},
    "downsample": {"kinds": ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm"), "several": True,
                   "trailing": True, "dram": True, "convs": True, "downsample": True},
    "now": {"kinds": ("relu", "relu6", "gelu", "silu", "add", "layernorm", "rmsnorm", "maxpool", "avgpool"),
            "several": True, "trailing": True, "dram": True, "convs": True, "downsample": True, "pools": True,
            "encoder": True},
}
CASES = (("edge", "bert_base:seq=64"), ("edge", "llama_decode"), ("tiny", "resnet18:res=32"))


def _block_program(config: ArrayConfig, wl: workloads.Workload) -> object | None:
    """The whole workload's program when it is encoder layers or a decoder block the design runs
    as one (``now``'s rules), else ``None``."""
    try:
        return compile_block(config, transformer_block(wl))
    except ModelError:
        return None


def _program_bytes(config: ArrayConfig, commands: tuple) -> int:
    sizes = dram_word_bytes(config.rows, config.cols, config.dataflow is Dataflow.IS, config.input_bits,
                            config.acc_bits)
    total = 0
    for c in commands:
        if c.opcode == Opcode.LOAD:
            kind = ("ifmap", "weight", "ofmap", "qparam")[c["buffer"]]
        elif c.opcode == Opcode.STORE:
            kind = "ifmap" if c["buffer"] != 2 else ("requant" if c["requant"] else "ofmap")
        else:
            continue
        total += c["rows"] * c["words"] * sizes[kind]
    return total


def _vector_bytes(op: workloads.VectorOp, lanes: int) -> tuple[bool, int]:
    """``(the unit runs it, DRAM bytes of it as its own program or as host work)``."""
    plan = vector_plan(op, lanes)
    if isinstance(plan, str):
        operands = 2 if op.kind in ("add", "mul") else 1
        return False, (operands * op.elements + op.out_elements) * op.bits // 8
    return True, (plan.operands * plan.words + plan.out_words) * plan.rows * lanes


def _plain(op: object) -> bool:
    """Whether ``op``'s GEMM view is its own input matrix (a GEMM, or a 1x1 stride-1 unpadded conv):
    ``workloads.ops.chain_link``'s rule for one op; a 3x3 conv's GEMM view needs the host's im2col."""
    if getattr(op, "requant", None) is None or op.to_gemm().batch != 1:  # type: ignore[attr-defined]
        return False
    if isinstance(op, workloads.Conv2d):
        return (op.kh, op.kw, op.stride_h, op.stride_w, op.pad_h, op.pad_w, op.pad_h_hi, op.pad_w_hi,
                op.dilation_h, op.dilation_w) == (1, 1, 1, 1, 0, 0, 0, 0, 1, 1)
    return True


def _conv(op: object) -> bool:
    """A requantised conv of one image (``compile_conv_network`` takes chains of them)."""
    return isinstance(op, workloads.Conv2d) and op.requant is not None and op.n == 1


def _conv_link(a: object, b: object, link: list | None = None) -> bool:
    """Whether conv ``b`` reads conv ``a``'s output as is (NHWC shapes equal), or pooled by the
    pooling that ends ``link`` (the vector ops after ``a``)."""
    if not (_conv(a) and _conv(b)):
        return False
    out = (a.n, a.out_h, a.out_w, a.c_out)  # type: ignore[attr-defined]
    if link and link[-1].kind in POOL_KINDS and link[-1].shape == out:
        try:
            out = pooled_shape(link[-1])
        except ModelError:
            return False
    return out == (b.n, b.h, b.w, b.c_in)  # type: ignore[attr-defined]


def segments(config: ArrayConfig, wl: workloads.Workload, rules: dict) -> list[tuple[int, int, bool, int]]:
    """``(first op, last op, trailing ops joined, program bytes, queue-loads)`` of each multi-op segment."""
    ops = list(wl.ops)
    after = wl.vector_after or (len(ops),) * len(wl.vector_ops)
    counts = wl.vector_counts or (1,) * len(wl.vector_ops)
    on_link: list[list[workloads.VectorOp]] = [[] for _ in ops]  # ops after matrix op i
    bad = [False] * len(ops)  # a vector op after op i that no link can take
    block = [0] * len(ops)  # per matrix op i, the first op of the block of an add after it
    start = 0
    for op, where, count in zip(wl.vector_ops, after, counts, strict=True):
        if where == 0:
            continue
        i = where - 1
        on_link[i].append(op)
        bad[i] |= count != 1 or op.kind not in rules["kinds"] or (op.kind == "silu" and op.param("gated", 0))
        if op.kind == "add":
            block[i] = start
            start = where
        elif op.kind in POOL_KINDS and rules.get("pools", False):
            start = where  # a pooling starts a block: the next add's operand is its output
    for i in range(len(ops)):
        bad[i] |= len(on_link[i]) > 1 and not rules["several"]
        if rules.get("pools", False) and i and on_link[i - 1]:
            ops[i] = after_global_pool(ops[i], on_link[i - 1][-1])

    def downsample(k: int) -> bool:
        """Op ``k`` is a ResNet downsample: a conv reading its block's input (the input of the first op
        of the block of the add after it), whose add's second operand is op ``k - 1``'s output."""
        b = block[k]
        return (rules.get("downsample", False) and k >= 2 and b < k - 1 and _conv(ops[k]) and _conv(ops[b])
                and not ops[k].a_from_previous and any(o.kind == "add" for o in on_link[k])
                and (ops[b].n, ops[b].h, ops[b].w, ops[b].c_in) == (ops[k].n, ops[k].h, ops[k].w, ops[k].c_in))

    def build(s: int, e: int, trailing: bool) -> tuple[int, int] | None:
        convs = rules["convs"] and all(_conv(o) for o in ops[s:e + 1])
        reads = [block[k] - s if downsample(k) else k - s for k in range(s, e + 1)]
        if any(r < 0 for r in reads):
            return None
        if not convs and not all(_plain(o) for o in ops[s:e + 1]):
            return None
        links: list = []
        skips: list = []
        for i in range(s, e + 1):
            if i == e and not trailing:
                break
            if bad[i] or (i == e and not on_link[i]):
                if i == e:
                    break
                return None
            links.append(tuple(on_link[i]) or None)
            has_add = any(o.kind == "add" for o in on_link[i])
            outside = has_add and not s <= block[i] <= i
            if outside and not rules["dram"]:
                return None
            if has_add and downsample(i):  # downsample + the block's last conv (its output: tensor i - s)
                skips.append(i - s)
            else:
                skips.append((EXTERNAL if outside else block[i] - s) if has_add else None)
        try:
            if convs:
                prog = compile_conv_network(config, ops[s:e + 1], links, skips, inputs=reads)
                return _program_bytes(config, prog.commands), len(prog.chunks)
            if any(downsample(k) for k in range(s, e + 1)):
                return None
            gemms = [o.to_gemm() for o in ops[s:e + 1]]
            if any(g.batch != 1 for g in gemms):
                return None
            gemms = [workloads.Gemm(m=g.m, k=g.k, n=g.n, name=o.name, requant=o.requant)
                     for g, o in zip(gemms, ops[s:e + 1], strict=True)]
            prog = compile_network(config, gemms, links, skips)
            if not rules["dram"] and len(gemms) > 1 and all(c.opcode != Opcode.MOVE for c in prog.commands):
                return None  # links through DRAM: main had none
            return _program_bytes(config, prog.commands), len(prog.chunks)
        except (ModelError, ValueError):
            return None

    def joins(e: int) -> bool:
        """Op ``e + 1`` reads op ``e``'s output (vector ops between them), or is a downsample."""
        if e + 1 >= len(ops):
            return False
        if downsample(e + 1):
            return True
        linked = chain_link(ops[e], ops[e + 1]) or rules["convs"] and _conv_link(
            ops[e], ops[e + 1], on_link[e] if rules.get("pools", False) else None)
        return bool(linked and (ops[e + 1].a_from_previous or on_link[e]))

    if rules.get("encoder", False):  # the whole workload as one transformer block, where it is one
        prog = _block_program(config, wl)
        if prog is not None:
            return [(0, len(ops) - 1, True, _program_bytes(config, prog.commands), len(prog.chunks))]  # type: ignore[attr-defined]
    if rules.get("pools", False):  # the whole workload as one conv network, where it is one
        spec = conv_network_spec(wl)
        if not isinstance(spec, str):
            try:
                prog = compile_conv_network(config, spec.convs, spec.links, spec.skips, inputs=spec.inputs)
                return [(0, len(ops) - 1, bool(spec.links[-1]), _program_bytes(config, prog.commands),
                         len(prog.chunks))]
            except ModelError:
                pass
    out = []
    s = 0
    while s < len(ops):
        e = s
        while joins(e) and build(s, e + 1, downsample(e + 1)) is not None:
            e += 1
        with_tail = build(s, e, True) if rules["trailing"] and on_link[e] and not bad[e] else None
        plain = build(s, e, False) if e > s else None
        if with_tail is not None:
            out.append((s, e, True, *with_tail))
        elif plain is not None:
            out.append((s, e, False, *plain))
        s = e + 1
    return out


def figures(config: ArrayConfig, wl: workloads.Workload, rules: dict) -> dict[str, int]:
    per_op = perf_model.evaluate(config, wl, reuse=False)
    op_bytes = [int(r.dram_read_bytes + r.dram_write_bytes) for r in per_op.ops]
    after = wl.vector_after or (len(wl.ops),) * len(wl.vector_ops)
    counts = wl.vector_counts or (1,) * len(wl.vector_ops)
    segs = segments(config, wl, rules)
    in_seg = set()
    joined = set()
    nbytes = 0
    loads = 0
    for s, e, trailing, b, n in segs:
        loads += n - 1
        in_seg.update(range(s, e + 1))
        joined.update(range(s, e))
        if trailing:
            joined.add(e)
        nbytes += b
    inside = len(in_seg)
    programs = len(segs)
    host = 0
    vector_runs = 0
    for i in range(len(wl.ops)):
        if i not in in_seg:
            programs += 1
            nbytes += op_bytes[i]
    whole = rules.get("encoder", False) and _block_program(config, wl) is not None  # every vector op inside
    for op, where, count in zip(wl.vector_ops, after, counts, strict=True):
        vector_runs += count
        if whole or where >= 1 and where - 1 in joined:
            inside += count
            continue
        runs, b = _vector_bytes(op, config.vector_lanes)
        nbytes += count * b
        if runs:
            programs += count
        else:
            host += count
    return {"matrix": len(wl.ops), "vector": vector_runs, "host_work": host, "inside": inside,
            "programs": programs, "host_steps": programs - 1 + host, "dram": nbytes, "loads": loads}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", action="append", help="design (with --workload; repeatable)")
    parser.add_argument("--workload", action="append", help="workload spec (with --design; repeatable)")
    args = parser.parse_args()
    cases = tuple(zip(args.design, args.workload, strict=True)) if args.design else CASES
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"{'design':<6} {'workload':<18} {'rules':<6} {'matrix':>6} {'vector':>6} {'host_work':>9} "
          f"{'in_one_prog':>11} {'programs':>8} {'host_steps':>10} {'more_loads':>10} {'dram_MB':>8}")
    for design, spec in cases:
        config = dataclasses.replace(load_design(design), vector_unit=True)
        wl = workloads.resolve(spec)
        for name, rules in RULES.items():
            f = figures(config, wl, rules)
            print(f"{design:<6} {spec:<18} {name:<6} {f['matrix']:>6} {f['vector']:>6} {f['host_work']:>9} "
                  f"{f['inside']:>11} {f['programs']:>8} {f['host_steps']:>10} {f['loads']:>10} "
                  f"{f['dram'] / 1e6:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
