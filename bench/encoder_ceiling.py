"""The floor under any float32 encoder of the evaluation benchmark: its linear-layer FLOPs at this CPU's GEMM peak.

``bench/evaluation_vs_mteb.py`` compares polysent with mteb end to end; both spend almost all their time in the same
transformer forward passes. This benchmark says how fast *any* implementation could possibly be on this machine while
keeping mteb's float32 numbers:

* the FLOPs every implementation must spend: each distinct text's tokens (truncated at the model's ``max_seq_length``)
  through every ``nn.Linear`` of the transformer layers (2 · in · out per token; the attention score and value
  products, ``4 · L² · d`` per text and layer, come on top and are reported separately);
* this CPU's float32 GEMM rate for exactly those layer shapes, with the same thread count: the best of
  ``torch.mm`` (no bias, the raw BLAS/oneDNN kernel) and ``F.linear`` (with the bias, as the model runs it) over
  1,024 / 4,096 / 16,384-token blocks — the most generous figure;
* the floor = linear FLOPs / that rate. Everything else an encoder does (attention, GELU, LayerNorm, tokenising,
  scoring, loading) only adds to it, so ``anchor seconds / (floor + the other seconds polysent measured)`` is the
  largest speedup over the anchor that float32 arithmetic allows on this machine.

It also measures how close polysent's ``SentenceEncoder.encode`` comes to the floor on a sample of the real texts, and
the bfloat16 GEMM rate for reference (the one way under the floor; it moves the numbers, so mteb parity is lost).
``torch.utils.flop_counter.FlopCounterMode`` checks the FLOP formulas in ``tests/test_encoder_ceiling.py``.

    python -m bench.encoder_ceiling [--data ../shared/data] [--sample 3000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.evaluation_vs_mteb import REPO, SHARED

BLOCKS = (1024, 4096, 16384)


def linear_shapes(backbone: Any) -> list[tuple[int, int]]:
    """(in, out) of every ``nn.Linear`` a token passes through in the transformer layers (embeddings and an unused
    pooler excluded), one entry per layer instance."""
    from torch import nn

    layers = backbone.encoder if hasattr(backbone, "encoder") else backbone
    return [(m.in_features, m.out_features) for m in layers.modules() if isinstance(m, nn.Linear)]


def linear_flops_per_token(backbone: Any) -> int:
    """2 · in · out summed over ``linear_shapes``: the multiply-adds of one token's forward pass through the linear
    layers (the bias additions are not counted)."""
    return sum(2 * i * o for i, o in linear_shapes(backbone))


def attention_flops(lengths: Iterable[int], hidden: int, layers: int) -> int:
    """Q·Kᵀ and softmax·V of scaled dot-product attention: ``2 · 2 · L² · d`` per text of ``L`` tokens and layer."""
    return sum(4 * int(n) * int(n) * hidden * layers for n in lengths)


def token_lengths(texts: Sequence[str], tokenizer: Any, max_length: int) -> np.ndarray:
    """Token counts (special tokens included, truncated at ``max_length``) as the encoder sees them."""
    ids = tokenizer(list(texts), truncation=True, max_length=max_length, padding=False,
                    return_token_type_ids=False, return_attention_mask=False)["input_ids"]
    return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))


def padded_tokens(lengths: np.ndarray, batch_size: int, batch_tokens: int) -> int:
    """Tokens ``SentenceEncoder.encode`` runs, padding included (its ``length_batches``)."""
    from models.encoder import length_batches

    return sum(len(idx) * int(lengths[idx[-1]]) for idx in length_batches(lengths, batch_size, batch_tokens))


def gemm_rate(shapes: Sequence[tuple[int, int]], dtype: Any = None, *, repeat: int = 5,
              blocks: Sequence[int] = BLOCKS) -> dict[str, float]:
    """FLOP/s of one pass through ``shapes`` (random weights, the current torch thread count): for ``torch.mm`` and
    ``F.linear`` with a bias, at each token block size; each the best of ``repeat`` timed passes after a warm-up."""
    import torch

    dtype = dtype or torch.float32
    gen = torch.Generator().manual_seed(0)
    weights = {s: (torch.randn(s[1], s[0], generator=gen).to(dtype), torch.randn(s[1], generator=gen).to(dtype))
               for s in set(shapes)}
    flops_per_token = sum(2 * i * o for i, o in shapes)
    out: dict[str, float] = {}
    with torch.inference_mode():
        for m in blocks:
            xs = {i: torch.randn(m, i, generator=gen).to(dtype) for i in {s[0] for s in shapes}}
            for kind in ("mm", "linear"):
                def one_pass(kind: str = kind, xs: dict = xs) -> None:
                    for s in shapes:
                        w, b = weights[s]
                        if kind == "mm":
                            torch.mm(xs[s[0]], w.t())
                        else:
                            torch.nn.functional.linear(xs[s[0]], w, b)

                one_pass()
                best = float("inf")
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    one_pass()
                    best = min(best, time.perf_counter() - t0)
                out[f"{kind}@{m}"] = flops_per_token * m / best
    return out


def encode_rate(encoder: Any, texts: Sequence[str], *, batch_size: int = 256, batch_tokens: int = 4096,
                repeat: int = 2) -> float:
    """Tokens per second of ``SentenceEncoder.encode`` (float32, the evaluation suite's batching) on ``texts``: the
    best of ``repeat`` runs after a warm-up on the first 64 texts."""
    encoder.encode(list(texts[:64]), batch_size, normalize=False, batch_tokens=batch_tokens)
    tokens = int(token_lengths(texts, encoder.tokenizer, encoder.max_length).sum())
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        encoder.encode(list(texts), batch_size, normalize=False, batch_tokens=batch_tokens)
        best = min(best, time.perf_counter() - t0)
    return tokens / best


def benchmark_texts(data: Path) -> dict[str, list[str]]:
    """The texts ``bench.evaluation_vs_mteb`` encodes, per task (Tatoeba-36, STS17, MewsC-16), as mteb reads them."""
    from bench.evaluation_vs_mteb import read_mewsc, read_sts17, read_tatoeba

    return {"tatoeba": [t for xx, en in read_tatoeba(data / "tatoeba").values() for t in (*xx, *en)],
            "sts": [t for a, b, _ in read_sts17(data / "sts" / "sts17").values() for t in (*a, *b)],
            "clustering": [t for text, _ in read_mewsc(data / "mewsc16").values() for t in text]}


def ceiling(data: Path, model: Path, *, batch_size: int = 256, batch_tokens: int = 4096,
            sample: int = 0, bf16: bool = False) -> dict[str, Any]:
    """Token and FLOP counts of the benchmark's texts (as mteb encodes them: per task, duplicates included; as polysent
    does: each distinct text once, plus its batching's padding), the GEMM rate, the float32 floor and — with
    ``sample`` > 0 — polysent's measured encode rate on an evenly spaced sample of the distinct texts."""
    import torch

    from models.encoder import SentenceEncoder

    encoder = SentenceEncoder.load(model).eval()
    backbone, hidden = encoder.backbone, int(encoder.backbone.config.hidden_size)
    layers = int(encoder.backbone.config.num_hidden_layers)
    per_task = benchmark_texts(data)
    all_texts = [t for texts in per_task.values() for t in texts]
    distinct = list(dict.fromkeys(all_texts))
    lengths = token_lengths(distinct, encoder.tokenizer, encoder.max_length)
    length_of = dict(zip(distinct, lengths.tolist(), strict=True))
    mteb_tokens = sum(length_of[t] for t in all_texts)  # each text tokenised once; mteb encodes the repeats too
    per_token = linear_flops_per_token(backbone)
    linear = per_token * int(lengths.sum())
    attention = attention_flops(lengths, hidden, layers)
    shapes = linear_shapes(backbone)
    rates = gemm_rate(shapes)
    best_key = max(rates, key=rates.get)
    res: dict[str, Any] = {
        "threads": torch.get_num_threads(), "texts": len(all_texts), "distinct_texts": len(distinct),
        "mteb_tokens": mteb_tokens, "tokens": int(lengths.sum()),
        "padded_tokens": padded_tokens(lengths, batch_size, batch_tokens),
        "linear_flops_per_token": per_token, "linear_flops": linear, "attention_flops": attention,
        "gemm_rates": rates, "gemm_rate": rates[best_key], "gemm_rate_at": best_key,
        "floor_seconds": linear / rates[best_key],
        "floor_with_attention_seconds": (linear + attention) / rates[best_key],
    }
    if bf16:
        bf = gemm_rate(shapes, torch.bfloat16, blocks=(4096,))
        res["bf16_gemm_rate"] = max(bf.values())
    if sample:
        pick = np.linspace(0, len(distinct) - 1, num=min(sample, len(distinct))).astype(int)
        res["encode_rate_tokens_per_s"] = encode_rate(encoder, [distinct[i] for i in pick], batch_size=batch_size,
                                                      batch_tokens=batch_tokens)
        res["encode_fraction_of_gemm_rate"] = res["encode_rate_tokens_per_s"] * per_token / rates[best_key]
    return res


def report_lines(c: dict[str, Any], anchor_seconds: float | None = None,
                 other_seconds: float | None = None) -> list[str]:
    """Human-readable lines for ``ceiling``'s figures; with the anchor's wall time and polysent's seconds outside
    encoding (same run), the largest float32 speedup this machine allows."""
    g = 1e9
    lines = [
        f"float32 floor ({c['threads']} torch threads): {c['distinct_texts']:,} distinct texts of {c['texts']:,} "
        f"(mteb encodes every one: {c['mteb_tokens']:,} tokens), {c['tokens']:,} tokens "
        f"({c['padded_tokens']:,} with polysent's padding, +{c['padded_tokens'] / c['tokens'] - 1:.2%}) × "
        f"{c['linear_flops_per_token'] / 1e6:.2f} MFLOP/token = {c['linear_flops'] / 1e12:.1f} TFLOP in linear layers "
        f"(+ {c['attention_flops'] / 1e12:.2f} TFLOP attention)",
        "  GEMM rate for those layer shapes: " + ", ".join(f"{k} {v / g:.0f}" for k, v in c["gemm_rates"].items())
        + f" GFLOP/s → best {c['gemm_rate'] / g:.0f} GFLOP/s",
        f"  floor: {c['floor_seconds']:.1f} s of linear layers alone at that rate "
        f"({c['floor_with_attention_seconds']:.1f} s with attention)",
    ]
    if "encode_rate_tokens_per_s" in c:
        lines.append(f"  polysent SentenceEncoder.encode on a sample: {c['encode_rate_tokens_per_s']:,.0f} tokens/s = "
                     f"{c['encode_fraction_of_gemm_rate']:.0%} of the GEMM rate (attention, GELU, LayerNorm, bias "
                     "copies and tokenising take the rest)")
    if "bf16_gemm_rate" in c:
        lines.append(f"  bfloat16 GEMM rate {c['bf16_gemm_rate'] / g:.0f} GFLOP/s "
                     f"({c['bf16_gemm_rate'] / c['gemm_rate']:.2f}× float32; moves the numbers)")
    if anchor_seconds:
        other = other_seconds or 0.0
        best = anchor_seconds / (c["floor_seconds"] + other)
        lines.append(f"  largest float32 speedup possible here: anchor {anchor_seconds:.1f} s / (floor "
                     f"{c['floor_seconds']:.1f} s + polysent's {other:.1f} s outside encoding) = {best:.2f}×")
    return lines


def main(argv: list[str] | None = None) -> int:
    from bench.evaluation_vs_mteb import has_shared_data, model_dir
    from bench.results import append_results

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED, help="shared data root (tatoeba/, sts/sts17/, mewsc16/)")
    ap.add_argument("--sample", type=int, default=3000, help="distinct texts for polysent's measured encode rate")
    ap.add_argument("--anchor-seconds", type=float, help="the anchor's wall time, for the largest possible speedup")
    ap.add_argument("--other-seconds", type=float, help="polysent's seconds outside encoding (same run as the anchor)")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    a = ap.parse_args(argv)
    if not has_shared_data(a.data):
        return 2
    c = ceiling(a.data, model_dir(), sample=a.sample, bf16=True)
    for line in report_lines(c, a.anchor_seconds, a.other_seconds):
        print(line)
    row = {k: v for k, v in c.items() if k != "gemm_rates"}
    row["gemm_rates"] = ", ".join(f"{k}={v:.0f}" for k, v in c["gemm_rates"].items())
    append_results(a.data_root, "encoder_ceiling", [{"benchmark": "encoder_ceiling", **row}])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
