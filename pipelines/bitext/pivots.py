"""Pivot languages: the one rule that orients a bitext pair, and the pivot list checked once.

Every pair the bitext stage keeps is (pivot language, other language). When both languages are pivots, **the pivot
listed first wins**: with ``pivots: [en, es]`` an en–es pair is (en, es), with ``[es, en]`` it is (es, en). The list is
the config's statement of priority, and everything downstream reads it that way: the per-(pivot, language) quotas
(``pipelines.bitext.sampling``) are keyed by the oriented pair, ``bitext_pairs`` stores the winner as ``pivot_lang``
(the objectives' ``a`` side, ``models.training.corpus_tables.load_bitext_pairs``), and the paper configs say so
(``configs/paper/vmsst-6layer-scratch.yaml``: "en first: an en–es pair is oriented to en", VMSST's English and
Spanish pivots, methods §VMSST; ``start_distill``'s ``priority``: English, then the other pivots). An alphabetical
tie-break would make the order of the list meaningless and disagree with it for ``[es, en]``.

:class:`Pivots` is the list once checked (every code a known language, ``pipelines.language_codes.check_language``):
the stage settings build it when they are validated, and the readers take it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipelines.language_codes import check_language


class Pivots(tuple[str, ...]):
    """The pivot languages in the config's order (priority first), each code checked when the tuple is made; ``where``
    names the config key in the error for an unknown code."""

    def __new__(cls, languages: Iterable[str], where: str = "pivots") -> Pivots:
        codes = tuple(languages)
        for code in codes:
            check_language(code, where)
        return super().__new__(cls, codes)

    @classmethod
    def of(cls, pivots: Sequence[str]) -> Pivots:
        """``pivots`` as :class:`Pivots`: itself when already checked, else checked now."""
        return pivots if isinstance(pivots, Pivots) else cls(pivots)

    def covers(self, a: str, b: str) -> bool:
        """Whether the pair ``a``–``b`` has a pivot side."""
        return a in self or b in self


def orient(src: str, tgt: str, pivots: Sequence[str]) -> tuple[str, str]:
    """(pivot, other) for a language pair; the pivot listed first wins when both are pivots (module docstring);
    ``ValueError`` when neither is a pivot."""
    ranks = [pivots.index(x) if x in pivots else len(pivots) for x in (src, tgt)]
    if min(ranks) == len(pivots):
        raise ValueError(f"bitext {src}-{tgt} has no pivot language (pivots: {list(pivots)})")
    return (src, tgt) if ranks[0] <= ranks[1] else (tgt, src)
