"""The paper-reproduction configs (configs/paper/): exactly the five seed setups, each loads, builds its DAG and plans
offline — no socket opened, no hub id resolved, no torch / transformers / huggingface_hub / datasets imported — and
reads only remote sources (hub ids; for EASE, dumps whose file names are those of the dumps.wikimedia.org URLs the
file lists), with the paper values of methods.md §13 pinned.

EASE's dumps cannot be URLs (``sources.wikipedia.dumps`` are local paths the DAG measures to cut shards): the real
file plans before they are downloaded (each missing dump an error on a placeholder shard, ``run`` refused), and the
checks that need every key run on a copy of the config in the same relative layout with the sample dump standing in
for every language.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, SAMPLE

from flows.cli import main
from flows.config import load_config
from flows.dag import build_dag
from flows.nodes import plan
from pipelines.language_codes import check_language
from warehouse.artifacts import ArtifactRef, ArtifactStore
from warehouse.hashing import FileHashCache
from warehouse.layout import DataRoot

PAPER = REPO / "configs" / "paper"
CONFIGS = ("mpcl-xnli-xlmr.yaml", "soft-label-me5.yaml", "ease-mbert.yaml", "vmsst-6layer-scratch.yaml",
           "msimcse-cross-nli.yaml")
HEAVY = ("torch", "transformers", "huggingface_hub", "datasets", "sentence_transformers")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
DUMP_URL = re.compile(r"https://dumps\.wikimedia\.org/(\w+)/[\w-]+/(\S+)")


def _raw(name: str) -> dict[str, Any]:
    return yaml.safe_load((PAPER / name).read_text(encoding="utf-8"))


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (str(k), *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return [obj] if isinstance(obj, str) else []


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple]:
    """No network (every connection attempt is recorded and refused), the hub in offline mode, empty hub caches."""
    attempts: list[tuple] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access during planning")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return attempts


def _plannable(name: str, root: Path) -> Path:
    """The config to plan: the file itself, or (EASE) a copy at ``root/<repo>/configs/paper/`` with every dump and the
    Wikidata file it names created, relative to the copy, from the sample world (the config stays byte-identical)."""
    if name != "ease-mbert.yaml":
        return PAPER / name
    copy = root / "repo" / "configs" / "paper" / name
    copy.parent.mkdir(parents=True)
    shutil.copy(PAPER / name, copy)
    wiki = _raw(name)["sources"]["wikipedia"]
    for rel in wiki["dumps"].values():
        target = (copy.parent / rel).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2", target)
    shutil.copy(SAMPLE / "wikidata" / "entities.jsonl", (copy.parent / wiki["wikidata"]).resolve())
    return copy


def test_the_paper_configs_are_exactly_the_five_seed_setups() -> None:
    """A new file in configs/paper/ must be added here, and so pass every check below."""
    assert sorted(p.name for p in PAPER.iterdir()) == sorted(CONFIGS)


@pytest.mark.parametrize("name", CONFIGS)
def test_loads_builds_its_dag_and_plans_offline(name: str, tmp_path: Path, offline: list[tuple],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _plannable(name, tmp_path)
    cfg = load_config(path, data_root=tmp_path / "data")
    nodes = build_dag(cfg)
    assert any(n.startswith("train.") for n in nodes) and "eval_sets" in nodes and "report" in nodes
    assert main(["plan", str(path), "--data-root", str(tmp_path / "data")]) == 0, capsys.readouterr().err
    assert f"plan for {cfg.name}" in capsys.readouterr().out
    root = DataRoot.at(tmp_path / "data")
    rows = plan(nodes, ArtifactStore(root), FileHashCache(root.file_hashes))
    assert {r.status for r in rows} <= {"miss", "blocked"}, [(r.node, r.status, r.detail) for r in rows]
    assert offline == []
    assert not (tmp_path / "hf-home").exists()


class _EverythingBuilt(ArtifactStore):
    """A store in which every key is a hit, so that planning computes the key of every node — the train and evaluate
    nodes too, whose inputs name hub models."""

    def lookup(self, stage: str, key: str) -> tuple[ArtifactRef | None, str | None]:
        return ArtifactRef(stage, key, self.root.artifact_dir(stage, key), f"content-{key}", {}, {}), None


@pytest.mark.parametrize("name", CONFIGS)
def test_every_node_key_including_hub_models_is_computed_without_resolving_them(name: str, tmp_path: Path,
                                                                               offline: list[tuple]) -> None:
    cfg = load_config(_plannable(name, tmp_path), data_root=tmp_path / "data")
    nodes = build_dag(cfg)
    root = DataRoot.at(tmp_path / "data")
    rows = plan(nodes, _EverythingBuilt(root), FileHashCache(root.file_hashes))
    assert {r.status for r in rows} == {"hit"} and all(r.key for r in rows)
    for run, ts in cfg.training.items():
        node = nodes[f"train.{run}"]
        # a hub model enters the key as its id (text), not as files fetched to hash
        assert not [k for k in node.files if k.startswith("model/")]
        if ts.encoder.pretrained:
            assert node.config["settings"]["encoder"]["pretrained"] == ts.encoder.pretrained
    assert offline == []
    assert not (tmp_path / "hf-home").exists()


def test_planning_all_five_imports_no_model_or_hub_library(tmp_path: Path) -> None:
    """In a fresh interpreter with sockets refused: ``polysent plan`` on every config imports none of torch,
    transformers, huggingface_hub, datasets — so nothing can resolve or download a hub id."""
    paths = [str(_plannable(n, tmp_path / n.removesuffix(".yaml"))) for n in CONFIGS]
    script = f"""
import json, socket, sys
tried = []
def refuse(*a, **k):
    tried.append(repr(a)); raise OSError("network")
socket.socket.connect = refuse
socket.create_connection = refuse
from flows.cli import main
codes = [main(["plan", p, "--data-root", {str(tmp_path / "data")!r}]) for p in {paths!r}]
from models.lazy_torch import torch_loaded  # torch's lazy placeholder is no import of torch
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r} and (m != "torch" or torch_loaded()))
print("RESULT " + json.dumps({{"codes": codes, "heavy": heavy, "tried": tried}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf"),
                               "HF_HUB_OFFLINE": "1", "PREFECT_HOME": str(tmp_path / ".prefect")})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert result == {"codes": [0] * len(CONFIGS), "heavy": [], "tried": []}


def test_ease_plans_before_its_dumps_are_downloaded_and_run_refuses_naming_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real file, dumps not downloaded: ``plan`` validates it (exit 0) and lists each missing dump as an error on
    its placeholder shard (everything after it blocked); ``run`` refuses before building anything (exit 2), naming
    every missing file."""
    wiki = load_config(PAPER / "ease-mbert.yaml").sources.wikipedia
    assert wiki is not None
    if all(p.is_file() for p in wiki.dumps.values()):
        pytest.skip("the EASE dumps are downloaded on this machine")
    data = tmp_path / "data"
    assert main(["plan", str(PAPER / "ease-mbert.yaml"), "--data-root", str(data)]) == 0
    cfg = load_config(PAPER / "ease-mbert.yaml", data_root=data)
    root = DataRoot.at(data)
    rows = {r.node: r for r in plan(build_dag(cfg), ArtifactStore(root), FileHashCache(root.file_hashes))}
    missing = [lang for lang, p in wiki.dumps.items() if not p.is_file()]
    for lang in missing:
        row = rows[f"wiki_shard.{lang}.0000"]
        assert row.status == "error" and "does not exist" in row.detail and wiki.dumps[lang].name in row.detail
    assert rows["entities"].status == rows["train.ease_mbert"].status == "blocked"
    capsys.readouterr()
    assert main(["run", str(PAPER / "ease-mbert.yaml"), "--data-root", str(data)]) == 2
    err = capsys.readouterr().err
    assert "input file(s) do not exist" in err and all(wiki.dumps[lang].name in err for lang in missing)
    assert not list(data.glob("artifacts/*/*/manifest.json")) and not list(data.glob("runs/*"))  # nothing built


@pytest.mark.parametrize("name", CONFIGS)
def test_sources_are_remote(name: str) -> None:
    raw = _raw(name)
    text = (PAPER / name).read_text(encoding="utf-8")
    assert not [s for s in _strings(raw) if "sample/" in s or s.startswith("pkg:")]
    src = raw["sources"]
    assert set(src) <= {"xnli", "bitext", "nli", "eval", "wikipedia"}
    if "xnli" in src:
        assert src["xnli"]["format"] == "hub" and HUB_ID.match(src["xnli"]["hub_id"])
    for entry in src.get("bitext", []) + src.get("nli", []):
        assert entry["format"] == "hub" and HUB_ID.match(entry["hub_id"]), entry
    for entry in src.get("bitext", []):
        for side in ("src", "tgt"):  # strings (YAML reads a bare `no` as False) and languages ICU knows
            check_language(entry[side], f"{name}: {entry}")
    assert set(src["eval"]) == {"hub"} and src["eval"]["hub"]
    if "wikipedia" in src:
        assert name == "ease-mbert.yaml"
        urls = {m.group(2): m.group(1) for m in DUMP_URL.finditer(text)}
        for lang, rel in src["wikipedia"]["dumps"].items():
            assert urls.get(Path(rel).name) == f"{lang}wiki", f"{lang}: {Path(rel).name} is no listed dump URL"
        assert urls.get(Path(src["wikipedia"]["wikidata"]).name) == "wikidatawiki"
    for run in raw["training"].values():
        models = [run["encoder"].get("pretrained")] + [o.get("teacher") for o in run["objectives"]]
        for model in filter(None, models):
            assert HUB_ID.match(model) and not (PAPER / model).exists(), model


@pytest.mark.parametrize("name", CONFIGS)
def test_header_cites_methods_and_names_target_hardware_and_gaps(name: str) -> None:
    header = []
    for line in (PAPER / name).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    header_text = "\n".join(header)
    for needle in ("methods.md §13", "Reproduces:", "Targets:", "Hardware:", "Run:", "Not expressible in the schema"):
        assert needle in header_text, f"{name}: header lacks {needle!r}"


def _objective(cfg: Any) -> Any:
    (ts,) = cfg.training.values()
    (objective,) = ts.objectives
    return ts, objective


def test_paper_values_mpcl() -> None:
    cfg = load_config(PAPER / "mpcl-xnli-xlmr.yaml")
    ts, o = _objective(cfg)
    assert (ts.encoder.pretrained, ts.encoder.pooling, ts.encoder.max_length) == ("xlm-roberta-large", "cls", 64)
    assert (o.kind, o.batch_size, o.temperature, o.positives, o.scaling, o.single_positive_steps) == (
        "mpcl", 128, 0.05, "inside", "none", 2000)  # experiments/mpcl_random_init's decision
    assert o.group_members == 6  # the anchor sees K = 5 positives
    assert ts.lr == 1e-5 and o.languages == ("en", "de", "fr", "es", "ru", "zh")
    assert cfg.corpora.xnli_groups.languages == ["en", "de", "fr", "es", "ru", "zh"]
    assert cfg.corpora.xnli_groups.splits == ["train"]


def test_paper_values_soft_label() -> None:
    cfg = load_config(PAPER / "soft-label-me5.yaml")
    ts, o = _objective(cfg)
    assert ts.encoder.pretrained == o.teacher == "intfloat/multilingual-e5-base"
    assert (o.temperature, o.tms, o.cross_weight, o.batch_size, o.labels, o.w_func) == (
        0.1, True, 0.1, 32, "priority", "softmax")
    assert o.priority == ("en", "ru", "ja", "fr", "ko") and o.teacher_prefix == "query: "
    assert ts.lr == 3e-5 and cfg.corpora.bitext_pairs.pivots == ["en"]
    assert {b.tgt for b in cfg.sources.bitext} == {"fr", "ja", "ko", "ru"}


def test_paper_values_ease() -> None:
    cfg = load_config(PAPER / "ease-mbert.yaml")
    ts, o = _objective(cfg)
    assert (ts.encoder.pretrained, ts.encoder.pooling, ts.encoder.max_length) == (
        "bert-base-multilingual-cased", "mean", 32)
    assert (o.batch_size, o.entity_temperature, o.entity_weight, o.hard_negative_weight, o.simcse_temperature) == (
        256, 10.0, 0.01, 0.0, 0.05)  # N = 256 in one contrast set (Table 9); Eq. 2 has no hard-negative weight
    assert (o.nonlinear, o.duplicate_negatives) == (False, "keep")  # the paper's linear W; Eq. 1–2 mask nothing
    assert (ts.grad_cache, ts.grad_accumulation, ts.lr, ts.warmup_steps, ts.seed) == (64, 1, 5e-5, 500, 42)
    langs = {"ar", "ca", "cs", "de", "eo", "es", "fa", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "sv", "tr", "en"}
    assert cfg.sources.wikipedia is not None and set(cfg.sources.wikipedia.dumps) == langs
    assert set(cfg.corpora.wikidata.wikis) == {f"{lang}wiki" for lang in langs}
    hn = cfg.corpora.hard_negatives
    assert (hn.max_pairs_per_language, hn.negatives_per_entity, hn.max_pairs_per_entity, hn.seed) == (
        50000, 10, 10000, 42)
    assert cfg.corpora.entities.min_link_count == 10
    assert (cfg.corpora.entity_vectors.mode, cfg.corpora.entity_vectors.language, cfg.corpora.entity_vectors.dim) == (
        "train", "en", 768)
    assert ts.steps == -(-18 * 50000 // (o.batch_size * ts.grad_accumulation))  # one epoch


def test_paper_values_vmsst() -> None:
    cfg = load_config(PAPER / "vmsst-6layer-scratch.yaml")
    ts, o = _objective(cfg)
    assert ts.encoder.pretrained is None  # random initialisation
    assert (ts.encoder.num_layers, ts.encoder.hidden_size, ts.encoder.projection, ts.encoder.max_length) == (
        6, 1024, 1024, 32)
    assert (o.kind, o.variant, o.elbo_weight, o.kl_anneal_steps, o.decoder_layers, o.dropout) == (
        "vmsst", "vmsst", 0.1, 1_000_000, 1, 0.0)
    assert o.batch_size * ts.grad_accumulation == 2048
    assert (ts.steps, ts.lr, ts.warmup_steps) == (100_000, 1e-3, 4000)
    assert cfg.corpora.bitext_pairs.pivots == ["en", "es"]
    assert all("en" in (b.src, b.tgt) or "es" in (b.src, b.tgt) for b in cfg.sources.bitext)


def test_paper_values_msimcse() -> None:
    cfg = load_config(PAPER / "msimcse-cross-nli.yaml")
    ts, o = _objective(cfg)
    assert (ts.encoder.pretrained, ts.encoder.pooling, ts.encoder.mlp_head, ts.encoder.max_length) == (
        "xlm-roberta-large", "cls", True, 32)
    assert (o.strategy, o.batch_size, o.temperature, o.hard_negative_weight) == ("cross_lingual_nli", 128, 0.05, 0.0)
    assert ts.lr == 1e-5
    nt = cfg.corpora.nli_triples
    assert nt is not None and (nt.xnli_split, nt.cross_lingual, len(nt.languages)) == ("train", "paper", 15)
