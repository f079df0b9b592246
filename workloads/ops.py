"""Op records: the matrix work a workload asks of the accelerator (stdlib only, no JAX).

An op is a :class:`Gemm` or a :class:`Conv2d`; both are frozen dataclasses that check every
dimension on construction, so an op that exists is valid. A :class:`Workload` is a name plus
an ordered tuple of ops and how many times each runs.

GEMM convention: ``C[m, n] = A[m, k] @ B[k, n]``; ``A`` is the input (activations, "ifmap"),
``B`` the weights, ``C`` the output. ``batch`` independent instances each have their own
``A``, ``B`` and ``C`` (a batched matmul, or the groups of a grouped convolution).

Conv lowering (im2col). A convolution of an ``n x h x w x c_in`` input with ``groups`` groups
and a ``kh x kw x (c_in/groups) x c_out`` weight tensor is ``groups`` independent GEMMs with::

    m = n * out_h * out_w              (one row per output pixel)
    k = (c_in / groups) * kh * kw      (one column per input value under the kernel window)
    n = c_out / groups                 (one column per output channel of the group)

where ``out_h = (h + pad_h + pad_h_hi - dilation_h * (kh - 1) - 1) // stride_h + 1`` (same for
``w``). The K index is ordered ``(kernel row, kernel column, input channel)``, i.e. an HWIO
weight tensor reshaped to ``(kh * kw * c_in/groups, c_out/groups)`` per group.

Byte counts take the element width in bits and round the total up to whole bytes. For a
``Conv2d`` they are the sizes of the real tensors (input ``n*h*w*c_in``, weights
``kh*kw*c_in/groups*c_out``, output ``n*out_h*out_w*c_out``); ``conv.to_gemm().input_bytes``
is the (larger) im2col matrix instead.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import ClassVar, TypeAlias

from accel_spec.errors import WorkloadError
from accel_spec.text import NAME_LIMIT, shown
from workloads.requant_record import REQUANT_ROUNDING, Requant
from workloads.vector_ops import VECTOR_KINDS, VectorOp, check_vector_fields

__all__ = ["Gemm", "Conv2d", "Op", "Workload", "op_kind", "MAX_MACS", "Requant", "REQUANT_ROUNDING", "chain_link",
           "conv_chain_link", "conv_reads_output",
           "VectorOp", "VECTOR_KINDS"]

#: Most multiply-accumulates an op, or one run of a workload, may have: 2**48 (about 2.8e14).
#: The model's cycle, byte and energy counts are int64 / float64 products of the dimensions;
#: below this limit they are exact (cycles stay below 2**63 even on a 1 x 1 array).
MAX_MACS = 2**48

#: Longest ``origin`` or workload ``description`` kept (names: :data:`accel_spec.text.NAME_LIMIT`).
ORIGIN_LIMIT = 300


def _positive_int(owner: str, name: str, value: object) -> int:
    """Return ``value`` as an int, or raise ``WorkloadError`` unless it is a positive integer."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) > 0:
        return int(value)
    raise WorkloadError(f"{owner} {name} must be a positive integer, not {value!r}")


def _nonneg_int(owner: str, name: str, value: object) -> int:
    """Return ``value`` as an int, or raise ``WorkloadError`` unless it is an integer >= 0."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    raise WorkloadError(f"{owner} {name} must be a non-negative integer, not {value!r}")


def _check_macs(owner: str, macs: int, what: str) -> None:
    if macs > MAX_MACS:
        raise WorkloadError(
            f"{owner} {what} = {macs:,} multiply-accumulates, beyond the {MAX_MACS:,} (2**48) the model "
            "computes exactly; use smaller dimensions"
        )


def _check_name(owner: str, value: object, what: str = "name") -> None:
    if not isinstance(value, str):
        raise WorkloadError(f"{owner} {what} must be a string, not {shown(repr(value))}")


def _set_shown(record: object, owner: str, field_name: str, limit: int = NAME_LIMIT) -> None:
    """Check the text field ``field_name`` and keep it as :func:`accel_spec.text.shown` makes it
    (names come from files and graphs: control characters escaped, cut to ``limit``)."""
    value = getattr(record, field_name)
    _check_name(owner, value, field_name)
    object.__setattr__(record, field_name, shown(value, limit))


def _bytes(elements: int, bits: int) -> int:
    """Bytes for ``elements`` values of ``bits`` bits each, rounded up to whole bytes."""
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or bits <= 0:
        raise WorkloadError(f"bits must be a positive integer, not {bits!r}")
    return (elements * int(bits) + 7) // 8


def _check_requant(owner: str, requant: object, allowed: tuple[int, ...]) -> None:
    if requant is None:
        return
    if not isinstance(requant, Requant):
        raise WorkloadError(f"{owner} requant must be a Requant record or None, not {requant!r}")
    requant.check_channels(owner, allowed)


@dataclass(frozen=True, kw_only=True)
class Gemm:
    """``batch`` independent matrix products ``C[m, n] = A[m, k] @ B[k, n]``.

    Attributes:
        m: Rows of ``A`` and ``C`` (for a layer: batch x tokens or output pixels).
        k: Contraction length (columns of ``A``, rows of ``B``).
        n: Columns of ``B`` and ``C`` (for a layer: output features).
        batch: Independent instances, each with its own ``A``, ``B`` and ``C``.
        name: Free-form label (layer name); not part of the arithmetic.
        origin: Where the op comes from in the user's model (a graph node, a jaxpr equation's
            source line, a CSV line); not part of the arithmetic nor of equality.
        requant: How ``C`` leaves the accelerator: ``None`` raw accumulators (``acc_bits``), or
            a :class:`Requant` (``bits``-bit outputs) with 1, ``n`` or ``batch * n`` channel values
            (instance ``i`` uses channels ``i*n .. i*n+n-1`` of ``batch * n``).
        a_from_previous: ``A`` is the previous op's requantised output as it left the output
            stage (the tracer saw the one feed the other with nothing in between), so an
            accelerator may keep it on chip (``perf_model``'s on-chip reuse); not part of equality.
    """

    kind: ClassVar[str] = "gemm"

    m: int
    k: int
    n: int
    batch: int = 1
    name: str = ""
    origin: str = field(default="", compare=False)
    requant: Requant | None = None
    a_from_previous: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        for dim in ("m", "k", "n", "batch"):
            object.__setattr__(self, dim, _positive_int("gemm", dim, getattr(self, dim)))
        _set_shown(self, "gemm", "name")
        _set_shown(self, "gemm", "origin", ORIGIN_LIMIT)
        _check_macs("gemm", self.macs, "batch * m * k * n")
        _check_requant("gemm", self.requant, (self.n, self.batch * self.n))

    @property
    def macs(self) -> int:
        """Multiply-accumulates: ``batch * m * k * n``."""
        return self.batch * self.m * self.k * self.n

    def input_bytes(self, bits: int) -> int:
        """Bytes of all ``A`` matrices (``batch * m * k`` elements of ``bits`` bits)."""
        return _bytes(self.batch * self.m * self.k, bits)

    def weight_bytes(self, bits: int) -> int:
        """Bytes of all ``B`` matrices (``batch * k * n`` elements of ``bits`` bits)."""
        return _bytes(self.batch * self.k * self.n, bits)

    def output_bytes(self, bits: int) -> int:
        """Bytes of all ``C`` matrices (``batch * m * n`` elements of ``bits`` bits)."""
        return _bytes(self.batch * self.m * self.n, bits)

    def to_gemm(self) -> Gemm:
        """The GEMM this op runs as: itself."""
        return self


@dataclass(frozen=True, kw_only=True)
class Conv2d:
    """A 2-D convolution over an NHWC input with an HWIO weight tensor.

    Padding is given per side: ``pad_h`` / ``pad_w`` are the top / left padding and, when
    ``pad_h_hi`` / ``pad_w_hi`` are left as ``None``, also the bottom / right padding
    (symmetric). Give ``pad_h_hi`` / ``pad_w_hi`` for asymmetric padding (JAX's ``"SAME"``
    with stride 2 pads ``(0, 1)``, for example). After construction they always hold ints.

    Attributes:
        n: Images in the batch.
        h, w: Input height and width in pixels (before padding).
        c_in, c_out: Input and output channels; both divisible by ``groups``.
        kh, kw: Kernel height and width in pixels.
        stride_h, stride_w: Strides in pixels.
        pad_h, pad_w: Zero padding at the top / left (and bottom / right unless overridden).
        pad_h_hi, pad_w_hi: Zero padding at the bottom / right (``None``: same as the top / left).
        dilation_h, dilation_w: Kernel (rhs) dilation.
        groups: Feature groups (``groups == c_in == c_out`` is a depthwise convolution).
        name: Free-form label (layer name).
        origin: Where the op comes from in the user's model (as :attr:`Gemm.origin`).
        requant: ``None`` (raw accumulators) or a :class:`Requant` with 1 or ``c_out`` channel values.
    """

    kind: ClassVar[str] = "conv2d"

    n: int
    h: int
    w: int
    c_in: int
    c_out: int
    kh: int
    kw: int
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    pad_h_hi: int | None = field(default=None)
    pad_w_hi: int | None = field(default=None)
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1
    name: str = ""
    origin: str = field(default="", compare=False)
    requant: Requant | None = None
    a_from_previous: bool = field(default=False, compare=False)  # as Gemm's

    def __post_init__(self) -> None:
        for dim in ("n", "h", "w", "c_in", "c_out", "kh", "kw", "stride_h", "stride_w",
                    "dilation_h", "dilation_w", "groups"):
            object.__setattr__(self, dim, _positive_int("conv2d", dim, getattr(self, dim)))
        for dim in ("pad_h", "pad_w"):
            object.__setattr__(self, dim, _nonneg_int("conv2d", dim, getattr(self, dim)))
        for hi_name, lo_name in (("pad_h_hi", "pad_h"), ("pad_w_hi", "pad_w")):
            given = getattr(self, hi_name)
            object.__setattr__(self, hi_name, getattr(self, lo_name) if given is None
                               else _nonneg_int("conv2d", hi_name, given))
        _set_shown(self, "conv2d", "name")
        _check_requant("conv2d", self.requant, (self.c_out,))
        for dim in ("c_in", "c_out"):
            value = getattr(self, dim)
            if value % self.groups:
                raise WorkloadError(
                    f"conv2d {dim} must be divisible by groups={self.groups}, not {value}"
                )
        for axis, size, kernel, lo, hi, dil in (
            ("h", self.h, self.kh, self.pad_h, int(self.pad_h_hi or 0), self.dilation_h),
            ("w", self.w, self.kw, self.pad_w, int(self.pad_w_hi or 0), self.dilation_w),
        ):
            span = dil * (kernel - 1) + 1
            if size + lo + hi < span:
                raise WorkloadError(
                    f"conv2d k{axis}={kernel} (dilated span {span}) must fit the padded input "
                    f"{axis}={size}+{lo}+{hi}, not exceed it"
                )
        _set_shown(self, "conv2d", "origin", ORIGIN_LIMIT)
        _check_macs("conv2d", self.macs, "n * out_h * out_w * c_out * kh * kw * c_in / groups")

    @property
    def out_h(self) -> int:
        """Output height in pixels."""
        span = self.dilation_h * (self.kh - 1) + 1
        return (self.h + self.pad_h + int(self.pad_h_hi or 0) - span) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        """Output width in pixels."""
        span = self.dilation_w * (self.kw - 1) + 1
        return (self.w + self.pad_w + int(self.pad_w_hi or 0) - span) // self.stride_w + 1

    @property
    def macs(self) -> int:
        """Multiply-accumulates: ``n * out_h * out_w * c_out * (c_in/groups) * kh * kw``."""
        return self.n * self.out_h * self.out_w * self.c_out * (self.c_in // self.groups) * self.kh * self.kw

    def input_bytes(self, bits: int) -> int:
        """Bytes of the input tensor (``n * h * w * c_in`` elements, unpadded, not im2col'd)."""
        return _bytes(self.n * self.h * self.w * self.c_in, bits)

    def weight_bytes(self, bits: int) -> int:
        """Bytes of the weight tensor (``kh * kw * c_in/groups * c_out`` elements)."""
        return _bytes(self.kh * self.kw * (self.c_in // self.groups) * self.c_out, bits)

    def output_bytes(self, bits: int) -> int:
        """Bytes of the output tensor (``n * out_h * out_w * c_out`` elements)."""
        return _bytes(self.n * self.out_h * self.out_w * self.c_out, bits)

    def to_gemm(self) -> Gemm:
        """The im2col lowering (see the module docstring).

        Returns:
            ``Gemm(m=n*out_h*out_w, k=c_in/groups*kh*kw, n=c_out/groups, batch=groups)``.
        """
        return Gemm(
            m=self.n * self.out_h * self.out_w,
            k=(self.c_in // self.groups) * self.kh * self.kw,
            n=self.c_out // self.groups,
            batch=self.groups,
            name=self.name,
            origin=self.origin,
            requant=self.requant,
            a_from_previous=self.a_from_previous,
        )


Op: TypeAlias = Gemm | Conv2d


def op_kind(op: Op) -> str:
    """``"gemm"`` or ``"conv2d"``."""
    return op.kind


@dataclass(frozen=True)
class Workload:
    """A named, ordered list of ops and how often each runs.

    Attributes:
        name: Workload name (a builtin's spec such as ``"bert_base:seq=128"``, or ``module:function``).
        ops: The ops in program order.
        counts: ``counts[i]`` is how many times ``ops[i]`` runs (a ``scan`` body's length, repeated
            layers, ...). Empty means every op runs once.
        other_primitives: Non-matmul JAX primitives the tracer saw, with how often each runs
            (work the array does not do), sorted by name.
        other_elements: The elements each of those primitives writes in one run of the workload
            (its outputs' sizes times how often it runs), sorted by name; empty where the reader
            does not know them (ONNX, StableHLO and the file formats).
        description: One line for humans.
        source: What the ops were read from: ``"builtin"``, ``"jax"`` (a user's function),
            ``"onnx"``, ``"stablehlo"``, ``"scalesim"`` or ``"timeloop"`` (empty: not said).
        vector_ops: The vector work between the matrix ops (:class:`~workloads.vector_ops.VectorOp`),
            in program order; the model times those the vector unit runs (``perf_model.vector_timing``).
        vector_counts: ``vector_counts[i]`` is how many times ``vector_ops[i]`` runs (empty: once each).
        vector_after: ``vector_after[i]`` is how many matrix ops precede ``vector_ops[i]`` in
            program order (empty: all of them).

    The performance model treats op ``i`` as ``counts[i] * ops[i].to_gemm().batch`` independent
    ``m x k x n`` GEMMs.
    """

    name: str
    ops: tuple[Op, ...]
    counts: tuple[int, ...] = ()
    other_primitives: tuple[tuple[str, int], ...] = ()
    other_elements: tuple[tuple[str, int], ...] = ()
    description: str = ""
    source: str = ""
    vector_ops: tuple[VectorOp, ...] = ()
    vector_counts: tuple[int, ...] = ()
    vector_after: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check_name("workload", self.name)
        ops = tuple(self.ops)
        if not ops:
            raise WorkloadError(f"workload {self.name!r} must have at least one op, not none")
        for op in ops:
            if not isinstance(op, (Gemm, Conv2d)):
                raise WorkloadError(f"workload ops must be Gemm or Conv2d records, not {op!r}")
        counts = tuple(self.counts) if self.counts else (1,) * len(ops)
        if len(counts) != len(ops):
            raise WorkloadError(
                f"workload counts must have one entry per op ({len(ops)}), not {len(counts)}"
            )
        counts = tuple(_positive_int("workload", "count", c) for c in counts)
        others = tuple((shown(p), _nonneg_int("workload", f"count of {shown(p)}", c))
                       for p, c in self.other_primitives)
        elements = tuple((shown(p), _nonneg_int("workload", f"elements of {shown(p)}", c))
                         for p, c in self.other_elements)
        _set_shown(self, "workload", "description", ORIGIN_LIMIT)
        _check_name("workload", self.source, "source")
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "other_primitives", others)
        object.__setattr__(self, "other_elements", elements)
        vector = check_vector_fields(self.vector_ops, self.vector_counts, self.vector_after, len(ops))
        for key, value in zip(("vector_ops", "vector_counts", "vector_after"), vector, strict=True):
            object.__setattr__(self, key, value)
        _check_macs(f"workload {self.name!r}", self.total_macs, "sum of count * MACs")

    @property
    def total_macs(self) -> int:
        """Multiply-accumulates of one run of the whole workload: ``sum(op.macs * count)``."""
        return sum(op.macs * count for op, count in zip(self.ops, self.counts, strict=True))

    def gemms(self) -> tuple[tuple[Gemm, int], ...]:
        """Each op's GEMM lowering with its count, in program order."""
        return tuple((op.to_gemm(), count) for op, count in zip(self.ops, self.counts, strict=True))

    def weight_bytes(self, bits: int) -> int:
        """Bytes of all weights read by one run (each op's weights times its count)."""
        return sum(op.weight_bytes(bits) * count for op, count in zip(self.ops, self.counts, strict=True))


def chain_link(prev: Op, nxt: Op) -> bool:
    """Whether ``nxt`` can take ``prev``'s requantised output as its input matrix ``A`` as is.

    Both must be requantised single-instance ops whose GEMM view is the matrix itself (a
    ``Gemm``, or a 1x1 stride-1 unpadded undilated ungrouped ``Conv2d``), with
    ``nxt.m == prev.m`` and ``nxt.k == prev.n``.
    """
    def plain(op: Op) -> bool:
        if op.requant is None or op.to_gemm().batch != 1:
            return False
        if isinstance(op, Conv2d):
            return (op.kh, op.kw, op.stride_h, op.stride_w, op.pad_h, op.pad_w, op.pad_h_hi, op.pad_w_hi,
                    op.dilation_h, op.dilation_w) == (1, 1, 1, 1, 0, 0, 0, 0, 1, 1)
        return True

    a, b = prev.to_gemm(), nxt.to_gemm()
    return plain(prev) and plain(nxt) and b.m == a.m and b.k == a.n


def conv_reads_output(prev: Op, nxt: Op) -> bool:
    """Whether ``nxt`` is a convolution that can read ``prev``'s requantised NHWC output as is: both
    requantised ``Conv2d`` records, ``nxt``'s input of ``prev``'s output shape (images, rows,
    columns, channels)."""
    if not (isinstance(prev, Conv2d) and isinstance(nxt, Conv2d)) or prev.requant is None or nxt.requant is None:
        return False
    return (nxt.n, nxt.h, nxt.w, nxt.c_in) == (prev.n, prev.out_h, prev.out_w, prev.c_out)


def conv_chain_link(prev: Op, nxt: Op) -> bool:
    """Whether ``nxt`` is a convolution reading ``prev``'s requantised NHWC output as is
    (:func:`conv_reads_output`) and the pair is not a :func:`chain_link` (a 1x1 pair, which is a
    GEMM chain). The tracer's ``a_from_previous`` (that the data really flows) is the caller's to
    check."""
    return conv_reads_output(prev, nxt) and not chain_link(prev, nxt)
