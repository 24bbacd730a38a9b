"""Sentence encoder = a 🤗 transformer + pooling, saved in sentence-transformers' folder format.

``SentenceEncoder.save(path)`` writes what ``SentenceTransformer(path)`` loads (``modules.json``,
``sentence_bert_config.json``, ``1_Pooling/config.json`` and the backbone's ``save_pretrained`` files in the root),
without importing sentence-transformers; ``SentenceEncoder.load`` reads the same layout back.

Prompts are kept the way sentence-transformers keeps them (``config_sentence_transformers.json``: ``prompts`` by name
and a ``default_prompt_name``). The default prompt is part of the model's input function: it is prepended to every text
the encoder reads — in ``encode`` (as ``SentenceTransformer.encode`` does) *and* in the training forward — so a model
such as multilingual-e5 (``"query: "``) trains on the inputs it is evaluated on, and its export keeps the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from models.settings import EncoderSettings

POOLING_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
_POOLING_NAMES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len", "pooling_mode_lasttoken": "lasttoken"}


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pooling as sentence-transformers does it (``models/Pooling.py``): ``mean`` over the attention mask (special
    tokens included, denominator clamped at 1e-9), ``cls``, ``max`` (padding set to -1e9), ``mean_sqrt_len`` (sum /
    sqrt(length)) or ``lasttoken`` (the last non-padding token, right padding)."""
    if mode == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if mode == "max":
        return hidden.masked_fill(m == 0, -1e9).max(1).values
    if mode == "mean_sqrt_len":
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9).sqrt()
    if mode == "lasttoken":
        last = mask.sum(1).long() - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last.clamp(min=0)]
    raise ValueError(f"unknown pooling mode {mode!r}; expected cls, mean, max, mean_sqrt_len or lasttoken")


def length_batches(lengths: np.ndarray, batch_size: int, batch_tokens: int) -> list[np.ndarray]:
    """Indices of texts with token ``lengths`` cut into the batches ``SentenceEncoder.encode`` runs: ordered by length
    (stable), at most ``batch_size`` texts and about ``batch_tokens`` padded tokens (``len(batch) × longest``) each; a
    text longer than ``batch_tokens`` goes alone. Each batch's last index is its longest text."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    out, i = [], 0
    while i < len(order):
        longest = int(lengths[order[min(i + batch_size, len(order)) - 1]])
        n = max(1, min(batch_size, batch_tokens // max(1, longest)))
        out.append(order[i:i + n])
        i += n
    return out


class Dense(nn.Module):
    """sentence-transformers' ``models.Dense``: linear layer + activation (``Identity`` or ``Tanh`` in practice)."""

    def __init__(self, in_features: int, out_features: int, bias: bool, activation: str) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        name = activation.rsplit(".", 1)[-1]
        if not hasattr(nn, name):
            raise ValueError(f"Dense activation {activation!r} is not a torch.nn module")
        self.activation = getattr(nn, name)()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


class Normalize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, p=2, dim=1)


class MLPHead(nn.Module):
    """SimCSE's ``MLPLayer`` (Linear(d, d) + tanh), applied after pooling in training only (``--mlp_only_train``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class SentenceEncoder(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer: PreTrainedTokenizerBase, pooling: str, max_length: int,
                 post: Sequence[nn.Module] = (), train_head: nn.Module | None = None, *,
                 prompts: dict[str, str] | None = None, default_prompt_name: str | None = None) -> None:
        super().__init__()
        self.prompts = dict(prompts or {})
        if default_prompt_name is not None and default_prompt_name not in self.prompts:
            raise ValueError(f"default prompt {default_prompt_name!r} is not one of the prompts "
                             f"{sorted(self.prompts)}")
        self.default_prompt_name = default_prompt_name
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length
        self.post = nn.ModuleList(post)  # Dense / Normalize modules after pooling, as listed in modules.json
        self.train_head = train_head  # used in training mode only; never saved with the model

    @classmethod
    def from_settings(cls, settings: EncoderSettings, tokenizer_dir: Path | None = None) -> SentenceEncoder:
        """A pretrained model (``settings.pretrained``: its own tokenizer, pooling from a sentence-transformers
        folder's config when it has one, else ``settings.pooling``) or a small BERT built from the size fields with
        the tokenizer in ``tokenizer_dir``; plus the bias-free ``projection`` (appended after pooling and any saved
        Dense, before a saved trailing Normalize), the train-only MLP head and gradient checkpointing when set."""
        if settings.pretrained:
            enc = cls.load(settings.pretrained)
            if not (Path(settings.pretrained) / "modules.json").exists():
                enc.pooling = settings.pooling
            enc.max_length = settings.max_length
        else:
            if tokenizer_dir is None:
                raise ValueError("encoder: building a model from a config needs a tokenizer folder (or set pretrained)")
            enc = cls._from_config(settings, tokenizer_dir)
        if settings.prompt is not None:
            enc.set_default_prompt(settings.prompt)
        if settings.projection:
            projection = Dense(enc.dim, settings.projection, bias=False,
                               activation="torch.nn.modules.linear.Identity")
            if settings.projection == enc.dim:
                nn.init.eye_(projection.linear.weight)
            post = list(enc.post)
            # before a saved trailing Normalize (multilingual-e5, all-MiniLM): the projection maps the pooled vector,
            # and the model still ends unit-length as it was saved
            at = len(post) - 1 if post and isinstance(post[-1], Normalize) else len(post)
            enc.post = nn.ModuleList([*post[:at], projection, *post[at:]])
        if settings.mlp_head:
            enc.train_head = MLPHead(int(enc.backbone.config.hidden_size))
        if settings.gradient_checkpointing:  # transformers 5 renamed it; 4.x only has the old name
            enable = getattr(enc.backbone, "activation_checkpointing_enable", None)
            (enable or enc.backbone.gradient_checkpointing_enable)()
        return enc

    @classmethod
    def _from_config(cls, settings: EncoderSettings, tokenizer_dir: Path) -> SentenceEncoder:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        config = BertConfig(
            vocab_size=len(tokenizer), hidden_size=settings.hidden_size,
            num_hidden_layers=settings.num_layers, num_attention_heads=settings.num_heads,
            intermediate_size=settings.intermediate_size, hidden_dropout_prob=settings.dropout,
            attention_probs_dropout_prob=settings.dropout, max_position_embeddings=max(settings.max_length, 64),
            pad_token_id=tokenizer.pad_token_id,
        )
        backbone = BertModel(config, add_pooling_layer=False)
        return cls(backbone, tokenizer, settings.pooling, settings.max_length)

    @property
    def dim(self) -> int:
        dim = int(self.backbone.config.hidden_size)
        for module in self.post:
            if isinstance(module, Dense):
                dim = module.linear.out_features
        return dim

    @property
    def prompt(self) -> str:
        """The default prompt's text (``""`` without one)."""
        return self.prompts.get(self.default_prompt_name, "") if self.default_prompt_name else ""

    def set_default_prompt(self, text: str) -> None:
        """Make ``text`` the default prompt (``""``: none). A named prompt with that text keeps its name (``"query: "``
        → ``query``); another text is recorded as the prompt ``default``."""
        if not text:
            self.default_prompt_name = None
            return
        name = next((n for n, t in self.prompts.items() if t == text), None)
        if name is None:
            name = "default"
            self.prompts[name] = text
        self.default_prompt_name = name

    def prompted(self, texts: Sequence[str], prompt: str | None = None) -> list[str]:
        """``texts`` as the encoder reads them: ``prompt`` (default: the model's default prompt) + text."""
        prefix = self.prompt if prompt is None else prompt
        return [prefix + t for t in texts] if prefix else list(texts)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(self.prompted(texts), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt", return_token_type_ids=False)
        return {k: v.to(self.device) for k, v in batch.items()}

    def embed_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = self.backbone(**batch).last_hidden_state
        emb = pool(hidden, batch["attention_mask"], self.pooling)
        for module in self.post:
            emb = module(emb)
        if self.training and self.train_head is not None:
            emb = self.train_head(emb)
        return emb

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        return self.embed_batch(self.tokenize(texts))

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 128, normalize: bool = True, *,
               batch_tokens: int = 4096, dtype: torch.dtype | None = None, chunk: int = 65536,
               progress: Callable[[int], None] | None = None, prompt: str | None = None) -> np.ndarray:
        """Embeddings as float32 numpy (L2-normalised by default), in input order. ``prompt`` replaces the model's
        default prompt (``None``: the default).

        Texts are tokenised once (without padding), ordered by token length (stable, so the batches — and therefore
        the floats — depend only on the input list) and cut into batches of at most ``batch_size`` texts and about
        ``batch_tokens`` padded tokens: short sentences go in large batches, long documents in small ones, with almost
        no padding. ``dtype`` (e.g. ``torch.bfloat16`` on a GPU) runs the backbone under autocast.
        """
        was_training = self.training
        self.eval()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        pad_id = self.tokenizer.pad_token_id or 0
        try:
            for start in range(0, len(texts), chunk):
                part = self.prompted(texts[start:start + chunk], prompt)
                ids = self.tokenizer(part, truncation=True, max_length=self.max_length, padding=False,
                                     return_token_type_ids=False, return_attention_mask=False)["input_ids"]
                lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
                for idx in length_batches(lengths, batch_size, batch_tokens):
                    width = int(lengths[idx[-1]])
                    input_ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
                    mask = torch.zeros((len(idx), width), dtype=torch.long)
                    for r, j in enumerate(idx):
                        input_ids[r, : lengths[j]] = torch.as_tensor(ids[j])
                        mask[r, : lengths[j]] = 1
                    batch = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
                    with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
                        emb = self.embed_batch(batch).float()
                    if normalize:
                        emb = nn.functional.normalize(emb, dim=-1)
                    out[start + idx] = emb.cpu().numpy()
                    if progress is not None:
                        progress(len(idx))
        finally:
            self.train(was_training)
        return out

    # -- sentence-transformers folder format -------------------------------------------------------------------
    def save(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(str(path), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path))
        write_module_configs(path, hidden=int(self.backbone.config.hidden_size), pooling=self.pooling,
                             max_length=self.max_length, post=self.post, prompts=self.prompts,
                             default_prompt_name=self.default_prompt_name,
                             pooler=getattr(self.backbone, "pooler", False) is not None)

    @classmethod
    def load(cls, path: Path | str, device: str | torch.device = "cpu") -> SentenceEncoder:
        """A sentence-transformers folder (``modules.json``: Transformer, Pooling, Dense, Normalize), a plain 🤗
        model folder (mean pooling, as sentence-transformers defaults to) or a hub id (needs the network)."""
        path = Path(path)
        if not path.exists():
            return cls._from_hub(str(path), device)
        modules_file = path / "modules.json"
        if not modules_file.exists():
            backbone, tokenizer = _backbone(path)
            return cls(backbone, tokenizer, "mean", _max_length(path, tokenizer)).to(device)
        backbone = tokenizer = None
        pooling, max_length, post = "mean", 512, []
        for module in json.loads(modules_file.read_text()):
            kind, where = module["type"].rsplit(".", 1)[-1], path / module.get("path", "")
            if kind == "Transformer":
                backbone, tokenizer = _backbone(where)
                max_length = _max_length(where, tokenizer)
            elif kind == "Pooling":
                pooling = _pooling_mode(where / "config.json")
            elif kind == "Dense":
                post.append(_dense(where))
            elif kind == "Normalize":
                post.append(Normalize())
            else:
                raise ValueError(f"{modules_file}: module type {module['type']!r} is not supported; expected "
                                 "Transformer, Pooling, Dense or Normalize")
        if backbone is None or tokenizer is None:
            raise ValueError(f"{modules_file}: no sentence_transformers.models.Transformer module")
        prompts, default_prompt = _prompts(path)
        return cls(backbone, tokenizer, pooling, max_length, post, prompts=prompts,
                   default_prompt_name=default_prompt).to(device)

    @classmethod
    def _from_hub(cls, name: str, device: str | torch.device) -> SentenceEncoder:
        try:
            from huggingface_hub import snapshot_download

            local = snapshot_download(name)
        except Exception as exc:
            raise FileNotFoundError(f"model {name!r} is neither a local folder nor reachable on the Hugging Face hub "
                                    f"({type(exc).__name__}: {exc}); offline, give the path of a downloaded "
                                    "sentence-transformers folder") from None
        return cls.load(Path(local), device)


def write_module_configs(path: Path, *, hidden: int, pooling: str, max_length: int, post: Sequence[nn.Module] = (),
                         prompts: dict[str, str] | None = None, default_prompt_name: str | None = None,
                         pooler: bool = True) -> None:
    """The sentence-transformers files around a 🤗 backbone saved in ``path``'s root: ``modules.json`` (Transformer,
    Pooling, then the ``post`` Dense / Normalize modules, Dense weights included), ``sentence_bert_config.json``
    (``add_pooling_layer: false`` when the backbone has no pooler, so sentence-transformers builds none),
    ``config_sentence_transformers.json`` (prompts) and ``1_Pooling/config.json``."""
    key = {v: k for k, v in _POOLING_NAMES.items()}.get(pooling)
    if key is None:
        raise ValueError(f"pooling {pooling!r} cannot be saved in sentence-transformers' format")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    for i, module in enumerate(post, start=2):
        kind = "Dense" if isinstance(module, Dense) else "Normalize"
        modules.append({"idx": i, "name": str(i), "path": f"{i}_{kind}",
                        "type": f"sentence_transformers.models.{kind}"})
        (path / f"{i}_{kind}").mkdir(exist_ok=True)
        if isinstance(module, Dense):
            from safetensors.torch import save_file

            act = type(module.activation)
            write_json(path / f"{i}_{kind}" / "config.json",
                       {"in_features": module.linear.in_features, "out_features": module.linear.out_features,
                        "bias": module.linear.bias is not None,
                        "activation_function": f"{act.__module__}.{act.__name__}"})
            save_file({k: v.contiguous() for k, v in module.state_dict().items()},
                      str(path / f"{i}_{kind}" / "model.safetensors"))
    write_json(path / "modules.json", modules)
    st_config: dict = {"max_seq_length": max_length, "do_lower_case": False}
    if not pooler:
        st_config["model_args"] = {"add_pooling_layer": False}
    write_json(path / "sentence_bert_config.json", st_config)
    write_json(path / "config_sentence_transformers.json",
               {"model_type": "SentenceTransformer", "__version__": {"polysent": "0.1.0"}, "prompts": prompts or {},
                "default_prompt_name": default_prompt_name, "similarity_fn_name": "cosine"})
    flags = dict.fromkeys(POOLING_KEYS, False)
    flags[key] = True
    write_json(path / "1_Pooling" / "config.json",
               {"word_embedding_dimension": hidden, **flags, "include_prompt": True})


def _backbone(path: Path) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    config = AutoConfig.from_pretrained(str(path))
    extra = {"add_pooling_layer": False} if config.model_type in ("bert", "roberta", "xlm-roberta") else {}
    return AutoModel.from_pretrained(str(path), **extra), AutoTokenizer.from_pretrained(str(path))


def _max_length(path: Path, tokenizer: PreTrainedTokenizerBase) -> int:
    st = path / "sentence_bert_config.json"
    if st.exists() and (value := json.loads(st.read_text()).get("max_seq_length")):
        return int(value)
    limit = getattr(tokenizer, "model_max_length", 512)
    return int(limit) if limit and limit < 100_000 else 512


def _prompts(path: Path) -> tuple[dict[str, str], str | None]:
    """``prompts`` and ``default_prompt_name`` of ``config_sentence_transformers.json`` (none when absent)."""
    cfg_file = path / "config_sentence_transformers.json"
    if not cfg_file.exists():
        return {}, None
    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    prompts, default = cfg.get("prompts") or {}, cfg.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ValueError(f"{cfg_file}: prompts must map names to strings, got {prompts!r}")
    if default is not None and default not in prompts:
        raise ValueError(f"{cfg_file}: default_prompt_name {default!r} is not one of the prompts {sorted(prompts)}")
    return prompts, default


def _pooling_mode(config_file: Path) -> str:
    cfg = json.loads(config_file.read_text())
    if isinstance(cfg.get("pooling_mode"), str):  # sentence-transformers ≥ 5 writes the mode by name
        mode = cfg["pooling_mode"]
        modes = [{"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}.get(mode, mode)]
    else:
        modes = [_POOLING_NAMES[k] for k in POOLING_KEYS if cfg.get(k) and k in _POOLING_NAMES]
        if cfg.get("pooling_mode_weightedmean_tokens"):
            modes.append("weightedmean")
    if len(modes) != 1 or modes[0] not in ("cls", "mean", "max", "mean_sqrt_len", "lasttoken"):
        raise ValueError(f"{config_file}: pooling {modes or 'none'} is not supported; expected exactly one of cls, "
                         "mean, max, mean_sqrt_len, lasttoken")
    return modes[0]


def _dense(path: Path) -> Dense:
    cfg = json.loads((path / "config.json").read_text())
    layer = Dense(int(cfg["in_features"]), int(cfg["out_features"]), bool(cfg.get("bias", True)),
                  str(cfg.get("activation_function", "torch.nn.modules.linear.Identity")))
    if (path / "model.safetensors").exists():
        from safetensors.torch import load_file

        state = load_file(str(path / "model.safetensors"))
    elif (path / "pytorch_model.bin").exists():
        state = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{path}: Dense module without model.safetensors or pytorch_model.bin")
    layer.load_state_dict(state)
    return layer


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no GPU")
    return torch.device(name)
