"""Stage ``tokenizer``: train a subword tokenizer on the pipeline's corpora with 🤗 ``tokenizers``.

SentencePiece-style BPE (``▁`` metaspace pre-tokenisation, as XLM-R and mT5 tokenise), NFKC normalisation (+ optional
lowercasing; accents kept), ``[CLS] … [SEP]`` template. Saved with ``PreTrainedTokenizerFast`` (not
``BertTokenizerFast``, which would save ``do_lower_case: true`` and turn "Müller" into "mul ##ler").

Why not WordPiece: ``WordPieceTrainer`` (and ``BpeTrainer`` with a ``##`` continuing-subword prefix, and
``UnigramTrainer``) give a different vocabulary in every process — the ``##`` tokens get ids in hash-map order and
those ids break ties between equally frequent merges (huggingface/tokenizers#1794, fix pending in #2066). A cached
pipeline must rebuild identical artifacts, so we use the prefix-free BPE trainer, whose alphabet is sorted: the same
texts give byte-identical ``tokenizer.json`` files (tested across processes).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow.dataset as ds
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from contract import StageResult
from models import stage_versions
from models.settings import TokenizerSettings

log = logging.getLogger("polysent.models.tokenizer")
STAGE_VERSION = stage_versions.TOKENIZER
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TEXT_COLUMNS = ("text", "pivot_text")


def iter_texts(tables: Mapping[str, Path], limit: int) -> Iterator[str]:
    """Texts of the ``text``/``pivot_text`` columns of Parquet tables (files or hive folders), in a fixed order."""
    n = 0
    for _name, path in sorted(tables.items()):
        dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
        cols = [c for c in TEXT_COLUMNS if c in dataset.schema.names]
        for batch in dataset.to_batches(columns=cols):
            for col in cols:
                for t in batch.column(col).to_pylist():
                    if t:
                        yield t
                        n += 1
                        if n >= limit:
                            return


def train_tokenizer(settings: TokenizerSettings, tables: Mapping[str, Path], out: Path) -> StageResult:
    norm = [normalizers.NFKC()] + ([normalizers.Lowercase()] if settings.lowercase else [])
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence(norm)
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=settings.vocab_size, min_frequency=settings.min_frequency,
                                  special_tokens=SPECIAL, show_progress=False)
    texts = list(iter_texts(tables, settings.max_texts))
    texts.sort()  # fixed input order → identical vocabularies across runs
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    target = out / "tokenizer"
    fast.save_pretrained(str(target))
    log.info("trained a %d-entry BPE vocabulary on %d texts", tok.get_vocab_size(), len(texts))
    return StageResult(stats={"vocab_size": tok.get_vocab_size(), "texts": len(texts)})
