# gpuleak run puts this file first on PYTHONPATH as sitecustomize.py (in a directory of its own,
# removed when the command ends; GPULEAK_FRAMEWORKS=0 leaves it out).
#
# By default it waits for the program to import torch, cupy or jax, and then hands the module to
# the gpuleak Python package (when that interpreter has it), which reads PyTorch's caching
# allocator, CuPy's memory pool or JAX's live buffers from inside (docs/frameworks.md). It
# imports nothing else: a program that never imports any pays for three finders on
# sys.meta_path.
#
# Under --no-framework-cache it turns CuPy's memory pools off instead. CuPy has no environment
# variable for that; its documented way is cupy.cuda.set_allocator(None) and
# cupy.cuda.set_pinned_memory_allocator(None), so this runs them as soon as the program has
# imported cupy.
#
# Then it runs the sitecustomize that it hides, if there is one.
import os
import sys


def _gpuleak_after_import(name, after, what, attaches=False):
    """Runs `after(module)` once the program has imported the module `name` (never importing
    it here); a failure is one line on stderr naming `what`, never an error in the program.
    `attaches`: `after` hands the module to the gpuleak package's adapter."""
    import importlib.abc
    import importlib.machinery

    class _Loader:
        """The module's own loader, with a step after it runs (everything else is delegated,
        so that resource readers and the like still work)."""

        def __init__(self, loader):
            self.loader = loader

        def __getattr__(self, attr):
            return getattr(self.loader, attr)

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            self.loader.exec_module(module)
            try:
                after(module)
            except Exception as e:  # noqa: BLE001 - never break the program's import
                sys.stderr.write(f"gpuleak: cannot {what}: {e!r}\n")

    class _Finder(importlib.abc.MetaPathFinder):
        # The gpuleak package's own finder stands aside for the ones that attach it.
        gpuleak_frameworks = attaches

        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
            return spec

    sys.meta_path.insert(0, _Finder())


def _gpuleak_attach(module):
    try:
        from gpuleak import _frameworks
    except ImportError:
        return  # the package is not installed for this interpreter
    _frameworks.attach(module)


def _gpuleak_cupy_pools_off(module):
    module.cuda.set_allocator(None)
    module.cuda.set_pinned_memory_allocator(None)


def _gpuleak_chain():
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("GPULEAK_NO_FRAMEWORK_CACHE") == "1":
    _gpuleak_after_import("cupy", _gpuleak_cupy_pools_off, "turn off CuPy's memory pools")
elif os.environ.get("GPULEAK_FRAMEWORKS", "1") != "0":
    _gpuleak_after_import("torch", _gpuleak_attach, "read PyTorch's allocator", attaches=True)
    _gpuleak_after_import("cupy", _gpuleak_attach, "read CuPy's memory pool", attaches=True)
    _gpuleak_after_import("jax", _gpuleak_attach, "read JAX's device memory", attaches=True)
_gpuleak_chain()
