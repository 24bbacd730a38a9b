"""NTREX-128's documents: which lines train and which are held out, split by whole documents.

NTREX-128 (MicrosoftTranslator/NTREX, ``NTREX-128/``) is 1,997 English news sentences (WMT newstest2019) and their
human translations, line-aligned; ``DOCUMENT_IDS.tsv`` gives, line by line, the id of the document each sentence
belongs to (``bbc.381790``; a document's lines are consecutive). Training on some documents and evaluating (xSIM) on
the others needs the split to follow documents, not lines: neighbouring sentences of one article share names and
phrases, so a line-level split would put near-copies of test sentences into training.

The split: the documents in file order, every ``held_out_every``-th one (the 5th, 10th, … with the default 5) held
out, the rest training — deterministic, the same on every machine, and independent of the languages read. Used by the
bitext source ``nway`` (``documents: train``), the xSIM set ``parallel`` (``documents: held_out``) and the leakage
guard (an ``ntrex`` evaluation set), so one config can train on the training documents and evaluate on the held-out
ones with exactly the lines the experiments' kit ``me5_replication`` uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

DOCUMENT_IDS = "DOCUMENT_IDS.tsv"
HELD_OUT_EVERY = 5
Documents = Literal["all", "train", "held_out"]


def document_ids(path: Path) -> list[str]:
    """The document id of each line of ``path`` (a ``DOCUMENT_IDS.tsv``: the id in the first tab-separated field; a
    trailing blank line ends the file). A blank line inside names ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: NTREX's document ids are missing (expected {DOCUMENT_IDS}, one document id "
                                "a line, line-aligned with newstest2019-src.eng.txt)")
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    ids = []
    for i, line in enumerate(lines, start=1):
        doc = line.rstrip("\r").split("\t", 1)[0].strip()
        if not doc:
            raise ValueError(f"{path}:{i}: blank document id; expected one document id a line (e.g. bbc.381790)")
        ids.append(doc)
    if not ids:
        raise ValueError(f"{path}: no document id; expected one a line")
    return ids


def split_lines(ids: list[str], held_out_every: int = HELD_OUT_EVERY) -> tuple[list[int], list[int]]:
    """0-based line numbers of the training and the held-out documents: the documents in order of first appearance,
    every ``held_out_every``-th held out."""
    if held_out_every < 2:
        raise ValueError(f"held_out_every must be ≥ 2 (every n-th document held out), got {held_out_every}")
    order = list(dict.fromkeys(ids))
    held = {d for i, d in enumerate(order) if i % held_out_every == held_out_every - 1}
    return ([i for i, d in enumerate(ids) if d not in held], [i for i, d in enumerate(ids) if d in held])


def selected_lines(ids_file: Path, documents: Documents, held_out_every: int = HELD_OUT_EVERY,
                   n_lines: int | None = None) -> list[int] | None:
    """The 0-based lines that ``documents`` selects (``None`` for ``all``: every line). ``n_lines``, when given, is
    the data files' line count, checked against the ids file's (a mismatch names both)."""
    if documents == "all":
        return None
    ids = document_ids(ids_file)
    if n_lines is not None and n_lines != len(ids):
        raise ValueError(f"{ids_file}: {len(ids)} document ids, but the data files have {n_lines} lines; expected "
                         "one id per line of newstest2019-src.eng.txt")
    train, held = split_lines(ids, held_out_every)
    return train if documents == "train" else held
