"""What makes a saved sentence-transformers folder load the same everywhere a user takes it (``SentenceEncoder.save``).

A folder polysent writes must load, without a warning, in sentence-transformers (torch, ONNX and OpenVINO backends)
and in plain 🤗 ``transformers``:

* ``tokenizer_config.json``'s ``model_max_length`` is the number of positions the backbone has (``positions``), so
  ``tokenizer(text, truncation=True)`` cuts a long input where the model can read it. The length the model was
  *trained* at stays ``max_seq_length`` in ``sentence_bert_config.json`` (what sentence-transformers truncates at).
  A tokenizer saved without it says 1e30 and a 603-token input then fails inside the position embeddings.
* The backbone is saved with its pooler (``saved_with_pooler``). Sentence embeddings pool the token states and never
  read 🤗's pooler, so polysent trains without one; a checkpoint saved that way reports ``pooler.dense.* MISSING`` in
  ``AutoModel`` and needs ``model_args: {add_pooling_layer: false}`` in ``sentence_bert_config.json``, an argument
  only the torch backend accepts (ONNX: ``ORTModel._from_pretrained() got an unexpected keyword argument
  'add_pooling_layer'``). A missing pooler is therefore written as the identity map (dense weight I, bias 0: the
  pooler output is tanh of the [CLS] state), deterministic, so equal trainings still give byte-identical folders.
* Every file is world-readable and every folder listable (``publishable``): ``save_pretrained`` writes the weights
  through a temporary file of mode 0600.

Needs torch, transformers and safetensors only.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.lazy_torch import torch

ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")
POOLER_WEIGHT = "pooler.dense.weight"
FILE_MODE, DIR_MODE = 0o644, 0o755


def positions(config: Any) -> int | None:
    """How many tokens (special tokens included) the backbone can read: ``max_position_embeddings``, less RoBERTa's
    offset (its positions start after the padding index: 514 → 512). ``None`` when the config has no such field."""
    n = getattr(config, "max_position_embeddings", None)
    if not isinstance(n, int) or n <= 0:
        return None
    if getattr(config, "model_type", None) in ROBERTA_TYPES:
        n -= int(getattr(config, "pad_token_id", 1) or 0) + 1
    return n


def _pooler_class(backbone: Any) -> type | None:
    """``BertPooler`` for a ``BertModel``, ``XLMRobertaPooler`` for an ``XLMRobertaModel`` …, from the backbone's own
    modelling module; ``None`` where there is none."""
    module = sys.modules.get(type(backbone).__module__)
    name = type(backbone).__name__.removesuffix("Model") + "Pooler"
    cls = getattr(module, name, None) if module is not None else None
    return cls if isinstance(cls, type) else None


@contextmanager
def saved_with_pooler(backbone: Any) -> Iterator[bool]:
    """While saving: a backbone whose class has a pooler but was built without one (``add_pooling_layer=False``)
    gets an identity pooler, removed again afterwards (training never sees it). Yields whether the saved checkpoint
    is complete for its class — False only for a class whose pooler cannot be found, which then still needs the
    ``add_pooling_layer: false`` loader argument."""
    if not hasattr(backbone, "pooler") or backbone.pooler is not None:
        yield True
        return
    cls = _pooler_class(backbone)
    if cls is None:
        yield False
        return
    pooler = cls(backbone.config)
    dense = getattr(pooler, "dense", None)
    if not isinstance(dense, torch.nn.Linear) or dense.in_features != dense.out_features:
        yield False
        return
    with torch.no_grad():
        dense.weight.copy_(torch.eye(dense.in_features))
        dense.bias.zero_()
    device, dtype = next(backbone.parameters()).device, next(backbone.parameters()).dtype
    backbone.pooler = pooler.to(device=device, dtype=dtype)
    try:
        yield True
    finally:
        backbone.pooler = None


def weight_names(folder: Path) -> list[str] | None:
    """The tensor names of a 🤗 checkpoint folder (``model.safetensors`` or its sharded index); ``None`` when it has
    neither (a ``pytorch_model.bin`` is not opened: unpickling it costs more than it tells)."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            return sorted(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
        except (OSError, ValueError):
            return None
    single = folder / "model.safetensors"
    if not single.is_file():
        return None
    from safetensors import safe_open

    with safe_open(str(single), framework="pt") as f:
        return list(f.keys())


def has_pooler_weights(folder: Path) -> bool:
    """Whether the checkpoint in ``folder`` holds a pooler (``pooler.dense.weight``, with or without a prefix)."""
    names = weight_names(folder) or []
    return any(n == POOLER_WEIGHT or n.endswith("." + POOLER_WEIGHT) for n in names)


def publishable(root: Path) -> None:
    """Make every file below ``root`` (and ``root``) readable by all: files 0644, folders 0755."""
    root = Path(root)
    root.chmod(DIR_MODE)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), DIR_MODE)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, FILE_MODE)
