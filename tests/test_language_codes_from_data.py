"""Codes from data are data (issue 20, item 1): a language code that a data set's own file or folder names carry is
accepted and carried through the ``eval_sets`` stage, with its display name where one is known and the raw code
otherwise; a code a user types in a config is still checked against ICU's registry, the message naming the key.

Synthetic files only: every test writes its own tiny data set named exactly as the publisher names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
from pipelines.eval_sets.classification import read_sib200
from pipelines.eval_sets.hub import load_hub
from pipelines.eval_sets.parallel import read_flores
from pipelines.eval_sets.tatoeba import XNLI14, XTREME36
from pipelines.language_codes import (
    UnknownLanguageError,
    check_language,
    data_language,
    is_known_language,
    language_name,
)

# LASER Tatoeba v1 (facebookresearch/LASER data/tatoeba/v1: tatoeba.{xxx}-eng.{xxx,eng}); the same 112 codes as
# mteb's Tatoeba task (``{xxx}-eng`` subsets), checked below where mteb is installed.
_LASER = """
afr amh ang ara arq arz ast awa aze bel ben ber bos bre bul cat cbk ceb ces cha cmn cor csb cym dan deu dsb dtp ell epo
est eus fao fin fra fry gla gle glg gsw heb hin hrv hsb hun hye ido ile ina ind isl ita jav jpn kab kat kaz khm kor kur
kzj lat lfn lit lvs mal mar max mhr mkd mon nds nld nno nob nov oci orv pam pes pms pol por ron rus slk slv spa sqi srp
swe swg swh tam tat tel tgl tha tuk tur tzl uig ukr urd uzb vie war wuu xho yid yue zsm"""
LASER_TATOEBA_112 = tuple(_LASER.split())
# the six ICU does not know, with the names the report shows for them
LASER_EXTRAS = {"ber": "Berber languages", "cbk": "Chavacano", "max": "North Moluccan Malay", "orv": "Old Russian",
                "swg": "Swabian", "tzl": "Talossan"}


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_the_laser_list_has_112_codes_and_the_subsets_are_unchanged() -> None:
    assert len(LASER_TATOEBA_112) == len(set(LASER_TATOEBA_112)) == 112
    assert [c for c in LASER_TATOEBA_112 if not is_known_language(c) or c in LASER_EXTRAS] == sorted(LASER_EXTRAS)
    assert set(XNLI14) < set(XTREME36) < set(LASER_TATOEBA_112)
    assert XNLI14 == ("ara", "bul", "cmn", "deu", "ell", "fra", "hin", "rus", "spa", "swh", "tha", "tur", "urd", "vie")
    assert len(XTREME36) == 36
    mteb = Path(np.__file__).resolve().parents[1] / "mteb"
    mteb_task = mteb / "tasks/bitext_mining/multilingual/tatoeba_bitext_mining.py"
    if mteb_task.is_file():
        import re

        assert sorted(set(re.findall(r'"([a-z]{3})-eng"', mteb_task.read_text()))) == sorted(LASER_TATOEBA_112)


def test_all_112_laser_tatoeba_files_go_through_the_eval_sets_stage_and_the_all_subset(tmp_path: Path) -> None:
    folder = tmp_path / "tatoeba"
    n_pairs = {code: 2 + i % 3 for i, code in enumerate(LASER_TATOEBA_112)}
    for code, n in n_pairs.items():
        write(folder / f"tatoeba.{code}-eng.{code}", [f"{code} sentence {i}" for i in range(n)])
        write(folder / f"tatoeba.{code}-eng.eng", [f"English sentence {i} of {code}" for i in range(n)])
    sources = EvalSources(tatoeba=folder)
    assert len(sources.files()) == 224
    out = tmp_path / "out"
    out.mkdir()
    result = build_eval_sets(EvalSetsSettings(), sources, out)
    df = pl.read_parquet(out / result.tables["eval_tatoeba"])
    assert dict(df.group_by("lang").len().iter_rows()) == n_pairs
    assert df.filter(pl.col("lang") == "tzl").sort("idx").rows() == [
        ("tzl", i, f"tzl sentence {i}", f"English sentence {i} of tzl") for i in range(n_pairs["tzl"])]
    assert {c: language_name(c) for c in LASER_EXTRAS} == LASER_EXTRAS
    assert language_name("cmn") == "Chinese" and language_name("swh") == "Swahili"

    # a user may select them by name too: they are real ISO 639 codes
    picked = build_eval_sets(EvalSetsSettings(tatoeba_languages=["ber", "orv", "deu"]), sources, tmp_path)
    assert picked.stats["rows"]["eval_tatoeba"] == n_pairs["ber"] + n_pairs["orv"] + n_pairs["deu"]

    # the suite's subsets: xnli14 and xtreme36 as before, "all" over the 112
    pytest.importorskip("torch")
    from models.evaluation.results import Results
    from models.evaluation.tasks.tatoeba import Tatoeba, TatoebaSettings

    task = Tatoeba(TatoebaSettings(xtreme=False, mteb=False), {"eval_tatoeba": out / result.tables["eval_tatoeba"]})
    def key(text: str) -> tuple[str, str]:  # (code, i) of "{code} sentence {i}" / "English sentence {i} of {code}"
        w = text.split()
        return (w[-1], w[2]) if w[0] == "English" else (w[0], w[-1])

    keys = sorted({key(t) for t in task.texts()})
    assert len(keys) == sum(n_pairs.values())
    index = {k: i for i, k in enumerate(keys)}

    def vec(batch: list[str]) -> np.ndarray:  # a sentence and its translation share a one-hot vector
        hot = np.zeros((len(batch), len(keys)), dtype=np.float32)
        hot[np.arange(len(batch)), [index[key(t)] for t in batch]] = 1
        return hot

    results = Results(run="r", model="m")
    task.score(vec, results)
    subsets = {r[2]: r[3] for r in results.rows if r[4] == "accuracy_mean"}
    assert {r[5] for r in results.rows if r[4] == "accuracy_mean"} == {100.0}
    assert subsets["xnli14"] == "14 languages" and subsets["xtreme36"] == "36 languages"
    assert subsets["all"] == "112 languages"
    assert set(subsets) == {"xnli14", "xtreme36", "all", *LASER_TATOEBA_112}


FLORES_CODES = ("eng_Latn", "taq_Tfng", "taq_Latn", "ace_Arab", "min_Arab", "bjn_Arab", "abc_Zzzz", "deu_Qaaa")


def test_flores_and_sib200_codes_with_languages_and_scripts_icu_lacks(tmp_path: Path) -> None:
    flores = tmp_path / "flores200"
    for code in FLORES_CODES:
        write(flores / "devtest" / f"{code}.devtest", [f"{code} one", f"{code} two"])
    df = read_flores(flores)
    assert sorted(df["lang"].unique()) == sorted(FLORES_CODES) and df.height == 2 * len(FLORES_CODES)

    sib = tmp_path / "sib200"
    for code in FLORES_CODES:
        write(sib / code / "test.tsv", ["index_id\tcategory\ttext", f"1\tscience\t{code} text"])
    got = read_sib200(sib)
    assert got.select("lang", "text").sort("lang").rows() == [(c, f"{c} text") for c in sorted(FLORES_CODES)]

    # through the stage, from the config's own schema
    sources = EvalSources.model_validate({"parallel": [{"format": "flores", "path": flores}],
                                         "classification": [{"format": "sib200", "path": sib}]})
    result = build_eval_sets(EvalSetsSettings(), sources, tmp_path)
    assert result.stats["rows"] == {"eval_parallel": 16, "eval_classification": 8}

    assert [language_name(c) for c in FLORES_CODES] == [
        "English (Latin)", "Tamasheq (Tifinagh)", "Tamasheq (Latin)", "Acehnese (Arabic)", "Minangkabau (Arabic)",
        "Banjar (Arabic)", "abc_Zzzz", "German (Qaaa)"]


def test_hub_flores_columns_icu_lacks_are_not_dropped() -> None:
    import datasets

    cols = {c: [f"{c} x"] for c in ("eng_Latn", "taq_Tfng", "acm_Arab", "abc_Zzzz")}

    def loader(hub_id: str, config: str | None, split: str, revision: str) -> datasets.Dataset:
        return datasets.Dataset.from_dict({"id": [1], "has_image": [0], **cols})

    df = load_hub("FloresBitextMining", loader=loader)["eval_parallel"]
    assert sorted(df["lang"]) == sorted(cols)


@pytest.mark.parametrize("name", ["x y", "q", "1ab", "abcd", "de.u", "", "en--de"])
def test_a_name_that_is_no_language_tag_still_fails_naming_the_file(name: str) -> None:
    with pytest.raises(UnknownLanguageError, match=rf"^some/file: {name!r} is not a language code".replace(".", r"\.")):
        data_language(name, "some/file")


def test_codes_a_user_types_are_still_checked_naming_the_key(tmp_path: Path) -> None:
    assert check_language("ber", "k") == "ber" and check_language("taq_Tfng", "k") == "taq_Tfng"
    for bad, key, settings in (
            ("qqq", "corpora.eval_sets.tatoeba_languages", lambda: EvalSetsSettings(tatoeba_languages=["deu", "qqq"])),
            ("zz", "corpora.eval_sets.clustering_languages", lambda: EvalSetsSettings(clustering_languages=["zz"])),
            ("abc_Zzzz", "sources.eval.classification.languages", lambda: EvalSources.model_validate(
                {"classification": [{"format": "sib200", "path": "x", "languages": ["abc_Zzzz"]}]}))):
        with pytest.raises(ValidationError, match=rf"{key}: unknown language code {bad!r}"):
            settings()

    # and through the config loader: file:line: key.path: message
    from conftest import tiny_config_dict, write_config

    from flows.config import ConfigError, load_config

    cfg = tiny_config_dict(tmp_path / "data")
    cfg["corpora"].setdefault("eval_sets", {})["tatoeba_languages"] = ["deu", "qqq"]
    path = write_config(tmp_path / "c.yaml", cfg)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "tatoeba_languages" in ln)
    assert str(err.value).startswith(f"{path}:{line}: corpora.eval_sets.tatoeba_languages: unknown language code "
                                     "'qqq'; expected an ISO 639 code")


def test_a_pair_value_splits_into_languages_keeping_their_script_and_region() -> None:
    """``split_languages``: NTREX-128's ``zho-CN``, ``aze-Latn`` and ``eng-GB`` are one language each, a pair joins two;
    the report's ``subset_languages`` and the card's training languages read values through it (splitting on every
    ``-`` made ``cn``, ``latn`` and ``gb`` languages of a 128-language card)."""
    from pipelines.export.card_facts import Corpus, ObjectiveInfo
    from pipelines.export.model_card import training_languages
    from pipelines.language_codes import split_languages
    from pipelines.report.training import subset_languages

    assert split_languages("deu-eng") == ["deu", "eng"]
    assert split_languages("zho-CN") == ["zho-CN"] and split_languages("es-419") == ["es-419"]
    assert split_languages("en-aze-Latn") == ["en", "aze-Latn"]
    assert split_languages("srp-Cyrl-eng-GB") == ["srp-Cyrl", "eng-GB"]
    assert split_languages("deu_Latn-eng_Latn") == ["deu_Latn", "eng_Latn"]
    assert subset_languages("zho-CN") == {"zho"} and subset_languages("eng-zho-TW") == {"eng", "zho"}
    assert subset_languages("ckb-Arab-eng") == {"ckb", "eng"}
    assert subset_languages("14 languages") == frozenset()
    corpus = Corpus(stage="bitext_pairs", key="k", content_hash="h", leakage=[], inputs=[],
                    rows={"bitext_pairs": {"zho-CN": 3, "aze-Latn": 2, "eng-GB": 1, "de": 4}, "pairs": {"en-de": 2}})
    objective = ObjectiveInfo(kind="start_distill", settings={}, tables=["bitext_pairs", "pairs"])
    assert training_languages([objective], [corpus]) == ["aze-Latn", "de", "en", "eng-GB", "zho-CN"]
