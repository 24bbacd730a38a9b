"""Streaming reader of Wikidata JSON dumps → entities, their sitelinks and their "instance of" (P31) types.

Accepts the dump shape (a JSON array with one entity per line, ``[`` and ``]`` on their own lines, lines ending in
``,``) and plain JSON lines, uncompressed, ``.bz2`` or ``.gz``. Only what the corpora need is kept: QID, labels in the
configured languages, sitelinks for the configured wikis, and the values of the top-level P31 claims. Titles map to
QIDs by **sitelink** — never by label, which is the homonym bug of the public EASE code (docs, methods §4.4).

Design: scan bytes, parse only small slices
-------------------------------------------
A realistic entity is big and almost all of it is unwanted: Q42 is 76 KB (128 labels, 94 sitelinks, 53 KB of claims
of 61 properties) and we keep ~150 bytes of it. Decoding the whole line builds ~10,000 Python objects to throw away:
on the machine below ``json.loads`` does 900–1,200 such entities/s and ``orjson.loads`` 1,300–1,900/s; 20,000/s per
core would need 1.5 GB/s of JSON parsing.

**Reading.** The file is read with ``readinto`` into one reused 1 MiB buffer (small enough to stay in L2 while its
lines are scanned; 16 MiB blocks were 15 % slower), split on ``\n`` with ``bytes.find`` (memchr), and each line is
handled in place, as offsets into the buffer — no line is copied. Memory: the buffer, grown only for a longer line.

**Fast path** (``EntityExtractor.fast``). On this VM a multi-byte ``bytes.find`` runs at only ~1–2 GB/s (a single
byte, memchr, at ~30 GB/s), so the fast path avoids ever scanning the 53 KB of claims:

* the *head* ``{"type":"item","id":"Q42","labels":{`` is matched by a regex on its few bytes: ``type``, ``id``, and
  the proof that ``labels`` is a top-level key;
* ``"sitelinks":{`` is found with ``rfind`` from the end (it is the last section: ~8 KB scanned); ``"claims":{``
  with ``rfind`` back from the first ``$`` after the head (memchr; the first statement id ``Q42$…`` is at most a few
  hundred bytes into claims); ``"aliases":{`` and ``"descriptions":{`` (which end ``labels``) with ``rfind`` back
  from claims. A section's range runs to the next section's key. Other key orders fall back to forward ``find``s;
* labels: one ``find`` per language of the whole entry prefix ``"en":{"language":"en","value":"`` in the labels
  range, then the string to its closing quote (escapes decoded by parsing just that string); sitelinks likewise with
  ``"enwiki":{"site":"enwiki","title":"``. The first entry of each section is checked to have this form (else the
  full parse); a serializer writes all entries of a line alike;
* P31: when ``claims`` starts with ``{"P31":[`` the list is the top-level one by position. Otherwise the list is
  found as ``"P31":[`` + the opening of a statement as this line writes it (``{"mainsnak":{`` in dumps, ``{"id":"``
  from the API, learnt from the first claim): only statement lists start so, qualifier and reference lists hold
  snaks (``{"snaktype"…``). Statements in any other form: every ``"P31"`` in claims is examined — a value
  (``"property":"P31"``, ``"qualifiers-order":["P31"]``) is passed over, a key's list is parsed and kept only if it
  holds statements. The list's end is guessed (where the next statement list or claims begins/ends; else counted
  brackets) and **confirmed by parsing the slice**: a JSON value is prefix-free, so a slice that parses is exactly
  the list. It is decoded with msgspec into ``mainsnak``/``rank`` only (references skipped without building
  objects: 1.2 µs instead of orjson's 5 µs for Q42's 0.9 KB list).

Why the byte patterns are safe: inside a JSON string every ``"`` is escaped, so ``"sitelinks":{`` or ``"P31":[`` can
only be a key, never text in a label or title (``\"sitelinks\":{`` in a label does not match); a key preceded by
anything but ``{`` or ``,`` makes the fast path give up. Whenever it cannot be sure — a head or first entry not in the
compact serializer form, an entry followed by something unexpected, two statement lists for P31, a list that is
neither statements nor snaks, a slice that does not parse, ``type`` or ``id`` not in the head — it returns ``None``
and the line is decoded in full (``EntityExtractor.full``: orjson, then the stdlib json for what orjson rejects, such
as lone surrogates). Both paths feed the same interpretation (``_label``, ``_title``, ``_p31``), and
``tests/test_wikidata.py`` checks that they agree on Q42, on every line of the shared mock dump, of the sample and of
the fixture, and on purpose-built tricky lines (P31 in qualifiers and references, ``"sitelinks"`` in a label,
escapes, whitespace, missing sections, other key orders, brackets in strings). Assumptions, true of the dumps
Wikidata publishes and of its API: a line serializes all its entries alike (a compact head and first entry mean a
compact line), keys are not duplicated, and ``labels``, ``descriptions``, ``aliases``, ``claims``, ``sitelinks`` and
statements occur only where the Wikibase JSON model puts them. The fast path does not validate the bytes it skips: a
line corrupt inside another property's claims is read, not counted as bad (finding that would cost a full parse).

Measured (``python -m bench.wikidata_reader --repeat 1``: Q42 replicated 20,000× under new ids, 1.5 GB, page-cached,
one core of a shared 2-vCPU Xeon VM at load ~0.5): **polysent 27,829 entities/s** (0 lines decoded in full, peak RSS
86 MiB) against ``json.loads`` per line 1,128/s (24.7× slower) and ``orjson.loads`` 1,815/s (15.3×) in the same run;
from ``.bz2`` (2,000 replicas, decompression by Python's ``bz2`` included, which dominates) 323/s against 214/s and
279/s. The VM's neighbours move the figure: runs at load 2–2.5 on its 2 vCPUs measured 17,600–25,000/s (the anchors
slowed in proportion). Per entity the fast path scans ~40 KB with ``find``/``rfind`` (plus memchr) and decodes
~1 KB, against 76 KB of full JSON decoding; ~40 % of the time is the copy of the line from the page cache and the
newline search, which any reader pays.

Bad input: a line that is not JSON, or not an object with a string ``id``, is counted with its line number (the first
20 are kept in the stats and logged), never a crash. A truncated or corrupt ``.bz2``/``.gz`` raises
``WikidataFormatError`` naming the file and the last complete line; so does a file without any entity line.
"""

from __future__ import annotations

import bz2
import gzip
import json
import logging
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, field_validator

from contract import StageResult
from pipelines.language_codes import wiki_lang

log = logging.getLogger("polysent.pipelines.wikidata")
STAGE_VERSION = "2"

BLOCK_BYTES = 1 << 20  # fits in L2: the block is still cached when its lines are scanned (16 MiB: -15 %)
MAX_BAD_LINE_NUMBERS = 20
BATCH_ROWS = 200_000

# Wikimedia sites whose dbname ends in "wiki" but that are not a language's Wikipedia.
NON_LANGUAGE_WIKIS = frozenset({
    "commonswiki", "metawiki", "specieswiki", "wikidatawiki", "mediawikiwiki", "sourceswiki", "incubatorwiki",
    "outreachwiki", "wikimaniawiki", "foundationwiki", "wikifunctionswiki", "testwiki", "test2wiki",
    "testwikidatawiki", "nostalgiawiki", "tenwiki", "donatewiki", "strategywiki", "usabilitywiki",
})


class WikidataSettings(BaseModel):
    """Which wikis' sitelinks and which languages' labels to keep."""

    model_config = ConfigDict(extra="forbid")
    wikis: list[str] = ["enwiki", "dewiki", "ruwiki"]
    """the Wikipedias whose sitelinks (page titles) are kept: an entity is found by its title in these wikis"""
    label_languages: list[str] = ["en"]
    """the languages whose Wikidata labels are kept"""

    @field_validator("wikis")
    @classmethod
    def _language_wikipedias(cls, wikis: list[str]) -> list[str]:
        bad = [w for w in wikis if not re.fullmatch(r"[a-z][a-z0-9_]*wiki", w) or w in NON_LANGUAGE_WIKIS]
        if bad:
            raise ValueError(f"not a language Wikipedia's site id (like 'enwiki', 'zh_min_nanwiki'): {bad}")
        return wikis

    @field_validator("label_languages")
    @classmethod
    def _plain_codes(cls, langs: list[str]) -> list[str]:
        bad = [x for x in langs if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", x)]
        if bad:
            raise ValueError(f"not a Wikidata language code: {bad}")
        return langs


class WikidataFormatError(ValueError):
    pass


class Entity(NamedTuple):
    """What is kept of an item: labels in ``label_languages`` order (None where missing), ``(wiki, title)`` pairs in
    ``wikis`` order, and the P31 values in claim order."""

    qid: str
    labels: tuple[str | None, ...]
    sitelinks: tuple[tuple[str, str], ...]
    types: tuple[str, ...]


SKIPPED = "skipped"  # a well-formed entity that is not an item (property, lexeme, …)


class BadLine(ValueError):
    """A line that is not a JSON entity object with a string ``id``."""


@dataclass
class ReadStats:
    entities: int = 0
    skipped: int = 0
    bad_lines: int = 0
    bad_line_numbers: list[int] = field(default_factory=list)
    full_parses: int = 0  # lines the fast path handed to the full parse (bad lines included)

    def bad(self, path: Path, lineno: int, reason: str) -> None:
        self.bad_lines += 1
        if len(self.bad_line_numbers) < MAX_BAD_LINE_NUMBERS:
            self.bad_line_numbers.append(lineno)
            log.warning("%s:%d: skipped, %s", path, lineno, reason)


# ---------------------------------------------------------------------------------------------------------------------
# Interpretation, shared by the fast path and the full parse


def _is_item(kind: Any, qid: str) -> bool:
    return kind in (None, "item") and qid[:1] == "Q"


def _label(entry: Any) -> str | None:
    value = entry.get("value") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def _clean(text: Any) -> Any:
    """Lone surrogates (which only the stdlib fallback lets through) cannot go to Parquet: replace them."""
    if isinstance(text, str) and not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return text.encode("utf-8", "replace").decode()
    return text


def _title(entry: Any) -> str | None:
    title = entry.get("title") if isinstance(entry, dict) else None
    return title if isinstance(title, str) else None


class _Statement(msgspec.Struct):
    """A statement as the fast path decodes it: ``mainsnak`` and ``rank`` only (references and qualifiers are skipped
    by the decoder without building objects)."""

    mainsnak: Any = msgspec.UNSET
    rank: Any = None


_STATEMENTS = msgspec.json.Decoder(list[_Statement])


def _p31(claims: Any) -> tuple[str, ...]:
    """Values of a ``claims["P31"]`` list: value snaks only, deprecated rank skipped, ``id`` or ``numeric-id``."""
    if not isinstance(claims, list):
        return ()
    out = []
    for claim in claims:
        if isinstance(claim, _Statement):
            snak, rank = claim.mainsnak, claim.rank
        elif isinstance(claim, dict):
            snak, rank = claim.get("mainsnak"), claim.get("rank")
        else:
            continue
        if rank == "deprecated" or not isinstance(snak, dict) or snak.get("snaktype") != "value":
            continue
        datavalue = snak.get("datavalue")
        value = datavalue.get("value") if isinstance(datavalue, dict) else None
        if not isinstance(value, dict):
            continue
        qid = value.get("id")
        if not isinstance(qid, str) or not qid:
            num = value.get("numeric-id")
            qid = f"Q{num}" if isinstance(num, int) and not isinstance(num, bool) else None
        if qid:
            out.append(qid)
    return tuple(out)


def _statement_kind(items: Any) -> str:
    """``statements`` (every element has a ``mainsnak``), ``snaks``, ``empty`` or ``mixed``."""
    if not isinstance(items, list):
        return "mixed"
    if not items:
        return "empty"
    if all((isinstance(x, _Statement) and x.mainsnak is not msgspec.UNSET) or (isinstance(x, dict) and "mainsnak" in x)
           for x in items):
        return "statements"
    if all(isinstance(x, dict) and "mainsnak" not in x and "snaktype" in x for x in items):
        return "snaks"
    return "mixed"


# ---------------------------------------------------------------------------------------------------------------------
# The extractor

_SECTIONS = (b"labels", b"descriptions", b"aliases", b"claims", b"sitelinks")
_HEAD = re.compile(rb'\{((?:"[A-Za-z0-9_-]+":(?:"[^"\\]*"|-?[0-9]+),)*)"(?P<sec>labels|descriptions|aliases|'
                   rb'claims|sitelinks)":\{')
_HEAD_ITEM = re.compile(rb'\{"(?:type":"item","id":"(Q[0-9]+)|id":"(Q[0-9]+)","type":"item)","(?P<sec>labels)":\{')
_HEAD_PAIR = re.compile(rb'"([A-Za-z0-9_-]+)":("[^"\\]*"|-?[0-9]+)')
_LABELS_FIRST = re.compile(rb'\{"([A-Za-z][A-Za-z0-9-]*)":\{"language":"\1","value":"')
_SITELINKS_FIRST = re.compile(rb'\{"([a-z][a-z0-9_]*)":\{"site":"\1","title":"')
_CLAIMS_FIRST = re.compile(rb'\{"P[1-9][0-9]*":\[(\{"mainsnak":\{|\{"id":")')
_BACKSLASH, _RBRACE = 0x5C, 0x7D
_KEY_BEFORE = b",{"  # a key follows '{' or ','
_Range = tuple[int, int]
_AFTER_VALUE = b",}"
_MAX_LIST_BYTES = 4 << 20
_MAX_PARSE_TRIES = 4


class _Unsure(Exception):
    """The fast path cannot be sure; decode the line in full."""


def _string_at(buf: bytes, i: int, hi: int) -> tuple[str, int]:
    """The JSON string whose content starts at ``i`` (just after its opening quote) and the closing quote's index."""
    q = buf.find(b'"', i, hi)
    if q < 0:
        raise _Unsure
    if buf.find(b"\\", i, q) < 0:
        return buf[i:q].decode(), q
    while True:  # a quote preceded by an odd number of backslashes is escaped
        k = q - 1
        while buf[k] == _BACKSLASH:
            k -= 1
        if (q - 1 - k) % 2 == 0:
            break
        q = buf.find(b'"', q + 1, hi)
        if q < 0:
            raise _Unsure
    return orjson.loads(buf[i - 1:q + 1]), q


def _array_at(buf: bytes, a: int, hi: int) -> tuple[Any, int]:
    """Parse the JSON array starting at ``buf[a] == '['``; return it and the index after its ``]``."""
    pos, square, curly, tries = a, 0, 0, 0
    count = buf.count
    while True:
        j = buf.find(b"]", pos, hi)
        if j < 0 or j - a > _MAX_LIST_BYTES:
            raise _Unsure
        j += 1
        square += count(b"[", pos, j) - count(b"]", pos, j)
        curly += count(b"{", pos, j) - count(b"}", pos, j)
        pos = j
        if square == 0 and curly == 0:
            try:
                return orjson.loads(buf[a:j]), j
            except orjson.JSONDecodeError:  # a bracket inside a string fooled the counts
                tries += 1
                if tries >= _MAX_PARSE_TRIES:
                    raise _Unsure from None


def _statement_list(buf: bytes, a: int, hi: int, end: int, opening: bytes) -> Any:
    """Parse the statement list starting at ``buf[a] == '['`` inside the claims range ``[.., hi)``. Its end is
    guessed from where the next statement list starts (``"P…":[`` + ``opening``) or where claims closes, and
    confirmed by parsing; when the guess does not parse, brackets are counted (``_array_at``)."""
    nxt = buf.find(b'":[' + opening, a + 1, hi)
    if nxt >= 0:
        q = buf.rfind(b'"', a, nxt)  # the opening quote of the next property's key
        e = q - 1 if q > a + 1 and buf[q - 1] == 0x2C else -1
    elif hi < end:  # claims is followed by another section: …]},"sitelinks":{
        e = hi - 2 if buf[hi - 1] == 0x2C and buf[hi - 2] == _RBRACE else -1
    else:  # claims is the last section: …]}}
        e = end - 2 if buf[end - 2] == _RBRACE else -1
    if e > a and buf[e - 1] == 0x5D:
        try:
            return _STATEMENTS.decode(buf[a:e])
        except msgspec.ValidationError:  # valid JSON, not all statement objects
            return orjson.loads(buf[a:e])
        except msgspec.DecodeError:
            pass
    return _array_at(buf, a, hi)[0]


class EntityExtractor:
    """Turns one line (``buf[start:end]``, trimmed, without the dump's trailing comma) into an ``Entity``."""

    def __init__(self, settings: WikidataSettings) -> None:
        self.languages = list(settings.label_languages)
        self.wikis = list(settings.wikis)
        self._label_needles = [f'"{lang}":{{"language":"{lang}","value":"'.encode() for lang in self.languages]
        self._site_needles = [(w, f'"{w}":{{"site":"{w}","title":"'.encode()) for w in self.wikis]
        self._markers = {name: b'"' + name + b'":{' for name in _SECTIONS}

    # -- full parse -----------------------------------------------------------------------------------------------

    def decode(self, line: bytes) -> Any:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
        try:  # the stdlib accepts what orjson rejects (lone surrogates, huge integers, NaN)
            return json.loads(line.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise BadLine(f"not JSON ({exc})") from None

    def from_dict(self, ent: Any) -> Entity | str:
        if not isinstance(ent, dict) or not isinstance(ent.get("id"), str):
            raise BadLine("not an entity object with a string 'id'")
        qid = _clean(ent["id"])
        if not _is_item(ent.get("type"), qid):
            return SKIPPED
        labels = ent.get("labels")
        labels = labels if isinstance(labels, dict) else {}
        sitelinks = ent.get("sitelinks")
        sitelinks = sitelinks if isinstance(sitelinks, dict) else {}
        claims = ent.get("claims")
        claims = claims if isinstance(claims, dict) else {}
        links = []
        for wiki in self.wikis:
            title = _title(sitelinks.get(wiki))
            if title is not None:
                links.append((wiki, _clean(title)))
        return Entity(qid, tuple(_clean(_label(labels.get(lang))) for lang in self.languages), tuple(links),
                      tuple(_clean(t) for t in _p31(claims.get("P31"))))

    def full(self, line: bytes) -> Entity | str:
        return self.from_dict(self.decode(line))

    # -- fast path --------------------------------------------------------------------------------------------------

    def fast(self, buf: bytes, start: int, end: int) -> Entity | str | None:
        """The entity from byte scanning, or None when the fast path cannot be sure (then use ``full``)."""
        try:
            return self._fast(buf, start, end)
        except (_Unsure, ValueError, msgspec.MsgspecError, IndexError):  # JSONDecodeError, UnicodeDecodeError
            return None

    def _fast(self, buf: bytes, start: int, end: int) -> Entity | str:
        if buf[end - 1] != _RBRACE:
            raise _Unsure
        m = _HEAD_ITEM.match(buf, start, end)  # {"type":"item","id":"Q42","labels":{ (or id first)
        if m is not None:
            kind, qid = "item", (m.group(1) or m.group(2)).decode()
        else:
            m = _HEAD.match(buf, start, end)
            if m is None:
                raise _Unsure
            kind = qid = None
            for key, raw in _HEAD_PAIR.findall(m.group(1)):
                if key == b"type":
                    kind = raw[1:-1].decode() if raw[:1] == b'"' else raw
                elif key == b"id":
                    qid = raw[1:-1].decode() if raw[:1] == b'"' else raw
            if not isinstance(qid, str) or not isinstance(kind, str):  # also when "type" might come later
                raise _Unsure
        if not _is_item(kind, qid):
            return SKIPPED
        labels_range, claims_range, sitelinks_range = self._sections(buf, m, end)

        # labels: "en":{"language":"en","value":"…"}
        labels: list[str | None] = []
        lo, hi = labels_range
        if lo < end and not buf.startswith(b"{}", lo) and _LABELS_FIRST.match(buf, lo, hi) is None:
            raise _Unsure  # not the serializer's entry form
        for needle in self._label_needles:
            k = buf.find(needle, lo, hi)
            if k < 0:
                labels.append(None)
                continue
            if buf[k - 1] not in _KEY_BEFORE:
                raise _Unsure
            text, q = _string_at(buf, k + len(needle), hi)
            if buf[q + 1] != _RBRACE:
                raise _Unsure
            labels.append(text)

        # sitelinks: "enwiki":{"site":"enwiki","title":"…",…}
        links: list[tuple[str, str]] = []
        lo, hi = sitelinks_range
        if lo < end and not buf.startswith(b"{}", lo) and _SITELINKS_FIRST.match(buf, lo, hi) is None:
            raise _Unsure
        for wiki, needle in self._site_needles:
            k = buf.find(needle, lo, hi)
            if k < 0:
                continue
            if buf[k - 1] not in _KEY_BEFORE:
                raise _Unsure
            title, q = _string_at(buf, k + len(needle), hi)
            if buf[q + 1] not in _AFTER_VALUE:
                raise _Unsure
            links.append((wiki, title))

        # P31 of the top-level claims
        types: tuple[str, ...] = ()
        lo, hi = claims_range
        if lo < end and not buf.startswith(b"{}", lo):
            first_claim = _CLAIMS_FIRST.match(buf, lo, hi)
            if first_claim is None:  # statements in an unusual key order: parse every "P31" key's list
                if buf.startswith(b'{"P31":[', lo):
                    types = _p31(_array_at(buf, lo + 7, hi)[0])
                else:
                    types = self._scan_p31(buf, lo, hi)
            else:
                # statements all start alike, and only statement lists start with it: "P31":[{"mainsnak":{…
                opening = first_claim.group(1)
                if buf.startswith(b'{"P31":[', lo):  # the first key of claims: top level by position
                    types = _p31(_statement_list(buf, lo + 7, hi, end, opening))
                else:
                    k = buf.find(b'"P31":[' + opening, lo, hi)
                    if k >= 0:
                        if buf[k - 1] not in _KEY_BEFORE:
                            raise _Unsure
                        items = _statement_list(buf, k + 6, hi, end, opening)
                        if _statement_kind(items) != "statements":
                            raise _Unsure
                        types = _p31(items)
        return Entity(qid, tuple(labels), tuple(links), types)

    def _sections(self, buf: bytes, m: re.Match[bytes], end: int) -> tuple[_Range, _Range, _Range]:
        """``(labels, claims, sitelinks)``, each ``(index of the value's '{', index of the next section's key)``
        (``(end, end)`` when absent). ``sitelinks`` is searched backwards from the end (it is last), ``claims``
        backwards from the first statement id's ``$`` (memchr), ``aliases`` and ``descriptions`` (which bound labels)
        backwards from ``claims``; a marker not found there is looked for everywhere else."""
        first, body = m.group("sec"), m.end()
        if first == b"labels":  # the dump's and the API's order: labels, descriptions/aliases, claims, sitelinks
            sl = buf.rfind(b'"sitelinks":{', body, end)
            dollar = buf.find(b"$", body, sl) if sl > 0 else -1
            if dollar > 0:
                c = buf.rfind(b'"claims":{', body, dollar)
                if c > 0:
                    al = buf.rfind(b'"aliases":{', body, c)
                    de = buf.rfind(b'"descriptions":{', body, c)
                    if al > 0 and de > 0 and buf[sl - 1] == buf[c - 1] == buf[al - 1] == buf[de - 1] == 0x2C:
                        return (body - 1, min(al, de)), (c + 9, sl), (sl + 12, end)
        pos = {first: m.start("sec") - 1}
        markers = self._markers
        for name in _SECTIONS:
            if name in pos:
                continue
            p = buf.find(markers[name], body, end)
            if p >= 0:
                pos[name] = p
        order = sorted(pos.items(), key=lambda kv: kv[1])
        ranges = {}
        for i, (name, p) in enumerate(order):
            if buf[p - 1] not in _KEY_BEFORE:
                raise _Unsure
            ranges[name] = (p + len(name) + 3, order[i + 1][1] if i + 1 < len(order) else end)
        absent = (end, end)
        return ranges.get(b"labels", absent), ranges.get(b"claims", absent), ranges.get(b"sitelinks", absent)

    @staticmethod
    def _scan_p31(buf: bytes, lo: int, hi: int) -> tuple[str, ...]:
        found = None
        i = lo
        while True:
            p = buf.find(b'"P31"', i, hi)
            if p < 0:
                break
            nxt = buf[p + 5]
            if nxt == 0x3A:  # ':' → a key
                if buf[p + 6] != 0x5B or buf[p - 1] not in _KEY_BEFORE:
                    raise _Unsure
                items, i = _array_at(buf, p + 6, hi)
                kind = _statement_kind(items)
                if kind == "statements":
                    if found is not None:
                        raise _Unsure
                    found = items
                elif kind == "mixed":
                    raise _Unsure
            elif nxt in b",]}":  # a value: "property":"P31", "qualifiers-order":["P31", …]
                i = p + 5
            else:
                raise _Unsure
        return _p31(found)

    def extract(self, buf: bytes, start: int, end: int, stats: ReadStats | None = None) -> Entity | str:
        """Fast path, else full parse. Raises ``BadLine``."""
        got = self.fast(buf, start, end)
        if got is None:
            if stats is not None:
                stats.full_parses += 1
            got = self.full(buf[start:end])
        return got


# ---------------------------------------------------------------------------------------------------------------------
# Reading


def _open_binary(path: Path) -> IO[bytes]:
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb", buffering=0)


def _trim(buf: bytearray, a: int, b: int) -> tuple[int, int] | None:
    """The entity text of ``buf[a:b]`` (no surrounding whitespace, no trailing comma), None for ``[``/``]``/blank."""
    while a < b and buf[a] in b" \t\r":
        a += 1
    while b > a and buf[b - 1] in b" \t\r,":
        b -= 1
    if b - a > 1 or (b - a == 1 and buf[a] not in b"[]"):
        return a, b
    return None


def iter_lines(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytearray, int, int, int]]:
    """Yield ``(buffer, start, end, line_number)`` for every entity line: ``buffer[start:end]`` is the line without
    surrounding whitespace and without the dump's trailing comma; ``[``/``]``/blank lines are passed over. The buffer
    is reused: it is valid until the next line is asked for. Reads ``block_bytes`` at a time into one buffer (bounded
    memory: the buffer grows only to hold a longer line). Raises ``WikidataFormatError`` for a truncated or corrupt
    compressed file (naming the last complete line) and for a file without any entity line."""
    path = Path(path)
    lineno = 0
    seen = False
    buf = bytearray(block_bytes)
    view = memoryview(buf)
    filled = 0  # buf[:filled] holds the start of a line carried over from the previous block
    with _open_binary(path) as fh:
        while True:
            try:
                n = fh.readinto(view[filled:])
            except (EOFError, OSError, zlib.error) as exc:
                raise WikidataFormatError(
                    f"{path}: truncated or corrupt compressed data after line {lineno} (the last complete line): "
                    f"{exc}") from exc
            if not n:
                break
            total = filled + n
            s = 0
            nl = buf.find(b"\n", filled, total)
            while nl >= 0:
                lineno += 1
                span = _trim(buf, s, nl)
                if span is not None:
                    seen = True
                    yield buf, span[0], span[1], lineno
                s = nl + 1
                nl = buf.find(b"\n", s, total)
            filled = total - s
            if s:
                buf[:filled] = bytes(view[s:total])
            elif total == len(buf):  # one line longer than the buffer: grow it
                view.release()
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
    if filled:  # a last line without a newline
        lineno += 1
        span = _trim(buf, 0, filled)
        if span is not None:
            seen = True
            yield buf, span[0], span[1], lineno
    view.release()
    if not seen:
        raise WikidataFormatError(f"{path}: no entity lines (empty file, or only '[' and ']')")


def iter_records(path: Path, settings: WikidataSettings, stats: ReadStats | None = None) -> Iterator[Entity]:
    """Yield the kept part of every item in the dump (fast path, full parse where needed). Bad lines and non-items
    are counted in ``stats``; nothing is raised for them."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    ex = EntityExtractor(settings)
    fast, full = ex.fast, ex.full
    for buf, a, b, lineno in iter_lines(path):
        got = fast(buf, a, b)
        if got is None:
            stats.full_parses += 1
            try:
                got = full(buf[a:b])
            except BadLine as exc:
                stats.bad(path, lineno, str(exc))
                continue
        if got is SKIPPED:
            stats.skipped += 1
            continue
        stats.entities += 1
        yield got


def iter_entities(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every entity as a full dict (slow: every line is decoded). Raises ``WikidataFormatError`` naming the
    file and line of the first bad line."""
    path = Path(path)
    ex = EntityExtractor(WikidataSettings(wikis=[], label_languages=[]))
    for buf, a, b, lineno in iter_lines(path):
        try:
            ent = ex.decode(buf[a:b])
        except BadLine as exc:
            raise WikidataFormatError(f"{path}:{lineno}: not a JSON entity ({exc})") from None
        if not isinstance(ent, dict) or not isinstance(ent.get("id"), str):
            raise WikidataFormatError(f"{path}:{lineno}: expected an entity object with an 'id'")
        yield ent


# ---------------------------------------------------------------------------------------------------------------------
# Stage


class _TableWriter:
    """Column lists flushed to a Parquet file every ``BATCH_ROWS`` rows."""

    def __init__(self, path: Path, names: Iterable[str]) -> None:
        self.path = path
        self.schema = pa.schema([(n, pa.string()) for n in names])
        self.cols: list[list[str | None]] = [[] for _ in self.schema.names]
        self.rows = 0
        self._writer = pq.ParquetWriter(path, self.schema)

    def flush(self) -> None:
        if self.cols[0]:
            self.rows += len(self.cols[0])
            self._writer.write_table(pa.table([pa.array(c, pa.string()) for c in self.cols], schema=self.schema))
            self.cols = [[] for _ in self.schema.names]

    def close(self) -> None:
        if self._writer.is_open:
            self.flush()
            if self.rows == 0:
                self._writer.write_table(self.schema.empty_table())
            self._writer.close()


def build_entities(settings: WikidataSettings, dump: Path, out: Path) -> StageResult:
    """Stage entry point: ``wikidata_entities``, ``wikidata_sitelinks`` and ``wikidata_types`` (dump order)."""
    dump, out = Path(dump), Path(out)
    label_cols = [f"label_{lang}" for lang in settings.label_languages]
    entities = _TableWriter(out / "wikidata_entities.parquet", ["qid", *label_cols])
    sitelinks = _TableWriter(out / "wikidata_sitelinks.parquet", ["qid", "wiki", "lang", "title"])
    partial = out / ".wikidata_types.partial.parquet"
    types = _TableWriter(partial, ["qid", "type_qid"])
    langs = {w: wiki_lang(w) for w in settings.wikis}
    stats = ReadStats()
    e_cols, s_cols, t_cols = entities.cols, sitelinks.cols, types.cols
    try:
        for ent in iter_records(dump, settings, stats):
            qid = ent.qid
            e_cols[0].append(qid)
            for col, value in zip(e_cols[1:], ent.labels, strict=True):
                col.append(value)
            for wiki, title in ent.sitelinks:
                s_cols[0].append(qid)
                s_cols[1].append(wiki)
                s_cols[2].append(langs[wiki])
                s_cols[3].append(title)
            for t in ent.types:
                t_cols[0].append(qid)
                t_cols[1].append(t)
            if len(e_cols[0]) >= BATCH_ROWS or len(s_cols[0]) >= BATCH_ROWS or len(t_cols[0]) >= BATCH_ROWS:
                for w in (entities, sitelinks, types):
                    w.flush()
                e_cols, s_cols, t_cols = entities.cols, sitelinks.cols, types.cols
        for w in (entities, sitelinks, types):
            w.close()
        n_types = _label_types(partial, entities.path, label_cols[0] if label_cols else None,
                               out / "wikidata_types.parquet")
    finally:
        for w in (entities, sitelinks, types):
            w.close()
        partial.unlink(missing_ok=True)
    if stats.bad_lines:
        log.warning("%s: %d bad lines skipped (first line numbers: %s)", dump, stats.bad_lines,
                    stats.bad_line_numbers)
    log.info("read %d items (%d non-items skipped, %d lines decoded in full), %d sitelinks, %d P31 claims from %s",
             stats.entities, stats.skipped, stats.full_parses, sitelinks.rows, n_types, dump)
    return StageResult(
        tables={"wikidata_entities": "wikidata_entities.parquet", "wikidata_sitelinks": "wikidata_sitelinks.parquet",
                "wikidata_types": "wikidata_types.parquet"},
        stats={"entities": stats.entities, "skipped": stats.skipped, "bad_lines": stats.bad_lines,
               "bad_line_numbers": stats.bad_line_numbers, "sitelinks": sitelinks.rows, "types": n_types,
               "full_parses": stats.full_parses},
    )


def _label_types(partial: Path, entities: Path, label_col: str | None, dest: Path) -> int:
    """Add ``type_label`` (the type entity's first-language label, when it is in the dump) to the P31 rows; only the
    distinct type QIDs' labels are held in memory."""
    src = pq.ParquetFile(partial)
    type_ids = pa.array(sorted({t for b in src.iter_batches(columns=["type_qid"]) for t in b.column(0).to_pylist()}),
                        pa.string())
    keys, values = pa.array([], pa.string()), pa.array([], pa.string())
    if label_col and len(type_ids):
        found_keys: list[str] = []
        found_values: list[str | None] = []
        for batch in pq.ParquetFile(entities).iter_batches(columns=["qid", label_col]):
            hit = pc.is_in(batch.column(0), value_set=type_ids)
            batch = batch.filter(hit)
            found_keys.extend(batch.column(0).to_pylist())
            found_values.extend(batch.column(1).to_pylist())
        keys, values = pa.array(found_keys, pa.string()), pa.array(found_values, pa.string())
    schema = pa.schema([("qid", pa.string()), ("type_qid", pa.string()), ("type_label", pa.string())])
    rows = 0
    with pq.ParquetWriter(dest, schema) as writer:
        for batch in src.iter_batches():
            idx = pc.index_in(batch.column(1), value_set=keys)
            label = pc.take(values, idx) if len(keys) else pa.nulls(len(batch), pa.string())
            writer.write_table(pa.table([batch.column(0), batch.column(1), label], schema=schema))
            rows += len(batch)
        if rows == 0:
            writer.write_table(schema.empty_table())
    return rows
