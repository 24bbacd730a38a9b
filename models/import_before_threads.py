"""The model libraries imported in one thread before the pipeline's node threads start.

Two libraries polysent's nodes use are not safe to import from two threads at once:

- **torch**: two threads importing it at once abort the process ("terminate called after throwing an instance of
  'python_error'"; 6 of 6 runs of ``import torch`` against ``import torch.distributed`` on torch 2.13.0+cpu, Python
  3.11) — ``models.lazy_torch.import_torch_now``.
- **transformers**: a thread running ``from transformers import PreTrainedTokenizerFast`` (the ``tokenizer`` node)
  while another thread's first ``import transformers`` (an evaluation node loading its model) is still running finds
  the half-initialised package in ``sys.modules`` and fails with ``ImportError: cannot import name
  'PreTrainedTokenizerFast' from 'transformers'`` (transformers 5.24.0: 3 of 3 runs; 0 of 3 with transformers imported
  first). Its top-level module is a ``_LazyModule`` that imports a submodule when a name is first asked for, so the
  names polysent uses are resolved here too (0 of 5 failures with two ``AutoModel.from_pretrained`` calls of different
  architectures beside the tokenizer module's import).

So the flow calls ``import_model_libraries_now`` before its task runner starts threads: torch and
``torch.distributed``, and every name polysent's modules import from ``transformers`` (``TRANSFORMERS_NAMES``; a test
keeps the list equal to the ``from transformers import …`` lines under ``models/``). It costs the imports a training
or evaluation node would make anyway (~2–4 s), so the flow calls it only where the DAG trains, evaluates or mines.
"""

from __future__ import annotations

import importlib

from models.lazy_torch import import_torch_now

__all__ = ["TRANSFORMERS_NAMES", "import_model_libraries_now"]

# what ``models/`` imports from ``transformers`` (models/encoder.py, models/training/tokenizer.py)
TRANSFORMERS_NAMES = ("AutoConfig", "AutoModel", "AutoTokenizer", "BertConfig", "BertModel", "PreTrainedTokenizerBase",
                      "PreTrainedTokenizerFast")


def import_model_libraries_now() -> None:
    """Import torch (with ``torch.distributed``) and resolve ``TRANSFORMERS_NAMES`` in the calling thread."""
    import_torch_now()
    transformers = importlib.import_module("transformers")
    for name in TRANSFORMERS_NAMES:
        getattr(transformers, name)
