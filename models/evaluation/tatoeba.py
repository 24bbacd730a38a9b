"""Stage ``evaluate_tatoeba``: retrieval accuracy xx→en and en→xx per language on ``eval_tatoeba``."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from models import stage_versions
from models.encoder import SentenceEncoder, pick_device
from models.evaluation.retrieval import retrieval_accuracy
from models.settings import TatoebaSettings

log = logging.getLogger("polysent.models.evaluation")
STAGE_VERSION = stage_versions.EVALUATE_TATOEBA


def evaluate_tatoeba(settings: TatoebaSettings, model_dir: Path, tatoeba: Path, out: Path,
                     train_run: str = "", model_key: str = "") -> dict:
    model = SentenceEncoder.load(model_dir, pick_device(settings.device))
    table = pq.read_table(tatoeba)
    langs = sorted(set(table.column("lang").to_pylist()))
    if settings.languages:
        missing = sorted(set(settings.languages) - set(langs))
        if missing:
            raise ValueError(f"Tatoeba languages {missing} are not in {tatoeba} (has {langs})")
        langs = sorted(settings.languages)
    rows: dict[str, list] = {k: [] for k in ("train_run", "model_key", "task", "lang", "direction", "metric",
                                             "value", "n")}
    all_lang = table.column("lang").to_pylist()
    texts, engs = table.column("text").to_pylist(), table.column("eng").to_pylist()
    for lang in langs:
        idx = [i for i, x in enumerate(all_lang) if x == lang]
        src = model.encode([texts[i] for i in idx], settings.batch_size)
        eng = model.encode([engs[i] for i in idx], settings.batch_size)
        x2e, e2x = retrieval_accuracy(src, eng)
        for direction, value in ((f"{lang}->eng", x2e), (f"eng->{lang}", e2x)):
            for k, v in (("train_run", train_run), ("model_key", model_key), ("task", "tatoeba"), ("lang", lang),
                         ("direction", "xx->eng" if direction.endswith("eng") else "eng->xx"),
                         ("metric", "accuracy"), ("value", value), ("n", len(idx))):
                rows[k].append(v)
        log.info("tatoeba %s: %s→eng %.3f, eng→%s %.3f (n=%d)", lang, lang, x2e, lang, e2x, len(idx))
    pq.write_table(pa.table(rows), out / "eval_results.parquet")
    mean = sum(rows["value"]) / max(1, len(rows["value"]))
    return {"tables": {"eval_results": "eval_results.parquet"}, "stats": {"tatoeba_mean_accuracy": mean}}
