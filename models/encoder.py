"""Sentence encoder = a 🤗 transformer + pooling, saved in sentence-transformers' folder format.

``SentenceEncoder.save(path)`` writes what ``SentenceTransformer(path)`` loads (``modules.json``,
``sentence_bert_config.json``, ``1_Pooling/config.json`` and the backbone's ``save_pretrained`` files in the root),
without importing sentence-transformers; ``SentenceEncoder.load`` reads the same layout back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from models.settings import EncoderSettings

POOLING_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pooling as sentence-transformers does it: ``mean`` over the attention mask (special tokens included,
    denominator clamped at 1e-9) or the ``cls`` vector."""
    if mode == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


class SentenceEncoder(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer: PreTrainedTokenizerBase, pooling: str, max_length: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length

    @classmethod
    def from_settings(cls, settings: EncoderSettings, tokenizer_dir: Path) -> SentenceEncoder:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        if settings.pretrained:
            backbone = AutoModel.from_pretrained(settings.pretrained)
        else:
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
        return int(self.backbone.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt", return_token_type_ids=False)
        return {k: v.to(self.device) for k, v in batch.items()}

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        batch = self.tokenize(texts)
        hidden = self.backbone(**batch).last_hidden_state
        return pool(hidden, batch["attention_mask"], self.pooling)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 128, normalize: bool = True) -> np.ndarray:
        """Embeddings as float32 numpy (L2-normalised by default), in input order; sorts by length for speed."""
        was_training = self.training
        self.eval()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(texts), batch_size):
            idx = order[i : i + batch_size]
            emb = self([texts[j] for j in idx]).float()
            if normalize:
                emb = nn.functional.normalize(emb, dim=-1)
            out[idx] = emb.cpu().numpy()
        self.train(was_training)
        return out

    # -- sentence-transformers folder format -------------------------------------------------------------------
    def save(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(str(path), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path))
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        _dump(path / "modules.json", modules)
        _dump(path / "sentence_bert_config.json", {"max_seq_length": self.max_length, "do_lower_case": False})
        _dump(path / "config_sentence_transformers.json",
              {"model_type": "SentenceTransformer", "__version__": {"polysent": "0.1.0"}, "prompts": {},
               "default_prompt_name": None, "similarity_fn_name": "cosine"})
        pooling = dict.fromkeys(POOLING_KEYS, False)
        pooling["pooling_mode_cls_token" if self.pooling == "cls" else "pooling_mode_mean_tokens"] = True
        _dump(path / "1_Pooling" / "config.json",
              {"word_embedding_dimension": self.dim, **pooling, "include_prompt": True})

    @classmethod
    def load(cls, path: Path, device: str | torch.device = "cpu") -> SentenceEncoder:
        path = Path(path)
        pcfg = json.loads((path / "1_Pooling" / "config.json").read_text())
        if pcfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif pcfg.get("pooling_mode_mean_tokens"):
            pooling = "mean"
        else:
            raise ValueError(f"{path}/1_Pooling/config.json: only cls and mean pooling are supported")
        st = json.loads((path / "sentence_bert_config.json").read_text())
        config = AutoConfig.from_pretrained(str(path))
        extra = {"add_pooling_layer": False} if config.model_type in ("bert", "roberta", "xlm-roberta") else {}
        backbone = AutoModel.from_pretrained(str(path), **extra)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        return cls(backbone, tokenizer, pooling, int(st["max_seq_length"])).to(device)


def _dump(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no GPU")
    return torch.device(name)
