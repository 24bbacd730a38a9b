"""Stage ``evaluate``: one model on every configured evaluation task → ``eval_results``.

The sentences of all tasks are gathered first and encoded once through the embedding cache (a sentence shared by
Tatoeba, xSIM and the geometry probe, or already encoded by an earlier run of the same model, is not encoded again);
then each task scores its rows. The tasks are the registry's (``models.evaluation.task_registry``): one module per task
in ``models/evaluation/tasks/`` holds its settings and its scorer, whose docstrings give the protocols and variants
(``docs/evaluation.md`` has them in one table); this module names none. A task runs when its section of
``evaluation`` is set, in task order.

Tables come from the ``eval_sets`` stage (read with pyarrow); no table → the task is skipped and the log says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contract import StageResult
from models import stage_versions
from models.encoder import SentenceEncoder, pick_device
from models.evaluation.embedding_cache import EmbeddingCache, folder_hash, model_id
from models.evaluation.results import Results
from models.evaluation.settings import EvaluationSettings, task_sections
from models.evaluation.task_registry import Vectors, tasks

log = logging.getLogger("polysent.models.evaluation")
STAGE_VERSION = stage_versions.EVALUATE
DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
__all__ = ["DTYPES", "STAGE_VERSION", "Vectors", "evaluate_model"]


def evaluate_model(settings: EvaluationSettings, model: Path | str, tables: Mapping[str, Path], out: Path, *,
                   run: str, model_hash: str | None = None, model_key: str | None = None,
                   cache_root: Path | None = None, progress: bool = True) -> StageResult:
    """Evaluate ``model`` (a sentence-transformers folder or hub id) on the ``eval_sets`` tables → ``eval_results``.

    ``model_hash`` names the model in the embedding cache (a trained model's artifact content hash); without it the
    folder's content is hashed. ``model_key`` fills the results' ``model`` column (the training artifact's key, so
    results join the warehouse's ``lineage``); without it, the content hash.
    """
    device = pick_device(settings.device)
    encoder = SentenceEncoder.load(model, device)
    if settings.max_length is not None:
        encoder.max_length = settings.max_length
    content = model_hash or (folder_hash(Path(model)) if Path(model).exists() else f"hub:{model}")
    mid = model_id(content, dtype=settings.dtype, max_length=encoder.max_length, device=device.type)
    specs = tasks()
    scorers = [specs[name].scorer(section, tables) for name, section in task_sections(settings).items()]
    texts = list(dict.fromkeys(t for task in scorers for t in task.texts()))
    cache = EmbeddingCache(cache_root if settings.cache else None, mid)
    started = time.perf_counter()
    bar = _progress(len(texts), f"encode {run}", progress)
    dtype = DTYPES[settings.dtype]

    def encode(batch: list[str]) -> np.ndarray:
        return encoder.encode(batch, settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens,
                              dtype=dtype, progress=None)

    matrix = cache.embed(texts, encode, progress=bar.update) if texts else np.zeros((0, encoder.dim), np.float32)
    bar.close()
    encode_s = time.perf_counter() - started
    log.info("evaluate %s: %d distinct sentences, %d encoded, %d from the embedding cache (%.1f s)", run, len(texts),
             cache.encoded, cache.reused, encode_s)
    vec = Vectors({t: i for i, t in enumerate(texts)}, matrix)
    results = Results(run, model_key or content)
    seconds = {"encode": round(encode_s, 3)}
    for task in scorers:
        t0 = time.perf_counter()
        before = len(results.rows)
        task.score(vec, results)
        seconds[task.name] = round(time.perf_counter() - t0, 3)
        log.info("evaluate %s: %s → %d results (%.1f s)", run, task.name, len(results.rows) - before,
                 seconds[task.name])
    results.write(Path(out) / "eval_results.parquet")
    return StageResult(tables={"eval_results": "eval_results.parquet"},
                       stats={"sentences": len(texts), "encoded": cache.encoded, "cached": cache.reused,
                              "results": len(results.rows), "seconds": seconds})


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sent", mininterval=2.0)

