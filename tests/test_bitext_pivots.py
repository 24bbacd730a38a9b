"""The pivot rule (``pipelines.bitext.pivots``): one ``orient`` for the readers and the stage, the pivot listed first
winning a pair of two pivots — in the chunks, the counts, the quotas and ``bitext_pairs`` alike — and the pivot list
checked once, when the settings are made."""

from __future__ import annotations

from pathlib import Path

import pytest
from bitext_helpers import EXPECTED, SRC, TGT, collect, moses

from pipelines.bitext import pivots as pivots_module
from pipelines.bitext import sampling
from pipelines.bitext.pivots import Pivots, orient
from pipelines.bitext.readers import count_pairs, iter_chunks
from pipelines.bitext.sampling import BitextSettings, select_pairs
from pipelines.bitext.sources import MosesSource
from pipelines.language_codes import UnknownLanguageError


def test_the_pivot_listed_first_wins() -> None:
    assert orient("es", "en", ["en", "es"]) == ("en", "es")
    assert orient("en", "es", ["es", "en"]) == ("es", "en")  # not alphabetical: the config's order
    assert orient("de", "es", ["en", "es"]) == ("es", "de") and orient("es", "de", ["en", "es"]) == ("es", "de")
    with pytest.raises(ValueError, match=r"bitext de-fr has no pivot language \(pivots: \['en', 'es'\]\)"):
        orient("de", "fr", Pivots(["en", "es"]))
    assert sampling.orient is orient  # the stage and the formats share it


@pytest.mark.parametrize("order", [["en", "es"], ["es", "en"]])
def test_a_pair_of_two_pivots_is_oriented_alike_by_readers_counts_and_stage(tmp_path: Path, order: list[str]) -> None:
    """An en–es source read either way round, with either pivot first: the chunks, the counts, the quotas and
    ``bitext_pairs`` all put ``order[0]`` first."""
    forward = moses(tmp_path, SRC, TGT)
    backward = MosesSource(src="es", tgt="en", src_file=forward.tgt_file, tgt_file=forward.src_file)
    first, second = order
    for source in (forward, backward):
        df = collect(source, pivots=order)
        assert df.select("src_lang", "tgt_lang").unique().rows() == [(first, second)]
        text = dict(zip(("en", "es"), (df["src_text"][0], df["tgt_text"][0]) if first == "en"
                        else (df["tgt_text"][0], df["src_text"][0]), strict=True))
        assert text == {"en": "Hello world", "es": "Hola mundo"}
        assert count_pairs(source, order) == {(first, second): 5}
        settings = BitextSettings(pivots=order, quota_mode="proportional", total_pairs=3, min_chars=1)
        pairs, counts, _, _ = select_pairs(settings, [source], progress=False)
        assert counts.select("pivot_lang", "lang", "quota").rows() == [(first, second, 3)]
        assert set(pairs.select("pivot_lang", "lang").rows()) == {(first, second)}
        side = {lang: {pair[i] for pair in EXPECTED} for i, lang in enumerate(("en", "es"))}
        assert pairs.height == 3 and set(pairs["pivot_text"]) <= side[first] and set(pairs["text"]) <= side[second]


def test_a_source_without_a_pivot_is_refused_naming_its_files(tmp_path: Path) -> None:
    source = moses(tmp_path, SRC, TGT)
    with pytest.raises(ValueError, match=rf"^{source.src_file} / {source.tgt_file}: bitext en-es has no pivot language "
                                         r"\(pivots: \['de'\]\)"):
        iter_chunks(source, ["de"])
    assert count_pairs(source, ["es"]) == {("es", "en"): 5}  # one pivot: it goes first, whichever side it is


def test_the_pivot_list_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked when the settings are made (naming the config key); the readers, the counts and every chunk of the
    stage take the checked list as it is — in both quota modes."""
    calls: list[tuple[str, str]] = []
    check = pivots_module.check_language
    monkeypatch.setattr(pivots_module, "check_language", lambda code, where: calls.append((code, where)) or
                        check(code, where))
    source = moses(tmp_path, SRC, TGT)
    for mode in ("equal", "proportional"):
        calls.clear()
        settings = BitextSettings(pivots=["en", "es"], quota_mode=mode, chunk_rows=1000)
        select_pairs(settings, [source], progress=False)
        assert calls == [("en", "corpora.bitext_pairs.pivots"), ("es", "corpora.bitext_pairs.pivots")]
    with pytest.raises(ValueError, match=r"corpora\.bitext_pairs\.pivots: unknown language code 'xx'"):
        BitextSettings(pivots=["en", "xx"])
    with pytest.raises(UnknownLanguageError, match="pivots"):
        Pivots(["en", "xx"])
    copied = BitextSettings().model_copy(update={"pivots": ["es"]})
    assert copied.pivot_order == ("es",)  # a copy that changed the list is checked again, not left stale


def test_equal_quotas_are_the_stage_s_own_and_proportional_ones_come_from_counts(tmp_path: Path) -> None:
    """``quotas`` is the proportional rule only; equal quotas need no count pass."""
    source = moses(tmp_path, SRC, TGT)
    _, counts, _, _ = select_pairs(BitextSettings(quota_per_language=2, min_chars=1), [source], progress=False)
    assert counts.select("pivot_lang", "lang", "quota", "kept").rows() == [("en", "es", 2, 2)]
    assert sampling.quotas(BitextSettings(quota_mode="proportional", total_pairs=4), {("en", "es"): 5,
                                                                                       ("en", "de"): 5}) == {
        ("en", "es"): 2, ("en", "de"): 2}
