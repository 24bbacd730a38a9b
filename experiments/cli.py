"""``polysent experiment …`` (also ``python -m experiments …``, which needs no Prefect): the experiments' ledger.

    status [QUESTION …]                     every row: done / stale / pending, estimated CPU and GPU time
    run QUESTION [--seeds …] [--scale …]    run the pending CPU rows (killed, the row in flight resumes next time)
    tables [--check]                        regenerate every RESULTS.md (--check: exit 1 where one differs)
    mechanism [QUESTION …] [--write]        each row's mechanism check (--write: into rows that lack it)
    prepare KIT [--pack-start]              build a kit's tables from the shared data (needs polars)
    prepare me5_replication --all-languages add the all-language corpora to the prepared kit, in place
    prepare me5_replication --ease-en       add EASE's monolingual English corpus to the prepared kit, in place
    pack-start KIT [--force]                multilingual-e5-small packed for the kit (GPU machine), when it changed
    carry [--out DIR] [--include-cpu-rows]  what the drain's pending rows read, ≤ 64 MiB, for the device tool
    gpu-drain --out DIR [--deadline S]      on a GPU machine: every pending GPU row, rows → DIR/rows.jsonl
    merge PATH                              rows returned by a drain → the ledgers
    release QUESTION [--dry-run]            remove the kept trainings no pending row reads (after a final table)
    interpolation-sweep --model DIR --start M --out DIR   WiSE-FT: each α scored on a kit's decision sets
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from experiments.paths import EXPERIMENTS, REPO, RUNS, SHARED


def _questions(names: list[str]) -> list[str]:
    from experiments.question import questions

    known = questions()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown question(s) {', '.join(unknown)}; questions: {', '.join(known)}")
    return names or known


def cmd_status(a: argparse.Namespace) -> int:
    from experiments.plan import plan, status_lines
    from experiments.question import load_question
    from experiments.shared_training import kept_trainings

    for name in _questions(a.questions):
        q = load_question(name)
        print("\n".join(status_lines(q, plan(q))))
        kept = kept_trainings(RUNS, q)
        if kept:
            size = sum(f.stat().st_size for k in kept for f in k.rglob("*") if f.is_file())
            print(f"  kept trainings: {len(kept)} ({size / 1e9:.1f} GB) under {kept[0].parent}; `polysent experiment "
                  f"release {q.name}` removes those no pending row reads")
    return 0


def cmd_release(a: argparse.Namespace) -> int:
    from experiments import kits
    from experiments.plan import plan
    from experiments.question import load_question
    from experiments.shared_training import release_unneeded

    q = load_question(_questions([a.question])[0])
    pending = [(p.condition, p.key.seed, p.key.scale) for p in plan(q)
               if p.state != "done" and p.key.condition != "start"]
    removed, kept = release_unneeded(RUNS, q, pending, kits.load_manifest(q.kit)["hashes"]["train"],
                                     dry_run=a.dry_run)
    verb = "would remove" if a.dry_run else "removed"
    for folder in removed:
        print(f"{verb} {folder}")
    for folder in kept:
        print(f"kept {folder}: a pending row reads it")
    print(f"{q.name}: {verb} {len(removed)} kept training(s), {len(kept)} still read by pending rows")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from experiments.plan import format_seconds, plan
    from experiments.question import load_question
    from experiments.runner import run_row, score_start

    q = load_question(_questions([a.question])[0])
    todo = [p for p in plan(q) if p.state != "done" and (a.include_gpu_rows or p.runs_on == "cpu")
            and (not a.seeds or p.key.seed in a.seeds or p.key.condition == "start")
            and (not a.scale or p.key.scale in a.scale or p.key.condition == "start")
            and (not a.only or p.key.condition in a.only)]
    print(f"{q.name}: {len(todo)} rows to run" + (f" (at most {a.max_rows})" if a.max_rows else ""), flush=True)
    t0, done = time.perf_counter(), 0
    for p in todo:
        if a.max_rows and done >= a.max_rows:
            break
        if a.budget and p.cpu_seconds and time.perf_counter() - t0 + p.cpu_seconds > a.budget:
            print(f"budget {a.budget:.0f} s: {p.key} not started", flush=True)
            continue
        print(f"{q.name} {p.key}: started (~{format_seconds(p.cpu_seconds)} on 2 cores; -v logs its steps)",
              flush=True)
        t1 = time.perf_counter()
        if p.key.condition == "start":
            row = score_start(q, device=a.device)
        else:
            row = run_row(q, p.condition, p.key.seed, p.key.scale, device=a.device)
        done += 1
        figs = "  ".join(f"{k} {v:.2f}" for k, v in row["metrics"].items() if "." not in k or
                         (k.startswith("decision.") and k.count(".") == 1))
        print(f"{q.name} {p.key}: {figs} ({time.perf_counter() - t1:.0f} s)", flush=True)
    if done:
        _tables([q.name], check=False)
    return 0


def cmd_run_row(a: argparse.Namespace) -> int:
    from experiments.question import load_question
    from experiments.runner import run_row

    q = load_question(a.question)
    run_row(q, q.condition(a.condition), a.seed, a.scale, device=a.device, results=a.results, origin=a.origin)
    return 0


def _tables(names: list[str], check: bool) -> int:
    from experiments.ledger import read_rows
    from experiments.pages import HEADLINE_START, headline, render, with_headline
    from experiments.plan import plan
    from experiments.question import load_question, questions

    differ: list[str] = []

    def update(path: Path, text: str) -> None:
        """Record ``path`` as differing from ``text``; unless checking, replace it (temporary name, then rename)."""
        if (path.read_text(encoding="utf-8") if path.exists() else None) == text:
            return
        differ.append(str(path))
        if not check:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)

    items = []
    for name in questions():
        q = load_question(name)
        rows = read_rows(q.results)
        items.append((q, rows, plan(q, rows, against_kit=False)))
        if name in names:
            update(q.folder / "RESULTS.md", render(*items[-1]))
    readme = REPO / "README.md"
    in_repo = EXPERIMENTS == REPO / "experiments"  # a test's own questions leave the README alone
    if in_repo and readme.is_file() and HEADLINE_START in (old := readme.read_text(encoding="utf-8")):
        update(readme, with_headline(old, headline(items)))
    if check and differ:
        print("RESULTS.md differs from its ledger: " + ", ".join(differ) + " (run `polysent experiment tables`)")
        return 1
    print(("regenerated: " + ", ".join(differ)) if differ else "every RESULTS.md is up to date")
    return 0


def cmd_tables(a: argparse.Namespace) -> int:
    return _tables(_questions(a.questions), a.check)


def cmd_mechanism(a: argparse.Namespace) -> int:
    """Each row's ``mechanism`` as its question now states it; ``--write`` records it in rows that hold another (or
    none): a figure the row already holds, so the row's results are unchanged (``experiments.mechanism``)."""
    from experiments.ledger import read_rows, row_key, write_row
    from experiments.mechanism import recorded
    from experiments.question import load_question

    for name in _questions(a.questions):
        q = load_question(name)
        if not any(c.mechanism for c in q.conditions):
            continue
        for row, m in recorded(q, read_rows(q.results)):
            state = "—" if m is None else ("not measured" if m["active"] is None else
                                           "active" if m["active"] else "inactive")
            value = "" if m is None or m["value"] is None else f" {m['figure']} {m['value']:.4g} vs {m['threshold']:g}"
            changed = "mechanism" not in row or row["mechanism"] != m
            print(f"{q.name}: {row_key(row)}: {state}{value}" + (" (written)" if changed and a.write else ""))
            if changed and a.write:
                write_row(q.results, {**row, "mechanism": m})
    return 0


def cmd_prepare(a: argparse.Namespace) -> int:
    from experiments.kits import pack_start_model, prepare

    if a.add_scoring_sets:
        from experiments.kits import add_scoring_sets

        if a.kit != "me5_replication":
            raise SystemExit("--add-scoring-sets: only kit me5_replication has topic sets and caption pairs")
        m = add_scoring_sets(a.data)
        print(f"kit {a.kit}: topic sets version {m['topic_sets']} and caption pairs version {m['caption_sets']}; "
              f"stats {m['stats']['topic_sets']}, {m['stats']['caption_sets']}")
    if a.all_languages:
        from experiments.kits import add_all_language_corpora

        if a.kit != "me5_replication":
            raise SystemExit("--all-languages: only kit me5_replication has all-language corpora")
        stats = add_all_language_corpora(data=a.data)
        print(f"kit {a.kit}: all-language corpora added in {stats['seconds']:.0f} s: {stats['bitext_all']['kept']} "
              f"bitext pairs ({stats['ntrex_languages']} NTREX languages), {stats['xnli_all']['groups']} XNLI groups "
              f"({len(stats['xnli_all']['languages'])} languages)")
    if a.ease_en:
        from experiments.kits import add_ease_en

        if a.kit != "me5_replication":
            raise SystemExit("--ease-en: only kit me5_replication has EASE's corpora")
        stats = add_ease_en(data=a.data)
        held = stats["held_out"]
        print(f"kit {a.kit}: EASE's English corpus added in {stats['seconds']:.0f} s: {held['train']['rows']} "
              f"training pairs, {held['held_out']['rows']} held-out pairs over {held['held_out_entities']} entities "
              "(hard_negatives_en, entity_vectors_en, eval_entity_pairs_en)")
    if not (a.add_scoring_sets or a.all_languages or a.ease_en):
        m = prepare(a.kit, a.data)
        print(f"kit {a.kit}: built in {m['build_seconds']:.0f} s; stats {m['stats']}")
    if a.pack_start:
        print(f"packed start: {pack_start_model(a.kit)}")
    return 0


def cmd_pack_start(a: argparse.Namespace) -> int:
    from experiments.kits import pack_start_model, packed_start_record

    if not a.force and packed_start_record(a.kit) is not None:
        print(f"kit {a.kit}: the packed start is current (packed for this build of the kit)")
        return 0
    print(f"packed start: {pack_start_model(a.kit)}")
    return 0


def cmd_carry(a: argparse.Namespace) -> int:
    from experiments.carry import carry

    r = carry(a.out, names=a.questions or None, include_cpu=a.include_cpu_rows)
    for kit, k in r["kits"].items():
        print(f"{kit}: training tables carried {', '.join(k['train_carried']) or '(none)'}; left "
              f"{', '.join(k['train_left']) or '(none)'}")
    print(f"carry: {r['bytes'] / 2**20:.1f} MiB under {a.out} — device call: carry [\"{a.out}\"], command "
          f"POLYSENT_EXPERIMENTS_WORK=$PWD/{a.out} python3 -m experiments gpu-drain --out $OUT"
          + (" --include-cpu-rows" if a.include_cpu_rows else ""))
    return 0


def cmd_gpu_drain(a: argparse.Namespace) -> int:
    from experiments.drain import drain

    drain(a.out, deadline=a.deadline, workers=a.workers, names=a.questions or None, include_cpu=a.include_cpu_rows,
          device=a.device, dry_run=a.dry_run)
    return 0


def cmd_merge(a: argparse.Namespace) -> int:
    from experiments.drain import merge

    counts = merge(a.path)
    print(f"merged: {counts}")
    return _tables(sorted(counts), check=False) if counts else 0


def build_parser(prog: str = "polysent experiment") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="log what is read, trained and written")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("status", help="done / stale / pending rows with estimated CPU and GPU time")
    s.add_argument("questions", nargs="*", help="default: every question")
    s.set_defaults(fn=cmd_status)
    r = sub.add_parser("run", help="run a question's pending CPU rows")
    r.add_argument("question")
    r.add_argument("--seeds", type=int, nargs="+", default=None, help="only these seeds")
    r.add_argument("--scale", type=int, nargs="+", default=None, help="only these scales")
    r.add_argument("--only", nargs="+", default=None, help="only these conditions")
    r.add_argument("--max-rows", type=int, default=0, help="stop after this many rows (0: no limit)")
    r.add_argument("--budget", type=float, default=0, help="seconds: start no row whose estimate would pass it")
    r.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    r.add_argument("--include-gpu-rows", action="store_true", help="also the rows planned for the GPU")
    r.set_defaults(fn=cmd_run)
    rr = sub.add_parser("run-row", help="train and score one row (the drain's worker)")
    rr.add_argument("question")
    rr.add_argument("condition")
    rr.add_argument("seed", type=int)
    rr.add_argument("scale", type=int)
    rr.add_argument("--results", type=Path, default=None, help="ledger folder (default: the question's)")
    rr.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    rr.add_argument("--origin", default="run")
    rr.set_defaults(fn=cmd_run_row)
    rl = sub.add_parser("release", help="remove the kept trainings no pending row reads (after a final table)")
    rl.add_argument("question")
    rl.add_argument("--dry-run", action="store_true", help="list what would be removed")
    rl.set_defaults(fn=cmd_release)
    t = sub.add_parser("tables", help="regenerate every RESULTS.md from its ledger")
    t.add_argument("questions", nargs="*", help="default: every question")
    t.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    t.set_defaults(fn=cmd_tables)
    me = sub.add_parser("mechanism", help="each row's mechanism check (--write: record it in the rows)")
    me.add_argument("--write", action="store_true", help="record it in rows that lack it or hold another")
    me.add_argument("questions", nargs="*", help="default: every question")
    me.set_defaults(fn=cmd_mechanism)
    pr = sub.add_parser("prepare", help="build a kit's tables from the shared data")
    pr.add_argument("kit", choices=("me5_replication", "random_init_bitext"))
    pr.add_argument("--data", type=Path, default=SHARED, help="the shared data folder (POLYSENT_SHARED_DATA)")
    pr.add_argument("--pack-start", action="store_true", help="also pack multilingual-e5-small for a GPU machine")
    pr.add_argument("--add-scoring-sets", action="store_true",
                    help="add MewsC-16's topic sets and STS-B's caption pairs to the prepared kit in place "
                         "(experiments/topic_sets.py, experiments/caption_sts.py)")
    pr.add_argument("--all-languages", action="store_true",
                    help="add the all-language corpora (bitext_pairs_all, xnli_groups_all, xnli_single_pairs_all) "
                         "to the prepared kit in place (experiments.kits.all_language_corpora)")
    pr.add_argument("--ease-en", action="store_true",
                    help="add EASE's monolingual English corpus (hard_negatives_en, entity_vectors_en and the held-out "
                         "eval_entity_pairs_en; configs/examples/shared-data-ease-en.yaml) to the prepared kit in "
                         "place (experiments.kits.ease_en_corpus; ~2 min, ~5.4 GB: it trains Wikipedia2Vec)")
    pr.set_defaults(fn=cmd_prepare)
    ps = sub.add_parser("pack-start", help="pack multilingual-e5-small for a GPU machine (when the kit changed)")
    ps.add_argument("kit", choices=("me5_replication",))
    ps.add_argument("--force", action="store_true", help="repack even when the packed start is current")
    ps.set_defaults(fn=cmd_pack_start)
    c = sub.add_parser("carry", help="what the drain's pending rows read from the kits, for the device tool")
    c.add_argument("--out", type=Path, default=Path("data/experiments/carry"), help="the folder to carry")
    c.add_argument("--include-cpu-rows", action="store_true", help="also what the CPU rows read")
    c.add_argument("questions", nargs="*", help="default: every question")
    c.set_defaults(fn=cmd_carry)
    g = sub.add_parser("gpu-drain", help="on a GPU machine: every pending GPU row within a deadline")
    g.add_argument("--out", type=Path, required=True, help="where rows.jsonl and drain.log go ($OUT)")
    g.add_argument("--deadline", type=float, default=560.0, help="seconds after which no row runs")
    g.add_argument("--workers", type=int, default=8, help="rows at once on the one GPU (16 CPU cores feed it)")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    g.add_argument("--include-cpu-rows", action="store_true", help="also the CPU rows, at their own precision")
    g.add_argument("--dry-run", action="store_true", help="list what would run")
    g.add_argument("questions", nargs="*", help="default: every question")
    g.set_defaults(fn=cmd_gpu_drain)
    m = sub.add_parser("merge", help="rows returned by a GPU drain → the ledgers")
    m.add_argument("path", type=Path, help="rows.jsonl, or a folder holding it")
    m.set_defaults(fn=cmd_merge)
    from experiments.interpolation_sweep import add_parser as add_sweep_parser

    add_sweep_parser(sub)
    return p


def main(argv: list[str] | None = None, prog: str = "polysent experiment") -> int:
    a = build_parser(prog).parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        return a.fn(a)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `… status | head`
        sys.stderr.close()
        return 0
