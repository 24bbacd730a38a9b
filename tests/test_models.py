from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from models.evaluation.retrieval import retrieval_accuracy
from models.objectives.contrastive import info_nce


def _np_info_nce(z1: np.ndarray, z2: np.ndarray, tau: float) -> float:
    a = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    b = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    s = a @ b.T / tau
    fwd = -np.mean([s[i, i] - math.log(np.exp(s[i]).sum()) for i in range(len(s))])
    bwd = -np.mean([s[i, i] - math.log(np.exp(s[:, i]).sum()) for i in range(len(s))])
    return float(fwd), float((fwd + bwd) / 2)


def test_info_nce_matches_a_direct_implementation() -> None:
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    fwd, sym = _np_info_nce(z1, z2, 0.05)
    t1, t2 = torch.tensor(z1), torch.tensor(z2)
    assert info_nce(t1, t2, 0.05, symmetric=False).item() == pytest.approx(fwd, rel=1e-9)
    assert info_nce(t1, t2, 0.05, symmetric=True).item() == pytest.approx(sym, rel=1e-9)


def test_info_nce_is_low_for_aligned_pairs_and_checks_shapes() -> None:
    z = torch.eye(4)
    assert info_nce(z, z, 0.05).item() < 1e-6
    assert info_nce(z, z.roll(1, 0), 0.05).item() > 10
    with pytest.raises(ValueError, match="equal shape"):
        info_nce(torch.zeros(3, 4), torch.zeros(2, 4))


def test_retrieval_accuracy_both_directions_ties_to_lowest_index() -> None:
    src = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    tgt = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])  # row 1 is wrong; tie in column order goes to 0
    s2t, t2s = retrieval_accuracy(src, tgt)
    assert s2t == pytest.approx(2 / 3)  # 0→0 ✓, 1→2 ✗ (argmax of [0,0,0.707] is 2), 2→2 ✓
    assert t2s == pytest.approx(2 / 3)  # 0→0 ✓, 1→0 ✗ (tie with 0 → lowest index), 2→2 ✓


def test_encoder_round_trips_through_sentence_transformers(tmp_path: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    import polars as pl
    from conftest import SAMPLE

    from models.encoder import SentenceEncoder
    from models.settings import EncoderSettings, TokenizerSettings
    from models.training.tokenizer import train_tokenizer

    (tmp_path / "tok").mkdir()

    texts = pl.read_csv(SAMPLE / "xnli" / "dev-de.tsv", separator="\t", has_header=False, quote_char=None,
                        new_columns=["text", "h", "l"]).select("text")
    texts.write_parquet(tmp_path / "t.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=500), {"t": tmp_path / "t.parquet"}, tmp_path / "tok")
    tok = SentenceEncoder.from_settings(EncoderSettings(hidden_size=32, num_layers=1, num_heads=2,
                                                        intermediate_size=64), tmp_path / "tok" / "tokenizer")
    assert "".join(tok.tokenizer.tokenize("Müller")) == "▁Müller"  # no lower-casing, accents kept
    for pooling in ("mean", "cls"):
        enc = SentenceEncoder.from_settings(
            EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, pooling=pooling),
            tmp_path / "tok" / "tokenizer")
        enc.save(tmp_path / pooling)
        sents = ["Meine Großmutter kommt morgen.", "Das ist ein Test."]
        ours = enc.encode(sents, normalize=False)
        theirs = st.SentenceTransformer(str(tmp_path / pooling), device="cpu").encode(sents)
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
        again = SentenceEncoder.load(tmp_path / pooling).encode(sents, normalize=False)
        np.testing.assert_allclose(ours, again, atol=1e-6)


def test_models_package_does_not_import_polars_duckdb_or_prefect() -> None:
    import pkgutil
    import subprocess
    import sys

    import models.evaluation

    evaluation = [f"models.evaluation.{m.name}" for m in pkgutil.iter_modules(models.evaluation.__path__)]
    # the GPU machine has torch, transformers, numpy and pyarrow only: sklearn/scipy/mteb are imported lazily (scipy
    # is not checked: transformers itself imports it whenever it is installed); the stage result type comes from the
    # dependency-free ``contract``, never from ``warehouse`` (filelock, the catalog)
    code = (f"import sys, models.training.train, models.training.tokenizer, {', '.join(evaluation)};"
            "bad=[m for m in ('polars','duckdb','prefect','pydantic','sklearn','mteb','matplotlib',"
            "'sentence_transformers','warehouse') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_tokenizer_training_is_byte_identical_across_processes(tmp_path: Path) -> None:
    """The node contract needs reproducible artifacts; WordPiece training is not (tokenizers#1794)."""
    import subprocess
    import sys

    from conftest import SAMPLE

    code = f"""
import polars as pl
from pathlib import Path
from models.training.tokenizer import train_tokenizer
from models.settings import TokenizerSettings
out = Path(r'{tmp_path}') / __import__('sys').argv[1]
out.mkdir()
df = pl.concat([pl.read_csv(p, separator='\\t', has_header=False, quote_char=None, new_columns=['text', 'h', 'l'])
                .select('text') for p in sorted(Path(r'{SAMPLE / "xnli"}').glob('*.tsv'))])
df.write_parquet(out / 't.parquet')
train_tokenizer(TokenizerSettings(vocab_size=1500), {{'t': out / 't.parquet'}}, out)
"""
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-c", code, name], check=True, capture_output=True)
    a = (tmp_path / "a" / "tokenizer" / "tokenizer.json").read_bytes()
    assert a == (tmp_path / "b" / "tokenizer" / "tokenizer.json").read_bytes()
