"""``torch``, loaded on its first use instead of at import.

Why: an objective is one module (``models/objectives/<kind>.py``) holding its settings, its batching and its loss, and
the pipeline's config loader imports every objective module to read the ``objectives`` list of a training run. Planning,
validating and a no-op ``polysent run`` never train, and importing torch costs about 2 s on 2 cores (measured:
``python -c "import torch"`` 2.0 s against 0.8 s for the whole config loader), more than a no-op run takes. So the
objective modules, the shared loss parts and the component base take ``torch`` from here: the standard library's
``importlib.util.LazyLoader`` puts a module object in ``sys.modules`` whose first attribute access runs torch's real
import; every later ``import torch`` anywhere returns the same, by then ordinary, module. Nothing else changes: code
writes ``torch.cat`` and ``torch.nn.functional.normalize`` as usual (``F`` below is that namespace, resolved per call).

Classes that derive from a torch class at definition time (``nn.Module`` subclasses) cannot be lazy; they live in
modules the objectives import inside their components (``models/entity_head.py``, ``models/vmsst/``).
``torch_loaded()`` tells whether torch's import actually ran (tests of the torch-free config path use it).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["F", "torch", "torch_loaded"]


def _lazy_module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"models.lazy_torch: module {name!r} is not installed (pip install torch==2.13.0 first)")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _Functional:
    """``torch.nn.functional``, looked up on each use (a lazily loaded package's submodule cannot be bound early)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.nn.functional, name)


def torch_loaded() -> bool:
    """Whether torch's import has run in this process (not only the lazy placeholder)."""
    return "torch._C" in sys.modules


torch = _lazy_module("torch")
F = _Functional()
