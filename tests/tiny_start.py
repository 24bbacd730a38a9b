"""A tiny start model on the sample's en–de bitext, shared by the interpolation tests: the ``bitext_pairs`` table,
a 500-piece tokenizer and a seeded random encoder saved under ``root/start``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import SAMPLE

from models.settings import EncoderSettings, TokenizerSettings

TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.0)


def bitext_and_start(root: Path) -> dict[str, Path]:
    """``bitext_pairs``, ``tokenizer`` and ``start`` under ``root`` (paths by name)."""
    import torch

    from models.encoder import SentenceEncoder
    from models.training.tokenizer import train_tokenizer

    src = (SAMPLE / "bitext" / "en-de.en").read_text().splitlines()
    tgt = (SAMPLE / "bitext" / "en-de.de").read_text().splitlines()
    keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
    (root / "bitext_pairs" / "lang=de").mkdir(parents=True)
    pq.write_table(pa.table({"pair_id": [f"p{i}" for i in keep], "pivot_lang": ["en"] * len(keep),
                             "pivot_text": [src[i] for i in keep], "text": [tgt[i] for i in keep]}),
                   root / "bitext_pairs" / "lang=de" / "part-0.parquet")
    pq.write_table(pa.table({"text": [src[i] for i in keep] + [tgt[i] for i in keep]}), root / "t.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=500), {"t": root / "t.parquet"}, root)
    torch.manual_seed(0)
    SentenceEncoder.from_settings(TINY, root / "tokenizer").save(root / "start")
    return {"bitext_pairs": root / "bitext_pairs", "tokenizer": root / "tokenizer", "start": root / "start"}
