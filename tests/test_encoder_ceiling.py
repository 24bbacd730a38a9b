"""The float32 floor of bench/encoder_ceiling.py: its FLOP formulas against torch's own FLOP counter, and the batching
it counts padding with (``models.encoder.length_batches``, the one ``SentenceEncoder.encode`` runs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from bench.encoder_ceiling import (
    attention_flops,
    gemm_rate,
    linear_flops_per_token,
    linear_shapes,
    padded_tokens,
    report_lines,
)
from models.encoder import length_batches


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
