"""GPU benchmark of the trainer: model-FLOPs utilisation of an XLM-R-base-size encoder against the GPU's measured bf16
matmul rate, and GradCache at an effective contrastive batch of 4,096 (benchmarks.md "GPU"; methods.md §8.1).

Needs only torch, transformers, numpy and pyarrow (and this repository's ``models`` package): the GPU box has no
polars / duckdb / prefect. Results are appended to the warehouse's ``bench_results`` (benchmark ``train_gpu``) when
``bench.results`` imports; the figures are also written as JSON to ``--out`` (or, when the warehouse code does not
import and no ``--out`` is given, to ``<data-root>/bench/``).

1. **Roof** (the anchor): a bf16 ``torch.matmul`` of two 8192 × 8192 matrices on the GPU, 3 warm-up calls, then 10
   calls each timed with CUDA events; 2·8192³ FLOP ÷ the median time = the achievable dense bf16 rate.
2. **Model**: ``XLMRobertaModel(XLMRobertaConfig(vocab_size=250002, max_position_embeddings=514,
   type_vocab_size=1, layer_norm_eps=1e-5))`` — xlm-roberta-base's own config (hidden 768, 12 layers, 12 heads,
   intermediate 3072; ``XLMRobertaConfig()``'s bare defaults have BERT's vocabulary of 30,522, so the XLM-R values are
   set explicitly), random init, no pooler, wrapped in ``models.encoder.SentenceEncoder`` with mean pooling and saved
   in sentence-transformers' folder format; the trainer loads it as ``EncoderSettings(pretrained=…, max_length=64)``.
   The full 250,002-row embedding table is kept, so AdamW updates the realistic 277.5 M parameters (85.1 M
   outside the embeddings).
3. **Texts of exactly 64 tokens**: the tokenizer is a 🤗 ``tokenizers`` WordLevel model whose vocabulary is
   ``<s> <pad> </s> <unk>`` (ids 0–3, as XLM-R) + 249,998 synthetic words ``t4 … t250001`` (one id per word, so the
   tokenizer covers the model's whole vocabulary), whitespace pre-tokenisation and the template ``<s> $A </s>``.
   Every synthetic sentence is 62 random words, so it tokenises to exactly 62 + 2 = 64 ids: every batch is 64 wide
   with no padding and no truncation (checked before training). This is simpler and more exact than a trained BPE,
   whose merges would make lengths vary; the tokenizer's speed is that of a fast 🤗 tokenizer either way.
4. **Throughput**: ``models.training.train.train`` with ``ContrastiveObjective(data="bitext_pairs", batch_size=128)``
   on a synthetic ``bitext_pairs`` table (unique random pairs), ``precision="auto"`` (bf16 autocast on CUDA, fp32 on the
   CPU), AdamW, clip 1.0, ``--warmup`` + ``--steps`` steps. Sentences/s = Σ sentences ÷ Σ seconds over the steps after
   the warm-up, from the trainer's own ``train_steps`` table (each step's ``.item()`` of its loss synchronises the
   device before clipping and the optimiser step, whose kernels then finish before the next step's loss is read: the
   per-step seconds are GPU-true up to the last step's optimiser kernels).
   Model FLOPs per sentence of length L = 64 (forward + backward = 3 × forward, matmul FLOPs only)::

       F = 6 · N_nonemb · L + n_layers · 2 · 2 · L² · d · 3
         = 6 · 85,054,464 · 64 + 12 · 2 · 2 · 64² · 768 · 3 = 32.66 + 0.45 ≈ 33.11 GFLOP  (XLM-R base)

   with N_nonemb = parameters outside ``embeddings.*`` (word, position, token-type tables and their LayerNorm) and
   the second term the attention scores QKᵀ and the weighted sum AV. Achieved FLOP/s = F × sentences/s; MFU =
   achieved ÷ the measured matmul rate of step 1 (not the datasheet peak).
5. **GradCache**: ``ContrastiveObjective(batch_size=4096)`` with ``TrainSettings.grad_cache=256`` (one InfoNCE over
   4,096 pairs = 8,192 sentences per step, embedded in mini-batches of 256): sentences/s as above, its MFU in *model*
   FLOPs (GradCache's extra no-grad forward, +1/3 of the encoder FLOPs, is not counted as useful work) and
   ``torch.cuda.max_memory_allocated`` over the run (reset before it; likewise reported for the throughput run).

``--tiny`` (any machine, CPU included): hidden 64, 2 layers, 4 heads, intermediate 256 (vocabulary 250,002 kept),
batch 8, effective 64 with grad_cache 16, 3 steps (1 warm-up), a 1024³ matmul roof (fp32 on the CPU) — to test the
script, its figures mean nothing.

    python -m bench.train_gpu --out $OUT            # on the GPU machine
    python -m bench.train_gpu --tiny                # anywhere, a smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig

REPO = Path(__file__).resolve().parents[1]  # its own: run as a file, it must find the package before importing it
if str(REPO) not in sys.path:  # ``python bench/train_gpu.py`` on a bare box without the package installed
    sys.path.insert(0, str(REPO))

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
XLMR_VOCAB = 250_002
LENGTH = 64  # tokens per sentence, <s> and </s> included
WORDS = LENGTH - 2


# ---------------------------------------------------------------------------------------------- roof


def matmul_rate(n: int, device: torch.device, dtype: torch.dtype, repeat: int = 10, warmup: int = 3) -> dict[str, Any]:
    """Median FLOP/s of an n × n × n ``torch.matmul`` (CUDA events on a GPU, ``perf_counter`` on the CPU)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    for _ in range(warmup):
        torch.matmul(a, b)
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        else:
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
    seconds = statistics.median(times)
    return {"n": n, "dtype": str(dtype).removeprefix("torch."), "seconds": seconds, "flops": 2 * n ** 3 / seconds,
            "runs_seconds": times}


# ---------------------------------------------------------------------------------------------- model and data


def build_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """WordLevel tokenizer: XLM-R's four specials + synthetic words ``t4 … t{vocab_size-1}``, ``<s> $A </s>``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({f"t{i}": i for i in range(len(SPECIALS), vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>")


def model_config(tiny: bool) -> XLMRobertaConfig:
    """xlm-roberta-base's config (or the tiny one), vocabulary 250,002 in both."""
    from transformers import XLMRobertaConfig

    size = ({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256} if tiny
            else {})  # XLMRobertaConfig defaults: 768, 12, 12, 3072
    return XLMRobertaConfig(vocab_size=XLMR_VOCAB, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5,
                            pad_token_id=1, bos_token_id=0, eos_token_id=2, **size)


def build_model_folder(folder: Path, tiny: bool) -> dict[str, Any]:
    """A randomly initialised encoder saved as a sentence-transformers folder; its size figures."""
    from transformers import XLMRobertaModel

    from models.encoder import SentenceEncoder

    config = model_config(tiny)
    torch.manual_seed(0)
    backbone = XLMRobertaModel(config, add_pooling_layer=False)
    encoder = SentenceEncoder(backbone, build_tokenizer(config.vocab_size), "mean", LENGTH)
    encoder.save(folder)
    total = sum(p.numel() for p in backbone.parameters())
    embedding = sum(p.numel() for p in backbone.embeddings.parameters())
    return {"parameters": total, "non_embedding_parameters": total - embedding, "hidden": config.hidden_size,
            "layers": config.num_hidden_layers, "heads": config.num_attention_heads,
            "intermediate": config.intermediate_size, "vocab": config.vocab_size}


def synthetic_sentences(n: int, vocab_size: int, rng: np.random.Generator) -> list[str]:
    """``n`` sentences of ``WORDS`` random synthetic words (→ exactly ``LENGTH`` tokens each)."""
    ids = rng.integers(len(SPECIALS), vocab_size, size=(n, WORDS))
    return [" ".join(f"t{i}" for i in row) for row in ids.tolist()]


def write_pairs(folder: Path, n_pairs: int, vocab_size: int, seed: int = 0) -> None:
    """A ``bitext_pairs`` hive table (``lang=xx``) of ``n_pairs`` unique synthetic pairs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    texts = synthetic_sentences(2 * n_pairs, vocab_size, rng)
    part = folder / "lang=xx"
    part.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"pair_id": [f"p{i:07d}" for i in range(n_pairs)], "pivot_lang": ["en"] * n_pairs,
                             "pivot_text": texts[:n_pairs], "text": texts[n_pairs:]}), part / "part-0.parquet")


def check_lengths(model_dir: Path, texts: list[str]) -> None:
    """Every text tokenises to exactly ``LENGTH`` ids without padding, as the trainer's encoder sees them."""
    from models.encoder import SentenceEncoder

    batch = SentenceEncoder.load(model_dir).tokenize(texts)
    shape, ones = tuple(batch["input_ids"].shape), bool(batch["attention_mask"].all())
    if shape != (len(texts), LENGTH) or not ones:
        raise RuntimeError(f"synthetic texts tokenise to {shape} (no padding: {ones}), expected ({len(texts)}, "
                           f"{LENGTH}) without padding")


def flops_per_sentence(model: dict[str, Any], length: int = LENGTH) -> float:
    """Model FLOPs of one training sentence (forward + backward): 6·N_nonemb·L + layers·2·2·L²·d·3."""
    return 6 * model["non_embedding_parameters"] * length + model["layers"] * 2 * 2 * length ** 2 * model["hidden"] * 3


# ---------------------------------------------------------------------------------------------- training runs


def run_training(model_dir: Path, table: Path, work: Path, *, batch: int, grad_cache: int | None, steps: int,
                 warmup: int, device: torch.device) -> dict[str, Any]:
    """``models.training.train.train`` for ``warmup + steps`` steps; throughput over the last ``steps`` and peak
    memory."""
    import pyarrow.parquet as pq

    from models.objectives.contrastive import ContrastiveObjective
    from models.settings import EncoderSettings, TrainSettings
    from models.training.train import train

    settings = TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=batch),),
                             encoder=EncoderSettings(pretrained=str(model_dir), max_length=LENGTH, pooling="mean"),
                             steps=warmup + steps, grad_cache=grad_cache, precision="auto", device=device.type,
                             dev=None, checkpoint_every=0, seed=0)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    res = train(settings, {"bitext_pairs": table}, work, run_name=f"gpu-b{batch}", resume=False,
                keep_checkpoints_after=False, progress=True)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    rows = pq.read_table(work / res.tables["train_steps"], columns=["step", "sentences", "seconds"]).to_pydict()
    timed = [i for i, s in enumerate(rows["step"]) if s > warmup]
    sentences = sum(rows["sentences"][i] for i in timed)
    seconds = sum(rows["seconds"][i] for i in timed)
    return {"batch": batch, "grad_cache": grad_cache, "steps": steps, "warmup": warmup,
            "sentences_per_step": rows["sentences"][timed[0]], "seconds_per_step": seconds / len(timed),
            "sentences_per_second": sentences / seconds, "train_seconds": res.stats["train_seconds"],
            "final_loss": res.stats["final_loss"], "peak_memory_bytes": peak,
            "precision": "bf16 autocast" if device.type == "cuda" else "fp32"}


def _gib(x: int | None) -> str:
    return f"{x / 2 ** 30:.2f} GiB" if x is not None else "n/a (CPU)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="tiny model, CPU-friendly smoke test of the script")
    ap.add_argument("--batch", type=int, default=None, help="throughput batch (pairs per step; default 128, tiny 8)")
    ap.add_argument("--steps", type=int, default=None, help="timed throughput steps (default 50, tiny 2)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 10, tiny 1)")
    ap.add_argument("--gc-batch", type=int, default=None, help="GradCache effective batch (default 4096, tiny 64)")
    ap.add_argument("--grad-cache", type=int, default=None, help="GradCache mini-batch (default 256, tiny 16)")
    ap.add_argument("--gc-steps", type=int, default=None, help="timed GradCache steps (default 5, tiny 2)")
    ap.add_argument("--gc-warmup", type=int, default=None, help="untimed GradCache steps (default 2, tiny 1)")
    ap.add_argument("--matmul", type=int, default=None, help="roof matmul size n (n³; default 8192, tiny 1024)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the JSON figures (e.g. $OUT)")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    a = ap.parse_args(argv)
    t = a.tiny
    pick = {"batch": (128, 8), "steps": (50, 2), "warmup": (10, 1), "gc_batch": (4096, 64), "grad_cache": (256, 16),
            "gc_steps": (5, 2), "gc_warmup": (2, 1), "matmul": (8192, 1024)}
    cfg = {k: getattr(a, k) if getattr(a, k) is not None else v[int(t)] for k, v in pick.items()}
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif t:
        device = torch.device("cpu")
    else:
        print("no CUDA device: run this on the GPU machine, or use --tiny for a CPU smoke test", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} torch threads)"
    roof_dtype = torch.bfloat16 if cuda else torch.float32

    roof = matmul_rate(cfg["matmul"], device, roof_dtype)
    print(f"roof: {roof['dtype']} matmul {cfg['matmul']}³ on {name}: {roof['flops'] / 1e12:.1f} TFLOP/s "
          f"(median of {len(roof['runs_seconds'])}, {roof['seconds'] * 1000:.3f} ms each)", flush=True)

    with tempfile.TemporaryDirectory(prefix="train-gpu-") as tmp:
        root = Path(tmp)
        model_dir, table = root / "model", root / "bitext_pairs"
        model = build_model_folder(model_dir, t)
        n_pairs = 2 * max(cfg["batch"], cfg["gc_batch"])
        write_pairs(table, n_pairs, model["vocab"])
        check_lengths(model_dir, synthetic_sentences(4, model["vocab"], np.random.default_rng(1)))
        per_sentence = flops_per_sentence(model)
        print(f"model: XLM-R {'tiny' if t else 'base'} config (hidden {model['hidden']}, {model['layers']} layers, "
              f"{model['heads']} heads, FFN {model['intermediate']}, vocab {model['vocab']:,}), random init, mean "
              f"pooling; {model['parameters']:,} parameters ({model['non_embedding_parameters']:,} non-embedding); "
              f"{LENGTH} tokens/sentence, no padding; {per_sentence / 1e9:.2f} GFLOP/sentence (6·N·L + attention); "
              f"{n_pairs:,} synthetic pairs", flush=True)

        plain = run_training(model_dir, table, root / "plain", batch=cfg["batch"], grad_cache=None,
                             steps=cfg["steps"], warmup=cfg["warmup"], device=device)
        cached = run_training(model_dir, table, root / "gradcache", batch=cfg["gc_batch"],
                              grad_cache=cfg["grad_cache"], steps=cfg["gc_steps"], warmup=cfg["gc_warmup"],
                              device=device)

    rows: list[dict[str, Any]] = []
    for label, r in (("throughput", plain), ("gradcache", cached)):
        achieved = per_sentence * r["sentences_per_second"]
        r.update({"achieved_flops": achieved, "mfu": achieved / roof["flops"]})
        what = (f"batch {r['batch']}" if r["grad_cache"] is None
                else f"GradCache batch {r['batch']} / mini-batch {r['grad_cache']}")
        print(f"anchor {roof['dtype']} matmul {roof['flops'] / 1e12:.1f} TFLOP/s; polysent trainer {what} "
              f"({r['precision']}): {r['sentences_per_second']:,.0f} sentences/s ({r['sentences_per_step']:,} per "
              f"step, {r['seconds_per_step'] * 1000:.1f} ms/step over {r['steps']} steps after {r['warmup']} "
              f"warm-up) = {achieved / 1e12:.2f} TFLOP/s model FLOPs; MFU {r['mfu'] * 100:.1f} %; peak memory "
              f"{_gib(r['peak_memory_bytes'])}", flush=True)
        rows.append({"benchmark": f"train_gpu_{label}", "anchor": f"{roof['dtype']} matmul {cfg['matmul']}^3",
                     "anchor_flops": roof["flops"], "polysent_flops": achieved, "ratio": r["mfu"], "device": name,
                     "tiny": t, "parameters": model["parameters"],
                     "non_embedding_parameters": model["non_embedding_parameters"],
                     "flops_per_sentence": per_sentence, "tokens_per_sentence": LENGTH,
                     **{k: v for k, v in r.items() if k != "mfu"}})
    print(f"GradCache vs plain: {cached['sentences_per_second'] / plain['sentences_per_second']:.2f}× the sentences/s "
          f"at {cached['batch'] // plain['batch']}× the contrastive batch; peak memory "
          f"{_gib(cached['peak_memory_bytes'])} vs {_gib(plain['peak_memory_bytes'])}")

    figures = {"roof": roof, "model": model, "flops_per_sentence": per_sentence, "throughput": plain,
               "gradcache": cached, "device": name, "tiny": t, "torch": torch.__version__,
               "measured_at": dt.datetime.now(dt.UTC).isoformat()}
    out = a.out
    try:
        from bench.results import append_results

        append_results(a.data_root, "train_gpu", rows)
    except ImportError as exc:
        print(f"bench_results not written ({exc}); figures go to JSON")
        out = out or a.data_root / "bench"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"train_gpu-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}.json"
        path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"figures written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
