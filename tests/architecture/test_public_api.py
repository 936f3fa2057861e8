"""The public surface: a narrow ``dualgpu.__all__``, old names and paths that still work for one
release (with a DeprecationWarning that names the new home), one root for every error."""
import importlib
import inspect
import sys
import warnings

import pytest

import dualgpu
from dualgpu import _moved, errors

PUBLIC = {
    "Dual", "DualArray", "dual_array",
    "jvp", "jvp_batch", "jacfwd", "jacobian", "hvp", "hessian", "ensemble_jacobian", "propagate",
    "jit", "cuda", "backend", "set_backend", "using_backend",
    "astype", "float32", "float64", "zeros", "keep_host_buffers",
    "dmath", "dcmath", "rules", "nansafe", "sparse", "testing", "errors",
    "DualgpuError", "MissingRuleError", "UnportedKernelError", "UnsupportedFeatureError",
}


def test_all_is_what_a_user_calls():
    assert set(dualgpu.__all__) == PUBLIC
    for name in dualgpu.__all__:
        assert getattr(dualgpu, name) is not None


# what `from dualgpu import *` pulls in: tests/architecture/test_fresh_imports.py


@pytest.mark.parametrize("name,home", sorted(dualgpu._MOVED_NAMES.items()))
def test_a_moved_name_works_with_a_warning_that_names_its_home(name, home):
    with pytest.warns(DeprecationWarning, match=rf"dualgpu\.{name} moved to {home}\.{name}"):
        obj = getattr(dualgpu, name)
    assert obj is getattr(importlib.import_module(home), name)


@pytest.mark.parametrize("old,new", sorted(_moved.MOVED.items()))
def test_an_old_module_path_imports_the_moved_module_with_a_warning(old, new):
    parent = old.rpartition(".")[0]
    if parent in _moved.MOVED:  # its own warning first, whichever test ran before this one
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(f"dualgpu.{parent}")
    saved = sys.modules.pop(f"dualgpu.{old}", None)
    try:
        with pytest.warns(DeprecationWarning, match=rf"dualgpu\.{old} moved to dualgpu\.{new}"):
            module = importlib.import_module(f"dualgpu.{old}")
        assert module is importlib.import_module(f"dualgpu.{new}")
        assert module.__name__ == f"dualgpu.{new}"
        assert module.__spec__.name == f"dualgpu.{new}"  # the module keeps its own spec
    finally:
        if saved is not None:
            sys.modules[f"dualgpu.{old}"] = saved


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'jacobain'"):
        dualgpu.jacobain  # noqa: B018


def test_the_functions_keep_their_names_over_the_old_module_paths():
    # dualgpu.backend and dualgpu.hessian were also module paths; the functions win
    assert callable(dualgpu.backend) and callable(dualgpu.hessian)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dualgpu.backend() in ("cpu", "cuda", "cudasim")


def _classes(base):
    found = []
    for name in sorted(sys.modules):
        if name == "dualgpu" or name.startswith("dualgpu."):
            module = sys.modules[name]
            for obj in vars(module).values():
                if inspect.isclass(obj) and issubclass(obj, base) and obj.__module__ == name:
                    found.append(obj)
    return found


def test_every_public_error_has_the_root_and_keeps_its_builtin_base():
    assert issubclass(errors.DualgpuError, ValueError)
    for cls in (errors.MissingRuleError, errors.UnportedKernelError,
                errors.UnsupportedFeatureError):
        assert issubclass(cls, TypeError)
    public = [c for c in _classes(Exception) if not c.__name__.startswith("_")
              and not issubclass(c, Warning)]
    internal = {"Uncacheable"}  # control flow of the cpu compile cache, never reaches a user
    missing = [f"{c.__module__}.{c.__name__}" for c in public
               if c.__name__ not in internal and not issubclass(c, errors.DualgpuBaseError)]
    assert not missing, f"errors without the root DualgpuBaseError: {missing}"


def test_every_warning_has_the_root():
    missing = [f"{c.__module__}.{c.__name__}" for c in _classes(Warning)
               if not issubclass(c, errors.DualgpuWarning)]
    assert not missing, f"warnings without the root DualgpuWarning: {missing}"


# the public functions carry type hints (dualgpu ships py.typed; nox -s typecheck runs mypy)
TYPED_NAMESPACES = ["dualgpu", "dualgpu.sparse", "dualgpu.testing", "dualgpu.distributed",
                    "dualgpu.interop", "dualgpu.sensitivity", "dualgpu.plot"]


def _public_functions():
    for module_name in TYPED_NAMESPACES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = inspect.unwrap(getattr(module, name))
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj


@pytest.mark.parametrize("name,func", list(_public_functions()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_public_functions_have_type_hints(name, func):
    signature = inspect.signature(func)
    missing = [p.name for p in signature.parameters.values()
               if p.annotation is inspect.Parameter.empty]
    assert not missing, f"{name}: parameters without a type hint: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, (
        f"{name}: no return type hint")


def test_the_package_is_marked_typed():
    from pathlib import Path

    assert (Path(dualgpu.__file__).parent / "py.typed").is_file()
