"""``torch``, loaded on its first use instead of at import.

Why: an objective is one module (``models/objectives/<kind>.py``) holding its settings, its batching and its loss, and
the pipeline's config loader imports every objective module to read the ``objectives`` list of a training run. Planning,
validating and a no-op ``polysent run`` never train, and importing torch costs about 2 s on 2 cores (measured:
``python -c "import torch"`` 2.0 s against 0.8 s for the whole config loader), more than a no-op run takes. So the
objective modules, the shared loss parts and the component base take ``torch`` from here: a small proxy object whose
first attribute access runs an ordinary ``import torch`` and hands back the real module's attribute. Nothing else
changes: code writes ``torch.cat`` and ``torch.nn.functional.normalize`` as usual (``F`` below is that namespace,
resolved per call).

Why a proxy and not the standard library's ``importlib.util.LazyLoader``: a lazy placeholder in
``sys.modules["torch"]`` breaks the first ``import torch.distributed`` made after it, because torch's own submodules
read the half-loaded placeholder (seen: an abort "generic_type: cannot initialize type GradBucket: an object with that
name is already defined" on torch 2.13.0+cpu / Python 3.11, and ``AttributeError: '_LazyModule' object has no attribute
'Tensor'`` on the CUDA build / Python 3.12 — every GPU experiment row failed at ``models.training.distributed``). The
proxy never enters ``sys.modules``, so every other ``import torch`` is the ordinary one.

Classes that derive from a torch class at definition time (``nn.Module`` subclasses) cannot be lazy; they live in
modules the objectives import inside their components (``models/objectives/ease/entity_head.py``, ``models/vmsst/``).
``torch_loaded()`` tells whether torch's import actually ran (tests of the torch-free config path use it).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["F", "import_torch_now", "torch", "torch_loaded"]


class _LazyTorch:
    """``torch``'s attributes, with torch imported on the first one asked for."""

    _module: ModuleType | None = None

    def _load(self) -> ModuleType:
        module = type(self)._module
        if module is None:
            if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
                raise ImportError("models.lazy_torch: torch is not installed (pip install torch==2.13.0 first)")
            module = importlib.import_module("torch")
            type(self)._module = module
        return module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._load(), name)

    def __repr__(self) -> str:
        module = type(self)._module
        return "<torch, imported on first use>" if module is None else repr(module)


class _Functional:
    """``torch.nn.functional``, looked up on each use."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.nn.functional, name)


def import_torch_now() -> None:
    """Import torch, and ``torch.distributed`` (which the trainer imports), in the calling thread. Call it before
    threads that may each be first to use torch start (the pipeline's node threads): two threads importing torch at
    once abort the process ("terminate called after throwing an instance of 'python_error'"; measured 6 of 6 runs of
    ``import torch`` against ``import torch.distributed`` on torch 2.13.0+cpu, Python 3.11), whatever loads it."""
    import torch.distributed  # noqa: F401


def torch_loaded() -> bool:
    """Whether torch's import has run in this process."""
    return "torch._C" in sys.modules


torch: Any = _LazyTorch()
F = _Functional()
