"""Loading a user's own JAX function named ``package.module:function`` (no JAX import here).

How a function gives its example arguments (the first that exists wins):

1. an attribute ``example_args`` on the function: a tuple of arguments, or a callable with no
   parameters returning that tuple (the :func:`with_example_args` decorator sets it);
2. a module-level ``example_args`` callable in the function's module, called with no
   arguments, or with the function's name when it takes one parameter (one hook serving
   several functions);
3. none, when the function takes no arguments (its constants captured): it is traced as
   ``fn()``.

Arguments are arrays or (better: nothing is computed while tracing) pytrees of
``jax.ShapeDtypeStruct``. A value that is not a tuple is taken as the single argument.
The current directory is importable, so ``mymodels:forward`` finds ``./mymodels.py``; a path
``dir/mymodels.py:forward`` names the file itself. A function of no arguments returning
``(torch.nn.Module, example_args)`` is a PyTorch model (:mod:`workloads._torch_trace`).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from accel_spec.errors import WorkloadError

__all__ = ["with_example_args", "load_user_function", "split_user_spec", "USER_OPTIONS"]

#: Options a ``package.module:function:k=v,...`` spec may give (post-training quantisation of a
#: float model, :mod:`workloads._ptq`): the weights' scale granularity, a calibration file, the
#: seeded calibration samples.
USER_OPTIONS = {"quant": "tensor or channel", "calib": "a .npz file", "samples": "an integer in [1, 64]"}

F = TypeVar("F", bound=Callable[..., Any])


def with_example_args(*args: Any) -> Callable[[F], F]:
    """Decorator that attaches example arguments to a function for ``--workload module:function``.

    Example::

        @with_example_args(jax.ShapeDtypeStruct((8, 512), jnp.int8))
        def forward(x): ...
    """

    def attach(fn: F) -> F:
        fn.example_args = args  # type: ignore[attr-defined]
        return fn

    return attach


def _one_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _import_file(path: str, spec: str) -> Any:
    """The module in the Python file ``path`` (``file.py:function``), imported under its stem's name."""
    import importlib.util

    file = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(file):
        raise WorkloadError(f"workload {spec!r}: file {path!r} does not exist")
    name = os.path.splitext(os.path.basename(file))[0]
    loader_spec = importlib.util.spec_from_file_location(name, file)
    if loader_spec is None or loader_spec.loader is None:
        raise WorkloadError(f"workload {spec!r}: {path!r} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    folder = os.path.dirname(file)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # the user's module may raise anything on import
        sys.modules.pop(name, None)
        raise WorkloadError(f"workload {spec!r}: importing {path!r} failed: {_one_line(exc)}") from exc
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _import(module_name: str, spec: str) -> Any:
    if module_name.lower().endswith(".py"):
        return _import_file(module_name, spec)
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.append(cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise WorkloadError(f"workload {spec!r}: module {module_name!r} cannot be imported "
                                f"(no module named {exc.name!r})") from exc
        raise WorkloadError(f"workload {spec!r}: importing module {module_name!r} failed: "
                            f"{_one_line(exc)}") from exc
    except Exception as exc:  # the user's module may raise anything on import
        raise WorkloadError(f"workload {spec!r}: importing module {module_name!r} failed: "
                            f"{_one_line(exc)}") from exc
    finally:
        if added:
            sys.path.remove(cwd)


def _call_hook(hook: Any, fn_name: str, spec: str) -> Any:
    if not callable(hook):
        return hook
    try:
        params = inspect.signature(hook).parameters
        wants_name = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                         for p in params.values())
    except (TypeError, ValueError):
        wants_name = False
    try:
        return hook(fn_name) if wants_name else hook()
    except Exception as exc:  # the user's hook may raise anything
        raise WorkloadError(f"workload {spec!r}: example_args() raised {_one_line(exc)}") from exc


def _takes_no_arguments(fn: Any) -> bool:
    """True if ``fn`` can be called with no arguments (every parameter has a default or is ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C function without a signature
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


def load_user_function(spec: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """Import ``package.module:function`` and find its example arguments.

    Returns:
        The function and its example argument tuple.

    Raises:
        WorkloadError: if the module cannot be imported, the function does not exist or is not
            callable, or it takes arguments and gives no example arguments.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr or ":" in attr:
        raise WorkloadError(f"workload {spec!r} must be NAME[:k=v,...] or package.module:function")
    module = _import(module_name, spec)
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise WorkloadError(f"workload {spec!r}: module {module_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise WorkloadError(f"workload {spec!r}: {attr!r} is not a function but {type(fn).__name__}")
    if hasattr(fn, "example_args"):
        args = _call_hook(fn.example_args, attr, spec)
    elif hasattr(module, "example_args"):
        args = _call_hook(module.example_args, attr, spec)
    elif _takes_no_arguments(fn):
        args = ()
    else:
        raise WorkloadError(
            f"workload {spec!r} gives no example arguments: set {attr}.example_args "
            f"(or use @workloads.with_example_args) or define example_args() in {module_name}"
        )
    if args is None:
        raise WorkloadError(f"workload {spec!r}: example_args gave None, not the function's arguments")
    return fn, args if isinstance(args, tuple) else (args,)


def split_user_spec(spec: str) -> tuple[str, dict[str, str | int]]:
    """``"mod:fn:quant=tensor,calib=c.npz"`` -> ``("mod:fn", {"quant": "tensor", "calib": "c.npz"})``.

    Raises:
        WorkloadError: an unknown option, one given twice, or a bad value (the rule is named).
    """
    module_name, _, rest = spec.partition(":")
    attr, sep, text = rest.partition(":")
    if not sep:
        return spec, {}
    options: dict[str, str | int] = {}
    for item in text.split(","):
        key, eq, value = (x.strip() for x in item.partition("="))
        if not eq or key not in USER_OPTIONS:
            raise WorkloadError(f"workload {spec!r}: a function's options are "
                                f"{', '.join(f'{k}=<{v}>' for k, v in USER_OPTIONS.items())}, not {item.strip()!r}")
        if key in options:
            raise WorkloadError(f"workload {spec!r}: option {key} is given twice")
        if key == "quant" and value not in ("tensor", "channel"):
            raise WorkloadError(f"workload {spec!r}: quant must be tensor or channel, not {value!r}")
        if key == "calib" and not value.endswith(".npz"):
            raise WorkloadError(f"workload {spec!r}: calib must name a .npz file, not {value!r}")
        if key == "samples":
            if not value.isdigit() or not 1 <= int(value) <= 64:
                raise WorkloadError(f"workload {spec!r}: samples must be an integer in [1, 64], not {value!r}")
            options[key] = int(value)
            continue
        options[key] = value
    return f"{module_name}:{attr}", options
