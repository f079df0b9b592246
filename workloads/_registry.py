"""The workload registry: builtin names, their options, and ``--workload`` spec resolution.

A spec is ``NAME[:k=v,...]`` naming a builtin with integer options (for example
``bert_base:seq=128,batch=4``), ``package.module:function`` naming a user's JAX function
(see :mod:`workloads._user` for how it gives its example arguments), or ``PATH[:k=v,...]``
naming a workload file (ONNX, StableHLO, SCALE-Sim CSV, Timeloop YAML: :mod:`workloads._files`).
Builtins trace their int8 form with ``jax.ShapeDtypeStruct`` arguments, so nothing is computed; results are cached per
spec.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from accel_spec.errors import WorkloadError
from accel_spec.text import INT_RULE, parse_int, shown
from workloads._files import MAX_OPTION, load_file, split_file_spec
from workloads._layers import FORMS
from workloads._limits import check_limits
from workloads._model import Model
from workloads._models_cnn import alexnet, mobilenet_v2, resnet18
from workloads._models_hf import llama_block
from workloads._models_mlp import dlrm_mlp, gemm, mlp
from workloads._models_transformer import bert_base, gpt2_decode
from workloads._requant import recording, with_flow, with_requant
from workloads._tracer import trace
from workloads._user_child import trace_user
from workloads.ops import Workload

__all__ = ["resolve", "builtin_names", "builtin_descriptions", "builtin_options", "builtin_model", "option_limit",
           "MAX_REPEAT", "MAX_OPTION"]


@dataclass(frozen=True)
class _Builtin:
    description: str
    options: Mapping[str, tuple[int, int]]  # name -> (default, minimum)
    build: Callable[..., Model]
    check: Callable[[dict[str, int]], str | None] = lambda opts: None


def _heads_divide(name: str, d: int, heads: int, even: bool) -> str | None:
    if d % heads:
        return f"{name} option d={d} must be divisible by heads={heads}"
    if even and (d // heads) % 2:
        return f"{name} head size d/heads = {d // heads} must be even (rotary embedding), not odd"
    return None


#: Largest value of a repeat option (how many layers, tables or heads a builtin builds and traces).
MAX_REPEAT = 1024
_REPEAT_OPTIONS = frozenset({"layers", "tables", "heads"})


def option_limit(key: str) -> int:
    """The largest value option ``key`` of a builtin accepts (:data:`MAX_REPEAT` or :data:`MAX_OPTION`)."""
    return MAX_REPEAT if key in _REPEAT_OPTIONS else MAX_OPTION


def _opts(**spec: int | tuple[int, int]) -> Mapping[str, tuple[int, int]]:
    """Options with defaults; a bare int has minimum 1, a pair is (default, minimum).

    Every builtin has ``requant`` (0 or 1; default 1, the raw ``gemm`` 0): whether its ops
    carry the output stage's parameters (outputs leave at ``input_bits``) or not (raw
    ``acc_bits`` outputs, as from a file or a function that does not call ``output_stage``).
    """
    options = {k: v if isinstance(v, tuple) else (v, 1) for k, v in spec.items()}
    options.setdefault("requant", (1, 0))
    return MappingProxyType(options)


def _alexnet_fits(opts: dict[str, int]) -> str | None:
    if opts["res"] < 63:
        return f"alexnet option res must be at least 63 (its five convs and three pools need it), not {opts['res']}"
    return None

_ANY = -(1 << 63)  # options whose range the Requant record checks (its message names the rule)

_LLAMA = {"d": 4096, "heads": 32, "ffn": 11008}

_BUILTINS: Mapping[str, _Builtin] = MappingProxyType({
    "gemm": _Builtin(
        "one GEMM C[m,n] = A[m,k] @ B[k,n] (batch independent instances), int8 x int8 -> int32 "
        "(requant=1: int8 through the output stage)",
        _opts(m=512, k=512, n=512, batch=1, requant=(0, 0), multiplier=(1 << 30, _ANY), shift=(0, _ANY),
              bias=(0, _ANY), zero_point=(0, _ANY), act_min=(-128, _ANY), act_max=(127, _ANY)), gemm),
    "mlp": _Builtin(
        "plain MLP: d_in -> layers x hidden (ReLU) -> d_out on a batch of vectors",
        _opts(batch=128, d_in=784, hidden=1024, layers=3, d_out=10), mlp),
    "resnet18": _Builtin(
        "ResNet-18 ImageNet classifier (He et al. 2016) on res x res images, ~1.8 GMACs at 224",
        _opts(batch=1, res=224, classes=1000), resnet18),
    "mobilenet_v2": _Builtin(
        "MobileNetV2 1.0 (Sandler et al. 2018), depthwise convs as grouped convs, ~0.3 GMACs at 224",
        _opts(batch=1, res=224, classes=1000), mobilenet_v2),
    "alexnet": _Builtin(
        "AlexNet (torchvision's single-tower layers) on res x res images, ~0.71 GMACs at 224",
        _opts(batch=1, res=224, classes=1000), alexnet, _alexnet_fits),
    "bert_base": _Builtin(
        "BERT encoder layer(s), BERT-base by default: d 768, 12 heads, FFN 3072 (QKV, scores, context, output, FFN)",
        _opts(batch=1, seq=512, layers=1, d=768, heads=12, ffn=3072), bert_base,
        lambda o: _heads_divide("bert_base", o["d"], o["heads"], False)),
    "gpt2_decode": _Builtin(
        "GPT-2 small, one decode step against a KV cache of kv tokens, 12 layers and LM head",
        _opts(batch=1, kv=(1024, 0), layers=12), gpt2_decode),
    "llama_block": _Builtin(
        "LLaMA-7B-shaped decoder block, prefill of seq tokens (after kv cached ones if kv > 0)",
        _opts(batch=1, seq=2048, kv=(0, 0), **_LLAMA), llama_block,
        lambda o: _heads_divide("llama_block", o["d"], o["heads"], True)),
    "llama_decode": _Builtin(
        "LLaMA-7B-shaped decoder block, single-token decode against a KV cache of kv tokens",
        _opts(batch=1, seq=1, kv=(2048, 0), **_LLAMA), llama_block,
        lambda o: _heads_divide("llama_decode", o["d"], o["heads"], True)),
    "dlrm_mlp": _Builtin(
        "DLRM bottom MLP, dot interaction and top MLP (MLPerf Criteo config), embeddings as input",
        _opts(batch=128, dense=13, tables=26, dim=128), dlrm_mlp),
})


def builtin_names() -> tuple[str, ...]:
    """Names of the builtin workloads, in listing order."""
    return tuple(_BUILTINS)


def builtin_descriptions() -> dict[str, str]:
    """One-line description of every builtin workload, by name."""
    return {name: b.description for name, b in _BUILTINS.items()}


def builtin_options(name: str) -> dict[str, int]:
    """The options of builtin ``name`` with their defaults."""
    return {k: default for k, (default, _) in _lookup(name).options.items()}


def builtin_settings(spec: str) -> tuple[str, dict[str, int]] | None:
    """``(name, every option with its value)`` of a builtin spec (defaults filled in), else ``None``.

    ``"resnet18"`` -> ``("resnet18", {"batch": 1, "res": 224, ...})``; a user function or a
    file -> ``None``. A bad builtin spec raises ``WorkloadError`` as :func:`resolve` does.
    """
    if not isinstance(spec, str) or split_file_spec(spec.strip()) is not None:
        return None
    parsed = _split(spec.strip())
    if parsed is None:
        return None
    name, options = parsed
    return name, builtin_options(name) | dict(options)


def _lookup(name: str) -> _Builtin:
    builtin = _BUILTINS.get(name)
    if builtin is None:
        close = difflib.get_close_matches(name, _BUILTINS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise WorkloadError(
            f"unknown workload {name!r}{hint}; builtins are {', '.join(_BUILTINS)}, "
            "or give package.module:function"
        )
    return builtin


def _parse_options(name: str, text: str) -> tuple[tuple[str, int], ...]:
    """``"seq=128,batch=4"`` -> ``(("seq", 128), ("batch", 4))`` in the builtin's option order."""
    builtin = _lookup(name)
    given: dict[str, int] = {}
    for item in text.split(","):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key:
            raise WorkloadError(f"{name} options must be k=v pairs separated by commas, not {item.strip()!r}")
        if key not in builtin.options:
            raise WorkloadError(f"{name} has no option {key!r}; its options are {', '.join(builtin.options)}")
        if key in given:
            raise WorkloadError(f"{name} option {key} is given twice")
        minimum = builtin.options[key][1]
        rule = "a positive integer" if minimum >= 1 else "a non-negative integer" if minimum == 0 else "an integer"
        number = parse_int(value)
        if number is None:
            raise WorkloadError(f"{name} option {key} must be {rule}, not {shown(repr(value), 40)} ({INT_RULE})")
        if number < minimum:
            raise WorkloadError(f"{name} option {key} must be {rule}, not {number}")
        if number > option_limit(key):
            raise WorkloadError(f"{name} option {key} must be at most {option_limit(key):,}, not {number:,}")
        given[key] = number
    return tuple((k, given[k]) for k in builtin.options if k in given)


def _split(spec: str) -> tuple[str, tuple[tuple[str, int], ...]] | None:
    """``(builtin name, options)`` for a builtin spec, ``None`` for ``module:function``."""
    name, sep, rest = spec.partition(":")
    if not sep:
        if "." in name:
            raise WorkloadError(f"workload {spec!r} names no function: give package.module:function")
        _lookup(name)
        return name, ()
    function, colon, _ = rest.partition(":")
    if name not in _BUILTINS and colon and "=" not in function:
        return None  # package.module:function:k=v,... (a user function's options, workloads._user)
    if name in _BUILTINS or "=" in rest:
        return name, _parse_options(name, rest)
    return None


def _canonical(name: str, options: tuple[tuple[str, int], ...]) -> str:
    return name + (":" + ",".join(f"{k}={v}" for k, v in options) if options else "")


def _settings(name: str, options: tuple[tuple[str, int], ...]) -> dict[str, int]:
    builtin = _lookup(name)
    settings = builtin_options(name) | dict(options)
    if settings["requant"] not in (0, 1):
        raise WorkloadError(f"{name} option requant must be 0 or 1, not {settings['requant']}")
    problem = builtin.check(settings)
    if problem:
        raise WorkloadError(problem)
    check_limits(name, settings)  # before anything is built or traced
    return settings


def builtin_model(spec: str, form: str = "int8") -> Model:
    """The runnable JAX model of a builtin spec in ``form`` ``"int8"`` or ``"float"``.

    ``model.fn(*model.make_args(seed))`` runs it on deterministic parameters and inputs.
    """
    parsed = _split(spec.strip())
    if parsed is None:
        raise WorkloadError(f"workload {spec!r} is not a builtin; builtins are {', '.join(_BUILTINS)}")
    if form not in FORMS:
        raise WorkloadError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
    name, options = parsed
    return _build(name, form, _settings(name, options))


def _build(name: str, form: str, settings: dict[str, int]) -> Model:
    """The builtin's model (``requant`` is a model option of ``gemm`` only; the others always requantise)."""
    kwargs = settings if name == "gemm" else {k: v for k, v in settings.items() if k != "requant"}
    return _BUILTINS[name].build(FORMS[form], **kwargs)


@functools.lru_cache(maxsize=64)
def _trace_builtin(name: str, options: tuple[tuple[str, int], ...]) -> Workload:
    settings = _settings(name, options)
    model = _build(name, "int8", settings)
    text = ", ".join(f"{k}={v}" for k, v in settings.items())
    flow: list[bool] = []
    with recording(flow) as params:
        workload = trace(model.fn, *model.example_args(), name=_canonical(name, options),
                         description=f"{_BUILTINS[name].description} [{text}]", source="builtin")
    return with_flow(with_requant(workload, params), flow) if settings["requant"] else workload


@functools.lru_cache(maxsize=32)
def _trace_user(spec: str) -> Workload:
    workload, params, flow = trace_user(spec)  # in a child process: see workloads._user_child
    return with_flow(with_requant(workload, params), flow)


def resolve(spec: str) -> Workload:
    """The :class:`Workload` a ``--workload`` spec names.

    Args:
        spec: ``NAME[:k=v,...]`` (a builtin with integer options, e.g. ``bert_base:seq=128``),
            ``package.module:function`` (a user's JAX function; its example arguments come from
            a ``function.example_args`` attribute or a module-level ``example_args()`` hook; a
            function without parameters needs none), or ``PATH[:k=v,...]`` naming a file:
            ONNX, StableHLO (MLIR text or bytecode, a serialized ``jax.export``), a SCALE-Sim
            topology CSV or a Timeloop problem YAML (see :mod:`workloads._files`).

    Raises:
        WorkloadError: for an unknown name (the builtins are listed), a bad option (unknown key,
            not an integer, zero), a module that cannot be imported, a missing function, a
            function that raises while tracing, a missing or unreadable file, or one with no
            matmul or convolution.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise WorkloadError(f"workload must be NAME[:k=v,...] or package.module:function, not {spec!r}")
    spec = spec.strip()
    file_spec = split_file_spec(spec)
    if file_spec is not None:
        return load_file(*file_spec, spec)
    parsed = _split(spec)
    if parsed is None:
        return _trace_user(spec)
    return _trace_builtin(*parsed)
