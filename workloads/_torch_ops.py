"""PyTorch ATen ops -> the JAX primitives a float JAX model of the same layers issues.

:mod:`workloads._torch_trace` runs an exported program's graph node by node through these
handlers inside ``jax.make_jaxpr``, so the jaxpr tracer and its float pattern matcher
(:mod:`workloads._float_patterns`) see what a JAX user writing the same model would give them:

* ``linear``/``matmul``/``mm``/``bmm``/``addmm``/``baddbmm`` -> ``dot_general`` (a linear layer's
  weight contracted on its input axis, no transpose), its bias an add after it (the output stage's);
* ``conv1d``/``conv2d``/``convolution`` -> ``conv_general_dilated`` in PyTorch's NCHW/OIHW layout,
  stride, padding, dilation and groups as given, the bias added per channel;
* ``scaled_dot_product_attention`` -> ``q @ kᵀ`` times the scale, the mask (``is_causal``: the
  lower triangle, a boolean mask selected, a float mask added), ``softmax``, ``@ v``; GQA's shared
  key/value heads are repeated (``enable_gqa``);
* ``layer_norm`` over the last axis, ``rms_norm``, ``gelu`` (erf or tanh), ``silu``, ``softmax``,
  ``relu``, ``hardtanh`` (ReLU6) and the pools (``max_pool2d``, ``avg_pool2d``,
  ``adaptive_avg_pool2d`` whose output divides the map) as ``jax.nn``/``jnp`` spell them;
* eval-mode ``batch_norm``: a per-channel scale and shift, folded from the statistics before the
  trace (:mod:`workloads._torch_trace`), so it lands in the convolution's output stage;
* element-wise arithmetic, comparisons, reductions and every layout op (view, permute, cat,
  slice, index, embedding lookup...) one for one.

An ATen op with no handler is an error naming it (:class:`UnsupportedTorchOp`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from accel_spec.errors import WorkloadError

__all__ = ["HANDLERS", "UnsupportedTorchOp", "jax_dtype"]


class UnsupportedTorchOp(WorkloadError):
    """An ATen op this lowering has no handler for (its name is in the message)."""


_DTYPES = {"float32": jnp.float32, "float": jnp.float32, "float64": jnp.float32, "double": jnp.float32,
           "float16": jnp.float16, "half": jnp.float16, "bfloat16": jnp.bfloat16, "int64": jnp.int32,
           "long": jnp.int32, "int32": jnp.int32, "int": jnp.int32, "int16": jnp.int16, "int8": jnp.int8,
           "uint8": jnp.uint8, "bool": jnp.bool_}


def jax_dtype(dtype: Any) -> Any:
    """The JAX dtype of a ``torch.dtype`` (64-bit types narrowed, as JAX runs without x64)."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise UnsupportedTorchOp(f"tensor dtype {name} has no JAX counterpart here")
    return _DTYPES[name]


def _ints(v: Any, n: int) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    v = [int(x) for x in v]
    return tuple(v * n) if len(v) == 1 else tuple(v)


def _axis(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


# ---------------------------------------------------------------------------------------------- matrix ops


def _linear(a: dict[str, Any]) -> Any:
    x, w = a["input"], a["weight"]
    y = lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())))
    return y if a.get("bias") is None else y + a["bias"]


def _matmul(a: dict[str, Any]) -> Any:
    return jnp.matmul(a["self"], a["mat2"] if "mat2" in a else a["other"])


def _addmm(a: dict[str, Any]) -> Any:
    y = jnp.matmul(a["mat1"] if "mat1" in a else a["batch1"], a["mat2"] if "mat2" in a else a["batch2"])
    if a.get("alpha", 1) != 1:
        y = y * a["alpha"]
    return y + (a["self"] if a.get("beta", 1) == 1 else a["self"] * a["beta"])


def _conv(a: dict[str, Any]) -> Any:
    x, w = a["input"], a["weight"]
    nsp = w.ndim - 2
    if a.get("transposed"):
        raise UnsupportedTorchOp("aten.convolution with transposed=True (a transposed convolution) is not lowered; "
                                 "export the model to ONNX (ConvTranspose is read there)")
    if nsp not in (1, 2, 3):
        raise UnsupportedTorchOp(f"a convolution with {nsp} spatial axes is not lowered")
    stride, dil = _ints(a.get("stride", 1), nsp), _ints(a.get("dilation", 1), nsp)
    pad = a.get("padding", 0)
    if isinstance(pad, str):
        padding: Any = pad.upper()
    else:
        padding = [(p, p) for p in _ints(pad, nsp)]
    spec = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}[nsp]
    y = lax.conv_general_dilated(x, w, stride, padding, rhs_dilation=dil, dimension_numbers=spec,
                                 feature_group_count=int(a.get("groups", 1)))
    bias = a.get("bias")
    return y if bias is None else y + bias.reshape((1, -1) + (1,) * nsp)


def _sdpa(a: dict[str, Any]) -> Any:
    q, k, v = a["query"], a["key"], a["value"]
    if q.shape[-3] != k.shape[-3]:
        if not a.get("enable_gqa") or q.shape[-3] % k.shape[-3]:
            raise UnsupportedTorchOp(f"scaled_dot_product_attention with {q.shape[-3]} query heads and "
                                     f"{k.shape[-3]} key heads needs enable_gqa and a divisible count")
        group = q.shape[-3] // k.shape[-3]
        k, v = jnp.repeat(k, group, axis=-3), jnp.repeat(v, group, axis=-3)
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lead = tuple(range(q.ndim - 2))  # explicit batch axes: a batch of 1 keeps its axis, as the builtins'
    s = lax.dot_general(q, k, (((q.ndim - 1,), (k.ndim - 1,)), (lead, lead))) * scale
    mask = a.get("attn_mask")
    if a.get("is_causal"):
        s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
    if mask is not None:
        s = jnp.where(mask, s, -jnp.inf) if mask.dtype == jnp.bool_ else s + mask
    return lax.dot_general(jax.nn.softmax(s, axis=-1), v, (((s.ndim - 1,), (v.ndim - 2,)), (lead, lead)))


# ------------------------------------------------------------------------------- norms, activations, pools


def _layer_norm(a: dict[str, Any]) -> Any:
    x = a["input"]
    axes = tuple(range(x.ndim - len(a["normalized_shape"]), x.ndim))
    if axes != (x.ndim - 1,):
        raise UnsupportedTorchOp(f"layer_norm over {len(axes)} trailing axes is not lowered (the unit normalises "
                                 "along the last axis)")
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + a.get("eps", 1e-5))
    if a.get("weight") is not None:
        y = y * a["weight"]
    return y if a.get("bias") is None else y + a["bias"]


def _rms_norm(a: dict[str, Any]) -> Any:
    x = a["input"]
    if len(a["normalized_shape"]) != 1:
        raise UnsupportedTorchOp("rms_norm over several trailing axes is not lowered")
    eps = a.get("eps")
    y = x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + (1e-6 if eps is None else eps))
    return y if a.get("weight") is None else y * a["weight"]


def _batch_norm(a: dict[str, Any]) -> Any:
    """Eval-mode batch norm on statistics folded to a per-channel ``(scale, shift)`` pair (the
    trace hands them as ``weight`` and ``bias``; see :mod:`workloads._torch_trace`)."""
    x = a["input"]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return x * a["weight"].reshape(shape) + a["bias"].reshape(shape)


def _softmax(a: dict[str, Any]) -> Any:
    x = a["self"]
    if a.get("dtype") is not None:
        x = x.astype(jax_dtype(a["dtype"]))
    return jax.nn.softmax(x, axis=a["dim"])


def _pool_window(x: Any, kernel: Sequence[int], stride: Sequence[int], pad: Sequence[int]) -> tuple[Any, ...]:
    lead = x.ndim - len(kernel)
    return ((1,) * lead + tuple(kernel), (1,) * lead + tuple(stride),
            ((0, 0),) * lead + tuple((p, p) for p in pad))


def _max_pool(a: dict[str, Any]) -> Any:
    x, n = a["self"], len(_ints(a["kernel_size"], 1)) if not isinstance(a["kernel_size"], int) else 1
    n = 2 if n == 1 and x.ndim >= 4 else n
    kernel = _ints(a["kernel_size"], n)
    stride = _ints(a.get("stride") or kernel, n)
    if any(d != 1 for d in _ints(a.get("dilation", 1), n)) or a.get("ceil_mode"):
        raise UnsupportedTorchOp("max_pool2d with dilation or ceil_mode is not lowered")
    win, st, pads = _pool_window(x, kernel, stride, _ints(a.get("padding", 0), n))
    return lax.reduce_window(x, -jnp.inf, lax.max, win, st, pads)


def _avg_pool(a: dict[str, Any]) -> Any:
    x = a["self"]
    kernel = _ints(a["kernel_size"], 2)
    stride = _ints(a.get("stride") or kernel, 2)
    pad = _ints(a.get("padding", 0), 2)
    if a.get("ceil_mode") or (any(pad) and not a.get("count_include_pad", True)) or a.get("divisor_override"):
        raise UnsupportedTorchOp("avg_pool2d with ceil_mode, count_include_pad=False or divisor_override "
                                 "is not lowered")
    win, st, pads = _pool_window(x, kernel, stride, pad)
    return lax.reduce_window(x, 0.0, lax.add, win, st, pads) / (kernel[0] * kernel[1])


def _adaptive_avg_pool(a: dict[str, Any]) -> Any:
    x = a["self"]
    out = _ints(a["output_size"], 2)
    h, w = x.shape[-2:]
    if out == (h, w):
        return x  # every window one element: no work
    if out == (1, 1):
        return jnp.mean(x, axis=(x.ndim - 2, x.ndim - 1))[..., None, None]
    if h % out[0] or w % out[1]:
        raise UnsupportedTorchOp(f"adaptive_avg_pool2d from {h}x{w} to {out[0]}x{out[1]} (not a divisor: uneven "
                                 "windows) is not lowered")
    kernel = (h // out[0], w // out[1])
    return _avg_pool({"self": x, "kernel_size": kernel, "stride": kernel})


def _gelu(a: dict[str, Any]) -> Any:
    return jax.nn.gelu(a["self"], approximate=a.get("approximate", "none") == "tanh")


def _hardtanh(a: dict[str, Any]) -> Any:
    return jnp.clip(a["self"], a.get("min_val", -1.0), a.get("max_val", 1.0))


def _clamp(a: dict[str, Any]) -> Any:
    x = a["self"]
    if a.get("min") is not None:
        x = jnp.maximum(x, a["min"])
    return x if a.get("max") is None else jnp.minimum(x, a["max"])


# ------------------------------------------------------------------------------------------ layout, misc


def _view(a: dict[str, Any]) -> Any:
    return jnp.reshape(a["self"], tuple(a["size"] if "size" in a else a["shape"]))


def _slice(a: dict[str, Any]) -> Any:
    x = a["self"]
    dim = _axis(a.get("dim", 0), x.ndim)
    size = x.shape[dim]
    start = a.get("start") or 0
    end = size if a.get("end") is None else min(a["end"], size)
    start, end = (s + size if s < 0 else s for s in (start, end))
    index = [slice(None)] * x.ndim
    index[dim] = slice(max(start, 0), max(end, 0), a.get("step", 1))
    return x[tuple(index)]


def _split(a: dict[str, Any]) -> Any:
    x = a["self"]
    dim = _axis(a.get("dim", 0), x.ndim)
    sizes: Any = a.get("split_size") if "split_size" in a else a.get("split_sizes")
    if isinstance(sizes, int):
        sizes = [sizes] * (x.shape[dim] // sizes) + ([x.shape[dim] % sizes] if x.shape[dim] % sizes else [])
    bounds = [sum(sizes[:i]) for i in range(1, len(sizes))]
    return tuple(jnp.split(x, bounds, axis=dim))


def _chunk(a: dict[str, Any]) -> Any:
    x = a["self"]
    dim = _axis(a.get("dim", 0), x.ndim)
    each = -(-x.shape[dim] // a["chunks"])
    return _split({"self": x, "dim": dim, "split_size": each})


def _index(a: dict[str, Any]) -> Any:
    x = a["self"]
    idx = tuple(slice(None) if i is None else i for i in a["indices"])
    return x[idx]


def _expand(a: dict[str, Any]) -> Any:
    x = a["self"]
    size = list(a["size"])
    lead = len(size) - x.ndim
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return jnp.broadcast_to(x, tuple(shape))


def _to(a: dict[str, Any]) -> Any:
    dtype = a.get("dtype")
    return a["self"] if dtype is None else a["self"].astype(jax_dtype(dtype))


def _full(shape: Sequence[int], value: Any, a: dict[str, Any], like: Any = None) -> Any:
    dtype = a.get("dtype")
    if dtype is not None:
        jd = jax_dtype(dtype)
    elif like is not None:
        jd = like.dtype
    else:
        jd = jnp.float32 if isinstance(value, float) else (jnp.bool_ if isinstance(value, bool) else jnp.int32)
    return jnp.full(tuple(shape), value, jd)


def _arange(a: dict[str, Any]) -> Any:
    start, end = (a.get("start", 0), a["end"])
    dtype = a.get("dtype")
    jd = jax_dtype(dtype) if dtype is not None else (
        jnp.float32 if any(isinstance(v, float) for v in (start, end, a.get("step", 1))) else jnp.int32)
    return jnp.arange(start, end, a.get("step", 1), dtype=jd)


def _where(a: dict[str, Any]) -> Any:
    return jnp.where(a["condition"], a["self"], a["other"])


def _masked_fill(a: dict[str, Any]) -> Any:
    return jnp.where(a["mask"], jnp.asarray(a["value"], a["self"].dtype), a["self"])


def _reduce(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    def run(a: dict[str, Any]) -> Any:
        dims = a.get("dim")
        axis = None if dims is None or dims == [] else (tuple(dims) if isinstance(dims, (list, tuple)) else dims)
        return fn(a["self"], axis=axis, keepdims=bool(a.get("keepdim", False)))
    return run


def _binary(fn: Callable[[Any, Any], Any]) -> Callable[[dict[str, Any]], Any]:
    def run(a: dict[str, Any]) -> Any:
        other = a["other"]
        if a.get("alpha", 1) != 1:
            other = other * a["alpha"]
        return fn(a["self"], other)
    return run


def _div(a: dict[str, Any]) -> Any:
    mode = a.get("rounding_mode")
    x, y = a["self"], a["other"]
    if mode == "floor":
        return jnp.floor_divide(x, y)
    if mode == "trunc":
        return jnp.trunc(x / y)
    return x / y


def _pow(a: dict[str, Any]) -> Any:
    x, e = a["self"], a["exponent"]
    if isinstance(x, (int, float)):
        return jnp.power(x, e)
    if isinstance(e, (int, float)) and float(e).is_integer():
        return lax.integer_pow(x, int(e))
    return jnp.power(x, e)


def _embedding(a: dict[str, Any]) -> Any:
    # unsigned token ids: a table lookup (a gather) without jnp's wrap-around of negative indices
    return a["weight"].at[a["indices"].astype(jnp.uint32)].get(mode="promise_in_bounds")


def _unary(fn: Callable[[Any], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda a: fn(a["self"])


def _same(a: dict[str, Any]) -> Any:
    return a["self"] if "self" in a else a["input"]


def _cat(a: dict[str, Any]) -> Any:
    # PyTorch skips a 1-D empty tensor in a cat (an empty KV cache before its first update)
    parts = [t for t in a["tensors"] if not (t.ndim == 1 and t.shape[0] == 0)] or list(a["tensors"])
    return jnp.concatenate(parts, axis=a.get("dim", 0))


def _topk(a: dict[str, Any]) -> Any:
    x, dim = a["self"], _axis(a.get("dim", -1), a["self"].ndim)
    if not a.get("largest", True):
        raise UnsupportedTorchOp("topk with largest=False is not lowered")
    values, index = lax.top_k(jnp.moveaxis(x, dim, -1), a["k"])
    return jnp.moveaxis(values, -1, dim), jnp.moveaxis(index, -1, dim)


def _squeeze(a: dict[str, Any]) -> Any:
    x, dim = a["self"], a.get("dim")
    if dim is None:
        return jnp.squeeze(x)
    dims = tuple(d for d in (dim if isinstance(dim, (list, tuple)) else [dim]) if x.shape[d] == 1)
    return jnp.squeeze(x, dims) if dims else x  # PyTorch leaves an axis that is not 1 alone


def _repeat_interleave(a: dict[str, Any]) -> Any:
    return jnp.repeat(a["self"], a["repeats"], axis=a.get("dim"))


HANDLERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    # matrix ops
    "linear": _linear, "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "addmm": _addmm, "baddbmm": _addmm,
    "conv1d": _conv, "conv2d": _conv, "conv3d": _conv, "convolution": _conv, "_convolution": _conv,
    "scaled_dot_product_attention": _sdpa,
    # norms, activations, pools
    "layer_norm": _layer_norm, "rms_norm": _rms_norm, "batch_norm": _batch_norm,
    "_native_batch_norm_legit_no_training": lambda a: (_batch_norm(a), None, None),
    "softmax": _softmax, "_softmax": _softmax,
    "log_softmax": lambda a: jax.nn.log_softmax(a["self"], axis=a["dim"]),
    "gelu": _gelu, "silu": _unary(jax.nn.silu), "relu": lambda a: jnp.maximum(a["self"], 0.0),
    "sigmoid": _unary(jax.nn.sigmoid), "tanh": _unary(jnp.tanh), "hardtanh": _hardtanh, "relu6": _hardtanh,
    "clamp": _clamp, "clamp_min": lambda a: jnp.maximum(a["self"], a["min"]),
    "max_pool2d": _max_pool, "max_pool1d": _max_pool, "avg_pool2d": _avg_pool,
    "adaptive_avg_pool2d": _adaptive_avg_pool, "_adaptive_avg_pool2d": _adaptive_avg_pool,
    # element-wise
    "add": _binary(jnp.add), "add_": _binary(jnp.add), "mul_": _binary(jnp.multiply), "div_": _div,
    "sub": _binary(jnp.subtract), "rsub": lambda a: a["other"] - a["self"],
    "mul": _binary(jnp.multiply), "div": _div, "pow": _pow, "neg": _unary(jnp.negative),
    "rsqrt": _unary(lax.rsqrt), "sqrt": _unary(jnp.sqrt), "exp": _unary(jnp.exp), "log": _unary(jnp.log),
    "cos": _unary(jnp.cos), "sin": _unary(jnp.sin), "abs": _unary(jnp.abs), "erf": _unary(lax.erf),
    "reciprocal": lambda a: 1.0 / a["self"], "square": _unary(jnp.square),
    "maximum": _binary(jnp.maximum), "minimum": _binary(jnp.minimum),
    "eq": _binary(jnp.equal), "ne": _binary(jnp.not_equal), "lt": _binary(jnp.less), "le": _binary(jnp.less_equal),
    "gt": _binary(jnp.greater), "ge": _binary(jnp.greater_equal),
    "logical_and": _binary(jnp.logical_and), "logical_or": _binary(jnp.logical_or),
    "bitwise_and": _binary(jnp.bitwise_and), "bitwise_or": _binary(jnp.bitwise_or),
    "__and__": _binary(jnp.bitwise_and), "__or__": _binary(jnp.bitwise_or), "__invert__": _unary(jnp.invert),
    "diff": lambda a: jnp.diff(a["self"], a.get("n", 1), axis=a.get("dim", -1), prepend=a.get("prepend"),
                               append=a.get("append")),
    "logical_not": _unary(jnp.logical_not), "bitwise_not": _unary(jnp.invert),
    "where": _where, "masked_fill": _masked_fill,
    "mean": _reduce(jnp.mean), "sum": _reduce(jnp.sum), "amax": _reduce(jnp.max), "amin": _reduce(jnp.min),
    "cumsum": lambda a: jnp.cumsum(a["self"], axis=a["dim"]),
    "topk": _topk,
    "tril": lambda a: jnp.tril(a["self"], a.get("diagonal", 0)),
    "triu": lambda a: jnp.triu(a["self"], a.get("diagonal", 0)),
    # layout
    "view": _view, "reshape": _view, "_unsafe_view": _view, "_reshape_alias": _view,
    "flatten": lambda a: jnp.reshape(a["self"], a["self"].shape[:_axis(a.get("start_dim", 0), a["self"].ndim)]
                                     + (-1,) + a["self"].shape[_axis(a.get("end_dim", -1), a["self"].ndim) + 1:]),
    "unflatten": lambda a: jnp.reshape(a["self"], a["self"].shape[:_axis(a["dim"], a["self"].ndim)] + tuple(a["sizes"])
                                       + a["self"].shape[_axis(a["dim"], a["self"].ndim) + 1:]),
    "permute": lambda a: jnp.transpose(a["self"], a["dims"]),
    "transpose": lambda a: jnp.swapaxes(a["self"], a["dim0"], a["dim1"]),
    "t": lambda a: a["self"].T, "numpy_T": lambda a: a["self"].T,
    "unsqueeze": lambda a: jnp.expand_dims(a["self"], a["dim"]),
    "squeeze": _squeeze,
    "expand": _expand, "expand_as": lambda a: jnp.broadcast_to(a["self"], a["other"].shape),
    "repeat": lambda a: jnp.tile(a["self"], a["repeats"]), "repeat_interleave": _repeat_interleave,
    "cat": _cat, "concat": _cat,
    "stack": lambda a: jnp.stack(a["tensors"], axis=a.get("dim", 0)),
    "split": _split, "split_with_sizes": _split, "chunk": _chunk, "unbind": lambda a: tuple(
        jnp.moveaxis(a["self"], a.get("dim", 0), 0)),
    "slice": _slice, "narrow": lambda a: _slice({"self": a["self"], "dim": a["dim"], "start": a["start"],
                                                  "end": a["start"] + a["length"]}),
    "select": lambda a: jnp.take(a["self"], a["index"], axis=a["dim"]),
    "index": _index, "index_select": lambda a: jnp.take(a["self"], a["index"], axis=a["dim"]),
    "embedding": _embedding, "gather": lambda a: jnp.take_along_axis(a["self"], a["index"], axis=a["dim"]),
    "contiguous": _same, "clone": _same, "alias": _same, "detach": _same, "detach_": _same, "lift_fresh_copy": _same,
    "dropout": lambda a: a["input"], "feature_dropout": lambda a: a["input"], "_assert_tensor_metadata": lambda a: None,
    "_to_copy": _to, "to": _to, "type_as": lambda a: a["self"].astype(a["other"].dtype),
    "_assert_async": lambda a: None, "sym_constrain_range_for_size": lambda a: None,
    # constructors
    "arange": _arange, "zeros": lambda a: _full(a["size"], 0.0, a), "ones": lambda a: _full(a["size"], 1.0, a),
    "full": lambda a: _full(a["size"], a["fill_value"], a), "scalar_tensor": lambda a: _full((), a["s"], a),
    "zeros_like": lambda a: _full(a["self"].shape, 0, a, a["self"]),
    "ones_like": lambda a: _full(a["self"].shape, 1, a, a["self"]),
    "full_like": lambda a: _full(a["self"].shape, a["fill_value"], a, a["self"]),
    "new_ones": lambda a: _full(a["size"], 1, a, a["self"]), "new_zeros": lambda a: _full(a["size"], 0, a, a["self"]),
    "empty": lambda a: _full(a["size"], 0.0, a),
}
