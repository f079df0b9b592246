"""StableHLO -> op records, with the MLIR bindings jaxlib ships (no other dependency).

Three inputs hold a StableHLO module:

* MLIR text (``.mlir``: ``jax.jit(f).lower(*args).as_text()``, ``exported.mlir_module()``, what
  torch_xla and TensorFlow print);
* MLIR bytecode or a StableHLO portable artefact (``exported.mlir_module_serialized``);
* a serialized ``jax.export`` artefact (``exported.serialize()``): a flatbuffer whose field 13
  (``mlir_module_serialized``, the same in every serialization version so far) is read here
  directly, so reading one needs neither ``flatbuffers`` nor ``jax.export.deserialize``.

The walk starts at the public ``main`` function (else the first public one) and follows
``func.call`` into callees. ``stablehlo.dot_general`` / ``stablehlo.dot`` become
:class:`~workloads.ops.Gemm` and ``stablehlo.convolution`` a :class:`~workloads.ops.Conv2d`
(through :mod:`workloads._lowering`, as the jaxpr tracer does); a ``stablehlo.while`` that is
a counted loop (``i < N`` against constants, as ``lax.scan`` and ``fori_loop`` lower) counts
its body ``N - start`` times, any other ``while`` ``while_trips`` times; of a ``case`` / ``if``
the region with the most MACs counts. Every other op is counted in ``other_primitives``. Op
names come from the ``jax.named_scope`` part of the op's location; ``origin`` names the op,
its function and its index.
"""

from __future__ import annotations

import struct
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads._lowering import Collected, conv_op, dot_op, to_workload
from workloads._mlir_limits import check_mlir_text
from workloads.ops import Workload

__all__ = ["exported_ops", "load_stablehlo", "artefact_module", "MLIR_MAGIC"]

#: First bytes of MLIR bytecode (and of a StableHLO portable artefact).
MLIR_MAGIC = b"ML\xefR"

#: Index of ``mlir_module_serialized`` in jax.export's flatbuffer table ``Exported``.
_EXPORTED_MODULE_FIELD = 13

_DOTS = ("stablehlo.dot_general", "stablehlo.dot")
_CONV = "stablehlo.convolution"
_STRUCTURAL = ("func.return", "stablehlo.return", "func.call", "call")
_LOOKED_FOR = "stablehlo.dot_general, stablehlo.dot, stablehlo.convolution"


def artefact_module(data: bytes) -> bytes | None:
    """The StableHLO bytecode inside a serialized ``jax.export`` artefact, or ``None`` if it is not one."""
    try:
        (root,) = struct.unpack_from("<I", data, 0)
        (back,) = struct.unpack_from("<i", data, root)
        vtable = root - back
        (vt_size,) = struct.unpack_from("<H", data, vtable)
        slot = vtable + 4 + 2 * _EXPORTED_MODULE_FIELD
        if slot + 2 > vtable + vt_size:
            return None
        (offset,) = struct.unpack_from("<H", data, slot)
        if offset == 0:
            return None
        (rel,) = struct.unpack_from("<I", data, root + offset)
        vector = root + offset + rel
        (length,) = struct.unpack_from("<I", data, vector)
    except struct.error:
        return None
    payload = bytes(data[vector + 4:vector + 4 + length])
    return payload if len(payload) == length and payload.startswith(MLIR_MAGIC) else None


def _context() -> Any:
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


def _parse(data: bytes | str, what: str) -> Any:
    """An ``ir.Module`` from MLIR text, MLIR bytecode or a portable artefact (inside a context)."""
    from jaxlib.mlir import ir

    if isinstance(data, bytes) and data.startswith(MLIR_MAGIC):
        from jax._src.lib import _jax

        try:
            return _jax.mlir.deserialize_portable_artifact(data)
        except Exception:  # not a portable artefact: plain MLIR bytecode
            pass
    try:
        return ir.Module.parse(data)
    except Exception as exc:  # MLIR's parser raises its own error types
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else type(exc).__name__)
        detail = detail.removeprefix("error: ").replace('"-":', "line ", 1)
        raise WorkloadError(f"{what} is not a StableHLO module MLIR can parse: {shown(detail)}") from exc


def _shape(value: Any, where: str) -> list[int]:
    from jaxlib.mlir import ir

    tensor = value.type
    if not isinstance(tensor, ir.RankedTensorType):
        raise WorkloadError(f"{where}: operand type {shown(tensor, 80)} is not a ranked tensor; "
                            "export with static shapes")
    if not tensor.has_static_shape:
        raise WorkloadError(f"{where}: operand {shown(tensor, 80)} has a dynamic dimension; export with static "
                            "shapes "
                            "(a shape-polymorphic jax.export needs concrete shapes)")
    return [int(d) for d in tensor.shape]


def _loc_name(loc: Any) -> str:
    from jaxlib.mlir import ir

    for _ in range(16):
        if isinstance(loc, ir.NameLoc):
            return str(loc.name_str)
        if isinstance(loc, ir.CallSiteLoc):
            loc = loc.callee
            continue
        break
    return ""


def _layer_name(loc_name: str, fallback: str) -> str:
    """``"jit(fn)/conv1/conv_general_dilated"`` -> ``"conv1"``."""
    parts = [p for p in loc_name.split("/") if p and not p.startswith(("jit(", "pjit("))]
    if parts and parts[-1] in ("dot_general", "conv_general_dilated", "dot", "convolution"):
        parts = parts[:-1]
    return "/".join(parts) or fallback


def _ints(attr: Any) -> list[int]:
    from jaxlib.mlir import ir

    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseIntElementsAttr)):
        return [int(v) for v in attr]  # type: ignore[union-attr]  # both iterate (no stub says so)
    raise WorkloadError(f"expected an integer array attribute, not {shown(attr, 80)}")


def _const_int(value: Any) -> int | None:
    """The integer a scalar ``stablehlo.constant`` defines, else ``None``."""
    from jaxlib.mlir import ir

    if not isinstance(value, ir.OpResult):
        return None
    owner = value.owner
    if owner.name != "stablehlo.constant":
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseIntElementsAttr):
        return None
    values = [int(v) for v in attr]  # type: ignore[attr-defined]  # iterable; the stub omits it
    return values[0] if attr.is_splat or len(values) == 1 else None


def _trip_count(op: Any) -> int | None:
    """``N - start`` of a counted ``stablehlo.while`` (``i < N``, ``i`` starting at a constant)."""
    from jaxlib.mlir import ir

    cond = op.regions[0].blocks[0]
    ops = list(cond.operations)
    if not ops or not ops[-1].operands:
        return None
    flag = ops[-1].operands[0]
    if not isinstance(flag, ir.OpResult):
        return None
    cmp = flag.owner
    if cmp.name != "stablehlo.compare" or "LT" not in str(cmp.attributes["comparison_direction"]):
        return None
    counter, limit = cmp.operands[0], _const_int(cmp.operands[1])
    if limit is None or not isinstance(counter, ir.BlockArgument):
        return None
    start = _const_int(op.operands[counter.arg_number])
    return None if start is None else max(limit - start, 0)


class _Walker:
    def __init__(self, module: Any, what: str, while_trips: int) -> None:
        from jaxlib.mlir import ir

        self.what = what
        self.while_trips = while_trips
        self.index = 0
        self.funcs: dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
        self.memo: dict[str, Collected] = {}
        self.active: set[str] = set()

    def entry(self) -> str:
        from jaxlib.mlir import ir

        if "main" in self.funcs:
            return "main"
        for name, op in self.funcs.items():
            vis = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
            if vis is None or ir.StringAttr(vis).value == "public":
                return name
        raise WorkloadError(f"{self.what} has no public function (no func.func @main)")

    def function(self, name: str) -> Collected:
        if name in self.memo:
            return self.memo[name]
        if name not in self.funcs:
            raise WorkloadError(f"{self.what}: func.call of @{shown(name, 80)}, which the module does not define")
        if name in self.active:
            raise WorkloadError(f"{self.what}: @{shown(name, 80)} calls itself; recursion is not supported")
        body = self.funcs[name].regions[0].blocks
        if len(body) == 0:
            raise WorkloadError(f"{self.what}: @{shown(name, 80)} is declared without a body; the module must "
                                "define every function it calls")
        self.active.add(name)
        found = self.block_ops(body[0], name)
        self.active.discard(name)
        self.memo[name] = found
        return found

    def block_ops(self, block: Any, func: str) -> Collected:
        from jaxlib.mlir import ir

        out = Collected()
        for view in block.operations:
            op = view.operation
            kind = op.name
            if kind in _DOTS or kind == _CONV:
                self.index += 1
                out.add(self.matrix_op(op, func), 1, kind.removeprefix("stablehlo."))
            elif kind in ("func.call", "call"):
                out.extend(self.function(ir.FlatSymbolRefAttr(op.attributes["callee"]).value))
            elif kind == "stablehlo.composite":
                out.extend(self.function(ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value))
            elif kind == "stablehlo.while":
                trips = _trip_count(op)
                times = self.while_trips if trips is None else trips
                for region in op.regions:
                    if times:
                        out.extend(self.block_ops(region.blocks[0], func), times)
            elif kind in ("stablehlo.case", "stablehlo.if"):
                branches = [self.block_ops(r.blocks[0], func) for r in op.regions]
                if branches:
                    out.extend(max(branches, key=lambda c: c.macs))
            elif kind not in _STRUCTURAL:
                out.others[kind.removeprefix("stablehlo.")] += 1
        return out

    def matrix_op(self, op: Any, func: str) -> Any:
        from jaxlib.mlir.dialects import stablehlo

        loc = _loc_name(op.location)
        origin = shown(f"{op.name} #{self.index} in @{func}" + (f" ({loc})" if loc else ""), 300)
        where = f"{self.what}: {origin}"
        lhs, rhs = (_shape(v, where) for v in list(op.operands)[:2])
        attrs = op.attributes
        if op.name == "stablehlo.dot":
            name = _layer_name(loc, f"dot{self.index}")
            return dot_op(lhs, rhs, [len(lhs) - 1], [0], name=name, origin=origin)
        if op.name == "stablehlo.dot_general":
            dn = stablehlo.DotDimensionNumbers(attrs["dot_dimension_numbers"])
            return dot_op(lhs, rhs, list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions),
                          list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions),
                          name=_layer_name(loc, f"dot{self.index}"), origin=origin)
        cdn = stablehlo.ConvDimensionNumbers(attrs["dimension_numbers"])
        rank = len(cdn.input_spatial_dimensions)

        def get(key: str, default: list[int]) -> list[int]:
            return _ints(attrs[key]) if key in attrs else default

        pads = get("padding", [0] * (2 * rank))
        groups = int(attrs["feature_group_count"].value) if "feature_group_count" in attrs else 1
        batch_groups = int(attrs["batch_group_count"].value) if "batch_group_count" in attrs else 1
        return conv_op(
            n=lhs[cdn.input_batch_dimension], c_in=lhs[cdn.input_feature_dimension],
            c_out=rhs[cdn.kernel_output_feature_dimension],
            spatial=[lhs[d] for d in cdn.input_spatial_dimensions],
            kernel=[rhs[d] for d in cdn.kernel_spatial_dimensions],
            strides=get("window_strides", [1] * rank),
            padding=[(pads[2 * i], pads[2 * i + 1]) for i in range(rank)],
            lhs_dilation=get("lhs_dilation", [1] * rank), rhs_dilation=get("rhs_dilation", [1] * rank),
            groups=groups, batch_groups=batch_groups,
            name=_layer_name(loc, f"conv{self.index}"), origin=origin,
        )


def _module_ops(data: bytes | str, what: str, while_trips: int) -> Collected:
    with _context():
        module = _parse(data, what)
        walker = _Walker(module, what, while_trips)
        return walker.function(walker.entry())


def exported_ops(exported: Any, *, while_trips: int = 1) -> Collected:
    """The ops of a ``jax.export.Exported`` (what a ``call_exported`` equation calls)."""
    what = f"exported function {getattr(exported, 'fun_name', '?')}"
    return _module_ops(bytes(exported.mlir_module_serialized), what, while_trips)


def load_stablehlo(data: bytes, *, name: str, what: str, while_trips: int = 1) -> Workload:
    """A :class:`Workload` from MLIR text or bytecode, or a serialized ``jax.export`` artefact.

    Args:
        data: The file's bytes.
        name: The workload's name (the spec).
        what: How errors name the input (the file path).
        while_trips: Trip count assumed for a ``while`` that is not a counted loop.

    Raises:
        WorkloadError: if MLIR cannot parse it, a matmul or conv operand has a dynamic shape, or
            it has no matmul or convolution.
    """
    module = artefact_module(data)
    kind = "jax.export artefact" if module is not None else "StableHLO"
    payload: bytes | str = module if module is not None else data
    if module is None and not data.startswith(MLIR_MAGIC):
        try:
            payload = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkloadError(f"{what} is neither MLIR text, MLIR bytecode nor a jax.export artefact") from None
        check_mlir_text(payload, what)
    found = _module_ops(payload, what, while_trips)
    return to_workload(found, name=name, description=f"{kind} module {what}", source="stablehlo",
                       looked_for=_LOOKED_FOR)
