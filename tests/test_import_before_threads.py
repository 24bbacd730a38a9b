"""``models.import_before_threads``: the names the flow resolves from transformers before its node threads start are
every name ``models/`` imports from it, and with them resolved a tokenizer node and model loads starting together in
threads all succeed (unresolved, the tokenizer thread failed 3 of 3 times: "cannot import name
'PreTrainedTokenizerFast' from 'transformers'")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from models.import_before_threads import TRANSFORMERS_NAMES


def test_the_names_resolved_first_are_every_name_models_imports_from_transformers() -> None:
    imported: set[str] = set()
    for path in (REPO / "models").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "transformers":
                imported |= {alias.name for alias in node.names}
    assert imported == set(TRANSFORMERS_NAMES)


@pytest.mark.slow  # three model libraries raced in fresh processes (~18 s): make test-slow
def test_a_tokenizer_node_and_two_model_loads_starting_together_in_threads(tmp_path: Path) -> None:
    make = ("import sys\n"
            "from transformers import BertConfig, BertModel, XLMRobertaConfig, XLMRobertaModel\n"
            "size = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, "
            "vocab_size=100)\n"
            "BertModel(BertConfig(**size)).save_pretrained(sys.argv[1] + '/bert')\n"
            "XLMRobertaModel(XLMRobertaConfig(**size)).save_pretrained(sys.argv[1] + '/xlmr')\n")
    proc = subprocess.run([sys.executable, "-c", make, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    race = ("import sys, threading\n"
            "from models.import_before_threads import import_model_libraries_now\n"
            "import_model_libraries_now()\n"
            "gate, errors = threading.Barrier(3), []\n"
            "def guarded(work):\n"
            "    gate.wait()\n"
            "    try:\n"
            "        work()\n"
            "    except BaseException as exc:\n"
            "        errors.append(repr(exc))\n"
            "def tokenizer_node():\n"
            "    import models.training.tokenizer  # noqa: F401  (from transformers import PreTrainedTokenizerFast)\n"
            "def load(folder):\n"
            "    from transformers import AutoModel, AutoTokenizer  # noqa: F401\n"
            "    AutoModel.from_pretrained(folder)\n"
            "threads = [threading.Thread(target=guarded, args=(tokenizer_node,))] + [\n"
            "    threading.Thread(target=guarded, args=(lambda f=f: load(f),)) for f in sys.argv[1:]]\n"
            "[t.start() for t in threads]\n"
            "[t.join() for t in threads]\n"
            "print(errors)\n")
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", race, str(tmp_path / "bert"), str(tmp_path / "xlmr")],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip().splitlines()[-1] == "[]"
