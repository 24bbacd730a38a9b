"""LASER Tatoeba v1 → ``eval_tatoeba`` (methods.md §7.1).

Files ``tatoeba.{xxx}-eng.{xxx}`` and ``tatoeba.{xxx}-eng.eng`` (facebookresearch/LASER ``data/tatoeba/v1``; the copy
in mSimCSE ``eval/`` and XTREME ``download_data.sh`` is the same); line i of one is the translation of line i of the
other. ``xxx`` is the ISO 639-3 code LASER uses (``cmn``, ``swh``, ``pes``: see the pitfall methods.md D.6.1).

Table ``eval_tatoeba``: ``lang`` (the code in the file name), ``idx`` (0-based line), ``text`` (the xx sentence),
``eng`` (its English translation); texts are stripped. Trailing blank lines are ignored. A blank line inside either
file is a malformed pair: line i is dropped from *both* files (dropping it from one would pair every later sentence
with the wrong translation), counted in the stage's ``skipped`` stats with its file and line and logged; ``idx`` of
the other pairs stays their line (:class:`~pipelines.eval_sets.lines.AlignedRows`). Unequal line counts (the files
are not line-aligned), a file with no readable line, invalid UTF-8, a missing partner file or a file name whose code
is no language tag are errors naming the file. The code is the
file's own, kept whether or not ICU knows it (six of LASER's 112 — ``ber``, ``cbk``, ``max``, ``orv``, ``swg``,
``tzl`` — it does not; see :mod:`pipelines.language_codes`).

The mteb hub copy (``mteb/tatoeba-bitext-mining``, see :mod:`pipelines.eval_sets.hub`) keeps the line break at the
end of every sentence (its descriptive statistics count one character more per sentence than these stripped lines).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipelines.eval_sets.lines import AlignedRows, EvalFormatError, Skipped, aligned_lines, concat, skipped_or_new
from pipelines.language_codes import data_language, language_name

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"lang": pl.String, "idx": pl.Int32, "text": pl.String, "eng": pl.String}
TABLE = "eval_tatoeba"

# mSimCSE eval/evaluation_retrieval.py (methods.md §6.4) in the file names' ISO 639-3 codes: zh → cmn, sw → swh,
# fa → pes (the LASER file is tatoeba.pes-eng.*, not fas).
XNLI14 = ("ara", "bul", "cmn", "deu", "ell", "fra", "hin", "rus", "spa", "swh", "tha", "tur", "urd", "vie")
XTREME36 = (*XNLI14, "afr", "ben", "est", "eus", "fin", "heb", "hun", "ind", "ita", "jav", "jpn", "kat", "kaz",
            "kor", "mal", "mar", "nld", "pes", "por", "tam", "tel", "tgl")

_NAME = re.compile(r"tatoeba\.(?P<lang>[^.]+)-eng\.(?P<side>[^.]+)")


def tatoeba_files(folder: Path) -> dict[str, dict[str, Path]]:
    """language code → {"text": path of the xx side, "eng": path of the English side} found in ``folder``.

    A file named ``tatoeba.{xxx}-eng.{yyy}`` with ``yyy`` neither ``xxx`` nor ``eng``, or a language with only one
    of its two files, raises.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"Tatoeba folder not found: {folder} (expected tatoeba.{{xxx}}-eng.{{xxx,eng}} files)")
    found: dict[str, dict[str, Path]] = {}
    for path in sorted(folder.iterdir()):
        m = _NAME.fullmatch(path.name)
        if not m or not path.is_file():
            continue
        lang, side = m["lang"], m["side"]
        if side not in (lang, "eng"):
            raise EvalFormatError(f"{path}: a Tatoeba file must end in .{lang} or .eng, not .{side}")
        found.setdefault(lang, {})["eng" if side == "eng" and lang != "eng" else "text"] = path
    for lang, sides in found.items():
        for side, suffix in (("text", lang), ("eng", "eng")):
            if side not in sides:
                raise FileNotFoundError(f"{folder}: tatoeba.{lang}-eng.{suffix} is missing (its partner "
                                        f"{next(iter(sides.values())).name} is there)")
    return found


def read_tatoeba(folder: Path, languages: Sequence[str] = (), skipped: Skipped | None = None) -> pl.DataFrame:
    """``eval_tatoeba`` for ``languages`` (ISO 639-3 codes as in the file names; empty = every language found);
    dropped pairs are counted into ``skipped``."""
    skipped = skipped_or_new(skipped)
    files = tatoeba_files(folder)
    present = sorted(files)
    wanted = list(dict.fromkeys(languages)) or present
    missing = [lang for lang in wanted if lang not in files]
    if missing:
        raise FileNotFoundError(f"{folder}: no Tatoeba files for {missing} (found: {present})")
    frames = []
    for lang in wanted:
        text_path, eng_path = files[lang]["text"], files[lang]["eng"]
        data_language(lang, str(text_path))
        text, eng = aligned_lines(text_path, eng_path)
        label = f"{text_path.parent.name}/tatoeba.{lang}-eng.{{{lang},eng}}"
        rows = AlignedRows({"text": text_path, "eng": eng_path}, TABLE, label, len(text))
        rows.blank("text", text, f"a {lang} sentence (line i translates line i of {eng_path.name})")
        rows.blank("eng", eng, f"an English sentence (line i translates line i of {text_path.name})")
        keep = rows.report(skipped)
        frames.append(pl.DataFrame({"lang": lang, "idx": keep, "text": [text[i] for i in keep],
                                    "eng": [eng[i] for i in keep]}, schema=SCHEMA))
        log.info("tatoeba %s (%s): %d pairs from %s (%d dropped)", lang, language_name(lang), len(keep),
                 text_path.parent, len(text) - len(keep))
    return concat(frames, SCHEMA)
