"""An objective is added in one place (issue 22 items 3–4, issue 29 item 1): one module in ``models/objectives/`` holds
its settings (registered with ``@objective``), its component and its loss; the registry finds the module, and the
settings reader, the config's error messages, the DAG's wiring and ``build_components`` all read it — so a toy
objective written as one new file (and nothing else) is read from a pipeline config, wired to its corpus and trained
through ``polysent run``. And one reader (``models.settings_io``) reads the
model settings of the pipeline config and of ``python -m models.training.train`` job files, with the same messages,
without pydantic."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO, SAMPLE

from flows.config import ConfigError, load_config
from models import objective_registry as registry
from models.settings import Objective

TOY_MODULE = '''"""A toy objective, all of it in one file as docs/training.md ("Adding an objective") says: pulls each
translation pair together, mean (1 − cos(a, b)) + margin · mean cos(a, next row's b)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.lazy_torch import F, torch
from models.objective_registry import Objective, objective
from models.settings import AtLeastOne, NonNegative, Positive
from models.training import corpus_tables as ct
from models.training.components import Component, StepBatch
from models.training.sampling import BatchPlan


@objective(tables=("bitext_pairs",))
@dataclass(frozen=True)
class ToyObjective(Objective):
    kind: Literal["toy"] = "toy"
    """``toy``: pulls each pair's two sides together"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 4
    """pairs per batch"""
    margin: Positive = 0.5
    """the loss's margin"""


class ToyComponent(Component, builds=ToyObjective):
    def __init__(self, name: str, o: ToyObjective, tables: Mapping[str, Path], settings, stream: int,
                 device, student) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        self.pairs = ct.load_bitext_pairs(tables["bitext_pairs"])
        self.plan = BatchPlan(len(self.pairs), o.batch_size, settings.seed + stream, what=f"objective {name}")

    def batch(self, step: int) -> StepBatch:
        idx, margin = self.plan.batch(step), self.objective.margin
        a, b = [self.pairs.a[i] for i in idx], [self.pairs.b[i] for i in idx]
        return StepBatch([a, b], lambda embs: toy_loss(*embs, margin), 2 * len(a))


def toy_loss(a: torch.Tensor, b: torch.Tensor, margin: float) -> torch.Tensor:
    za, zb = F.normalize(a.float(), dim=-1), F.normalize(b.float(), dim=-1)
    return (1 - (za * zb).sum(-1)).mean() + margin * (za * zb.roll(1, 0)).sum(-1).mean()
'''


@pytest.fixture
def toy(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """The toy objective as one new file in a folder of the ``models.objectives`` package path — the way a built-in is
    added, without writing into the repository: nothing else is edited or registered by hand."""
    import models.objectives

    folder = tmp_path_factory.mktemp("objectives")
    (folder / "toy.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.setattr(models.objectives, "__path__", [*models.objectives.__path__, str(folder)])
    try:
        yield registry.kinds()["toy"]
    finally:
        registry.unregister_objective("toy")
        sys.modules.pop("models.objectives.toy", None)


def _config(tmp_path: Path, objectives: list[dict], **run: object) -> Path:
    cfg = {"name": "toy", "data_root": str(tmp_path / "data"),
           "sources": {"bitext": [{"src": "en", "tgt": "de", "src_file": str(SAMPLE / "bitext" / "en-de.en"),
                                   "tgt_file": str(SAMPLE / "bitext" / "en-de.de")}]},
           "corpora": {"bitext_pairs": {"pivots": ["en"]}},
           "training": {"toy_run": {"objectives": objectives, "steps": 3, "warmup_steps": 1, "device": "cpu",
                                    "encoder": {"hidden_size": 32, "num_layers": 1, "num_heads": 2,
                                                "intermediate_size": 64, "max_length": 24}, **run}}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _tiny_tables(root: Path) -> tuple[dict[str, Path], Path]:
    """A hive-partitioned ``bitext_pairs`` from the sample (en–de) and a BPE tokenizer trained on it."""
    from models.settings import TokenizerSettings
    from models.training.tokenizer import train_tokenizer

    src = (SAMPLE / "bitext" / "en-de.en").read_text(encoding="utf-8").splitlines()
    tgt = (SAMPLE / "bitext" / "en-de.de").read_text(encoding="utf-8").splitlines()
    keep = [i for i in range(min(len(src), len(tgt))) if src[i].strip() and tgt[i].strip()]
    part = root / "bitext_pairs" / "lang=de"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"pair_id": [f"de{i:05d}" for i in keep], "pivot_lang": ["en"] * len(keep),
                             "pivot_text": [src[i] for i in keep], "text": [tgt[i] for i in keep]}),
                   part / "part-0.parquet")
    pq.write_table(pa.table({"text": [src[i] for i in keep] + [tgt[i] for i in keep]}), root / "texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=300, min_frequency=1), {"t": root / "texts.parquet"}, root)
    return {"bitext_pairs": root / "bitext_pairs"}, root / "tokenizer"


def test_a_toy_objective_in_one_new_file_trains_through_polysent_run(tmp_path: Path, toy: type) -> None:
    from flows.cli import main
    from flows.dag import build_dag

    # the pipeline config reads the toy kind into its dataclass, with its own key checked and its table derived
    path = _config(tmp_path, [{"kind": "toy", "margin": 0.2}])
    ts = load_config(path).training["toy_run"]
    assert ts.objectives == (toy(margin=0.2),) and ts.tables() == ("bitext_pairs",)
    # the DAG wires the run to the corpus node of the table the registry names
    assert build_dag(load_config(path))["train.toy_run"].deps["bitext_pairs"] == "bitext_pairs"

    assert main(["run", str(path), "--executor", "local"]) == 0
    con = duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True)
    try:
        steps = con.execute("select step, loss from train_steps where train_run = 'toy_run' order by step").fetchall()
        objectives = con.execute("select distinct objective from train_objective_losses "
                                 "where train_run = 'toy_run'").fetchall()
    finally:
        con.close()
    assert [s for s, _ in steps] == [1, 2, 3] and all(math.isfinite(x) and x > 0 for _, x in steps)
    assert objectives == [("toy",)]


def test_a_toy_objective_builds_through_its_settings(tmp_path: Path, toy: type) -> None:
    import torch

    from models.encoder import SentenceEncoder
    from models.training.train import build_components, train

    ts = load_config(_config(tmp_path, [{"kind": "toy", "margin": 0.2}])).training["toy_run"]
    tables, tokenizer = _tiny_tables(tmp_path / "corpora")
    student = SentenceEncoder.from_settings(ts.encoder, tokenizer)
    (component,) = build_components(ts, tables, student, torch.device("cpu"))
    assert type(component).__name__ == "ToyComponent" and component.name == "toy" and component.weight == 1.0
    train(ts, tables, tmp_path / "run", run_name="toy_run", tokenizer_dir=tokenizer, progress=False)
    per_objective = pq.read_table(tmp_path / "run" / "train_objective_losses.parquet").to_pydict()
    assert set(per_objective["objective"]) == {"toy"}
    assert (tmp_path / "run" / "model" / "config.json").exists()


def test_config_errors_read_the_registry(tmp_path: Path, toy: type) -> None:
    path = _config(tmp_path, [{"kind": "triplet"}])
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"{path}:{_line(path, 'kind: triplet')}: training.toy_run.objectives.0.kind: unknown "
                              "objective kind (value 'triplet'); expected one of 'contrastive', 'ease', 'mpcl', "
                              "'simcse', 'soft_label', 'start_distill', 'toy', 'vmsst'")
    path = _config(tmp_path, [{"kind": "toy", "margin": 0, "colour": "red"}])
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).splitlines() == [
        f"{path}:{_line(path, 'margin:')}: training.toy_run.objectives.0.margin: out of range (value 0); expected a "
        "number > 0",
        f"{path}:{_line(path, 'colour:')}: training.toy_run.objectives.0.colour: unknown key (value 'red'); expected "
        "one of: kind, weight, batch_size, margin"]


def test_unregistered_kinds_are_refused_and_registration_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown objective kind \(value 'toy'\); expected one of 'contrastive'"):
        load_config(_config(tmp_path, [{"kind": "toy"}]))
    with pytest.raises(LookupError, match="objective 'toy' is not registered"):
        registry.objective_tables("toy")

    @dataclass(frozen=True)
    class NoWeight(Objective):
        kind: Literal["noweight"] = "noweight"
        batch_size: int = 1

    with pytest.raises(TypeError, match=r"lacks the field\(s\) \['weight'\]"):
        registry.register_objective(NoWeight, tables=())

    @dataclass(frozen=True)
    class NoBuild(Objective):
        kind: Literal["nobuild"] = "nobuild"
        weight: float = 1.0
        batch_size: int = 1

    from models.training.components import Component

    registry.register_objective(NoBuild, tables=())  # registered; built only once a component names it
    try:
        with pytest.raises(NotImplementedError, match=r"no component builds NoBuild; declare class <Kind>Component"
                                                      r"\(Component, builds=NoBuild\)"):
            NoBuild().build("nobuild", {}, None, 0, "cpu", None)

        class NoBuildComponent(Component, builds=NoBuild):
            def __init__(self, *args: object) -> None:
                self.args = args

        built = NoBuild().build("nobuild", {"t": Path("t")}, "settings", 3, "cpu", "student")
        assert isinstance(built, NoBuildComponent) and built.args == (
            "nobuild", NoBuild(), {"t": Path("t")}, "settings", 3, "cpu", "student")
        with pytest.raises(ValueError, match=r"NoBuild is built by .*NoBuildComponent already"):
            type("Second", (Component,), {}, builds=NoBuild)
        with pytest.raises(TypeError, match="is not an objective's settings class"):
            type("Stray", (Component,), {}, builds=dict)
    finally:
        registry.unregister_objective("nobuild")

    @dataclass(frozen=True)
    class Again(Objective):
        kind: Literal["mpcl"] = "mpcl"
        weight: float = 1.0
        batch_size: int = 1

        def build(self, *args: object) -> None:
            raise AssertionError("never built")

    with pytest.raises(ValueError, match="'mpcl' is already registered"):
        registry.register_objective(Again, tables=())
    assert registry.kinds()["mpcl"].__name__ == "MpclObjective"


def test_every_builtin_kind_names_a_component_and_its_tables() -> None:
    from models.objectives.contrastive import ContrastiveObjective
    from models.objectives.ease import EaseObjective
    from models.objectives.mpcl import MpclObjective
    from models.objectives.simcse import SimcseObjective
    from models.training.components import Component

    kinds = registry.kinds()
    assert list(kinds) == ["contrastive", "ease", "mpcl", "simcse", "soft_label", "start_distill", "vmsst"]
    for kind, settings in kinds.items():  # each defined, with its component, in models/objectives/<kind>.py
        module = sys.modules[settings.__module__]
        assert settings.__module__ == f"models.objectives.{kind}"
        built = registry.component_of(settings)  # declared beside the settings: class …(Component, builds=…)
        assert isinstance(built, type) and issubclass(built, Component) and built.__module__ == settings.__module__
        assert settings.build is Objective.build  # no objective forwards to its component by hand
        citation = registry.objective_citation(kind)  # the paper lives in the objective's module, nowhere else
        assert citation is module.CITATION and citation.url.startswith("https://arxiv.org/abs/")
    assert registry.objective_tables(ContrastiveObjective(data="xnli_single_pairs")) == ("xnli_groups",
                                                                                       "xnli_single_pairs")
    assert registry.objective_tables(EaseObjective()) == ("hard_negatives", "entity_vectors")
    assert registry.objective_tables(SimcseObjective(strategy="english_nli")) == ("nli_triples",)
    assert registry.spec_of(SimcseObjective(strategy="english_nli")).required_rows(
        SimcseObjective(strategy="english_nli")) == [("nli_triples", "strategy", ("english",))]
    assert registry.objective_languages(SimcseObjective()) == ("en",)
    assert registry.objective_languages(SimcseObjective(strategy="parallel")) == ()
    assert registry.objective_languages(MpclObjective(languages=("de", "fr"))) == ("de", "fr")
    assert registry.objective_languages(EaseObjective()) == ()


def test_a_job_file_and_the_pipeline_config_give_the_same_message(tmp_path: Path) -> None:
    """One reader: the same mistake reads the same under ``training.<run>`` and under a job file's ``settings``."""
    from models.training.train import load_job

    mistake = {"objectives": [{"kind": "mpcl", "temperature": "hot"}], "encoder": {"pooling": "max"}}
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"settings": mistake, "tables": {}, "out": "o"}, sort_keys=False), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_job(job)
    job_lines = str(err.value).splitlines()
    cfg = _config(tmp_path, mistake["objectives"], encoder=mistake["encoder"])
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    cfg_lines = str(err.value).splitlines()
    assert job_lines == [
        f"{job}:{_line(job, 'temperature:')}: settings.objectives.0.temperature: not a valid number (value 'hot'); "
        "expected a number > 0",
        f"{job}:{_line(job, 'pooling:')}: settings.encoder.pooling: not one of the choices (value 'max'); expected "
        "'mean' or 'cls'"]
    assert [line.split(": ", 2)[2] for line in cfg_lines] == [line.split(": ", 2)[2] for line in job_lines]
    assert [line.split(": ", 2)[1] for line in cfg_lines] == ["training.toy_run.objectives.0.temperature",
                                                              "training.toy_run.encoder.pooling"]


def test_the_settings_reader_needs_neither_pydantic_nor_torch(tmp_path: Path) -> None:
    """A bare GPU machine has no pydantic; and the config loader lists objective kinds without importing torch."""
    (tmp_path / "s.yaml").write_text("objectives:\n  - kind: simcse\n    batch_size: 0\n", encoding="utf-8")
    code = ("import sys; sys.modules['pydantic'] = None\n"
            "from models.settings import TrainSettings\n"
            "from models.settings_io import SettingsError, read_yaml\n"
            "try:\n    read_yaml(TrainSettings, sys.argv[1])\nexcept SettingsError as e:\n    print(e)\n"
            "from models.lazy_torch import torch_loaded\n"
            "assert not torch_loaded(), 'the settings reader loaded torch'\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.yaml")], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (f"{tmp_path / 's.yaml'}:3: objectives.0.batch_size: out of range (value 0); "
                                   "expected an integer ≥ 1")


def test_torch_distributed_imports_after_the_objectives_took_torch_lazily() -> None:
    """The training path imports ``torch.distributed`` after the config loader took torch lazily: with a lazy
    placeholder in ``sys.modules`` that import aborted (CPU wheel) or raised AttributeError (CUDA build),
    failing every GPU row."""
    code = ("from models.lazy_torch import torch, torch_loaded\n"
            "import models.objectives.mpcl, models.objectives.vmsst\n"
            "assert not torch_loaded()\n"
            "import torch.distributed as dist\n"
            "import models.training.train\n"
            "print(torch.cat([torch.ones(1), torch.zeros(1)]).tolist(), torch_loaded())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[1.0, 0.0] True"


@pytest.mark.slow  # rounds of fresh processes (~28 s): make test-slow
def test_nodes_starting_together_find_torch_imported_before_their_threads() -> None:
    """Two nodes starting together (a training node importing ``torch.distributed``, an evaluation node computing
    through the objectives' lazily taken torch): torch is imported before their threads start
    (``flows.pipeline.import_model_libraries_before_node_threads``), so neither sees it half-initialised. Without
    that, two threads importing torch at once abort the process (``models.lazy_torch.import_torch_now``), and with
    the former LazyLoader placeholder one thread saw "module 'torch' has no attribute 'SymInt'". Each round is a
    fresh process."""
    code = ("import sys, threading\n"
            "from flows.config import load_config\n"
            "from flows.pipeline import import_model_libraries_before_node_threads\n"
            "from models.lazy_torch import torch, torch_loaded\n"
            "import models.objectives.mpcl\n"
            "assert not torch_loaded()\n"
            "import_model_libraries_before_node_threads(load_config(sys.argv[1]))\n"
            "assert 'torch.distributed' in sys.modules\n"
            "gate, errors = threading.Barrier(2), []\n"
            "def train_node():\n"
            "    gate.wait()\n"
            "    try:\n"
            "        import torch.distributed  # noqa: F401  (what models.training.distributed imports)\n"
            "        import models.training.train  # noqa: F401\n"
            "    except BaseException as exc:\n"
            "        errors.append(repr(exc))\n"
            "def eval_node():\n"
            "    gate.wait()\n"
            "    try:\n"
            "        import torch as plain\n"
            "        x = torch.nn.functional.normalize(plain.ones(2, 3), dim=-1)\n"
            "        assert torch.SymInt is not None and x.shape == (2, 3)\n"
            "    except BaseException as exc:\n"
            "        errors.append(repr(exc))\n"
            "threads = [threading.Thread(target=f) for f in (train_node, eval_node)]\n"
            "[t.start() for t in threads]\n"
            "[t.join() for t in threads]\n"
            "print(errors)\n")
    for _ in range(4):
        proc = subprocess.run([sys.executable, "-c", code, str(REPO / "configs" / "default.yaml")],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == "[]"
