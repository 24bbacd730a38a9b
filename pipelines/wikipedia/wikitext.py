"""Wikitext → plain paragraphs with hyperlink spans, and the page's infobox template names.

Removed: comments, ``<ref>``s, templates (nested), tables, files/images, categories, interlanguage links, galleries,
math, HTML tags, bold/italic quotes, headings and list markers. Kept: link spans with their target — ``#fragment``
stripped, underscores → spaces, first letter capitalised as MediaWiki does — and their surface text (including
MediaWiki's "link trail", ``[[bus]]es`` → ``buses``). A few inline templates that carry running text keep it
(``lang``, ``nowrap``, ``convert``…); every other template is dropped.

This is a single left-to-right scanner instead of a general wikitext parser (mwparserfromhell): it does exactly what
sentence–entity extraction needs at several times the speed (see the benchmark anchors in the docs).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

# Namespace prefixes whose links are not running text, in the languages we ship samples for plus the canonical
# English names (every wiki accepts those). Dumps also carry their own names: ``drop_prefixes`` extends this set.
FILE_PREFIXES = {"file", "image", "media", "datei", "bild", "файл", "изображение", "fichier", "archivo", "imagen",
                 "ficheiro", "tập tin", "hình", "ファイル", "画像", "αρχείο", "εικόνα"}
CATEGORY_PREFIXES = {"category", "kategorie", "категория", "catégorie", "categoría", "thể loại", "カテゴリ",
                     "κατηγορία", "категорія"}
INLINE_KEEP_LAST = {"lang", "nowrap", "nobr", "transl", "transliteration", "langx", "lang-de", "lang-en", "lang-ru",
                    "lang-fr", "lang-es", "нп", "iast", "small"}
INFOBOX_HINTS = ("infobox", "карточка", "город", "государство", "река", "персона", "ficha", "info")

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_REF_PAIR = re.compile(r"<ref\b[^>/]*(?<!/)>.*?</ref\s*>", re.S | re.I)
_REF_SELF = re.compile(r"<ref\b[^>]*/>", re.I)
_BLOCK_TAGS = re.compile(
    r"<(gallery|math|chem|score|timeline|syntaxhighlight|source|pre|imagemap|hiero|graph|templatedata)\b[^>]*>.*?</\1\s*>",
    re.S | re.I,
)
_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*\b[^<>]*/?>")
_EXTLINK = re.compile(r"\[(?:https?:)?//[^\s\]]+(?:\s+([^\]]*))?\]")
_BOLD_ITALIC = re.compile(r"'{2,5}")
_HEADING = re.compile(r"^\s*(=+)[^=\n].*?\1\s*$", re.M)
_LIST = re.compile(r"^[*#:;]+\s*", re.M)
_MAGIC = re.compile(r"__[A-ZА-Я]+__")
_SPACES = re.compile(r"[ \t\u00a0]+")
_TRAIL = re.compile(r"[^\W\d_]+")
_NAMED = re.compile(r"\s*[\w-]+\s*=")


@dataclass(frozen=True)
class LinkSpan:
    start: int
    end: int
    target: str
    surface: str


@dataclass
class Paragraph:
    text: str
    links: list[LinkSpan] = field(default_factory=list)


@dataclass
class ParsedPage:
    paragraphs: list[Paragraph]
    infoboxes: list[str]


def normalize_title(title: str) -> str:
    """MediaWiki title normalisation: fragment dropped, underscores → spaces, spaces collapsed, first letter upper."""
    title = title.split("#", 1)[0].replace("_", " ")
    title = _SPACES.sub(" ", html.unescape(title)).strip()
    if title.startswith(":"):
        title = title[1:].lstrip()
    return title[:1].upper() + title[1:] if title else title


def _find_close(text: str, start: int, open_tok: str, close_tok: str) -> int:
    """Index just after the ``close_tok`` matching the ``open_tok`` at ``start`` (nesting-aware), or len(text)."""
    depth = 0
    i = start
    n = len(text)
    lo, lc = len(open_tok), len(close_tok)
    while i < n:
        if text.startswith(open_tok, i):
            depth += 1
            i += lo
        elif text.startswith(close_tok, i):
            depth -= 1
            i += lc
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _split_params(body: str) -> list[str]:
    """Split a template body on top-level ``|`` (not inside nested links or templates)."""
    parts, depth_t, depth_l, cur = [], 0, 0, []
    i = 0
    while i < len(body):
        two = body[i : i + 2]
        if two == "{{":
            depth_t += 1
            cur.append(two)
            i += 2
            continue
        if two == "}}":
            depth_t -= 1
            cur.append(two)
            i += 2
            continue
        if two == "[[":
            depth_l += 1
            cur.append(two)
            i += 2
            continue
        if two == "]]":
            depth_l -= 1
            cur.append(two)
            i += 2
            continue
        if body[i] == "|" and depth_t == 0 and depth_l == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(body[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _strip_templates(text: str, infoboxes: list[str]) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find("{{", i)
        k = text.find("{|", i)
        if j < 0 and k < 0:
            out.append(text[i:])
            break
        if k >= 0 and (j < 0 or k < j) and (k == 0 or text[k - 1] == "\n"):
            out.append(text[i:k])
            i = _find_close(text, k, "{|", "|}")
            continue
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        end = _find_close(text, j, "{{", "}}")
        body = text[j + 2 : end - 2]
        if body.startswith("{"):  # {{{parameter}}}
            i = end
            continue
        params = _split_params(body)
        name = params[0].strip().replace("_", " ")
        lname = name.lower()
        multiline = "\n" in body and len(params) >= 3
        if lname.startswith(INFOBOX_HINTS) or (multiline and ("infobox" in lname or j == 0 or text[j - 1] == "\n")):
            if name and not name.startswith("#"):
                infoboxes.append(name[:1].upper() + name[1:])
        elif lname in INLINE_KEEP_LAST and (positional := [p for p in params[1:] if not _NAMED.match(p)]):
            out.append(_strip_templates(positional[-1], infoboxes))
        elif lname == "convert" and len(params) >= 3:
            out.append(f"{params[1].strip()} {params[2].strip()}")
        i = end
    return "".join(out)


def _links(text: str, drop_prefixes: set[str]) -> Paragraph:
    out: list[str] = []
    links: list[LinkSpan] = []
    pos = 0
    i = 0
    n = len(text)
    while i < n:
        j = text.find("[[", i)
        if j < 0:
            out.append(text[i:])
            pos += n - i
            break
        out.append(text[i:j])
        pos += j - i
        end = _find_close(text, j, "[[", "]]")
        inner = text[j + 2 : end - 2]
        i = end
        target_raw, _, surface = inner.partition("|")
        prefix, colon, _rest = target_raw.partition(":")
        lp = prefix.strip().lower()
        if colon and not target_raw.startswith(":") and (
            lp in drop_prefixes or (2 <= len(lp) <= 3 and lp.isalpha() and lp.isascii())
        ):
            continue  # file, category or interlanguage link: not running text
        if "[[" in inner:  # malformed nesting: keep only the visible text
            surface = re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", surface or target_raw)
        if "|" in surface:
            surface = surface.rsplit("|", 1)[-1]
        surface = surface if surface else target_raw.lstrip(":")
        trail = _TRAIL.match(text, i)
        if trail:
            surface += trail.group(0)
            i = trail.end()
        surface = _SPACES.sub(" ", surface)
        target = normalize_title(target_raw)
        out.append(surface)
        if target and surface.strip():
            links.append(LinkSpan(pos, pos + len(surface), target, surface))
        pos += len(surface)
    return Paragraph("".join(out), links)


def parse_wikitext(text: str, drop_prefixes: set[str] | None = None) -> ParsedPage:
    """Clean one page's wikitext into paragraphs whose link spans index into the paragraph text."""
    prefixes = FILE_PREFIXES | CATEGORY_PREFIXES | {p.lower() for p in (drop_prefixes or set())}
    infoboxes: list[str] = []
    text = _COMMENT.sub("", text)
    text = _REF_PAIR.sub("", text)
    text = _REF_SELF.sub("", text)
    text = _BLOCK_TAGS.sub("", text)
    text = _strip_templates(text, infoboxes)
    text = _HEADING.sub("\n", text)
    text = _EXTLINK.sub(lambda m: m.group(1) or "", text)
    text = _BOLD_ITALIC.sub("", text)
    text = _TAG.sub("", text)
    text = _MAGIC.sub("", text)
    text = html.unescape(text)
    text = _LIST.sub("", text)
    paragraphs: list[Paragraph] = []
    for block in re.split(r"\n\s*\n", text):
        block = block.replace("\n", " ")
        para = _links(block, prefixes)
        # collapse whitespace while keeping link offsets valid
        para = _collapse(para)
        if para.text:
            paragraphs.append(para)
    return ParsedPage(paragraphs, infoboxes)


def _collapse(para: Paragraph) -> Paragraph:
    text = para.text
    keep: list[int] = []  # new index for every old index
    out: list[str] = []
    prev_space = True
    for ch in text:
        if ch in " \t\u00a0\r":
            if prev_space:
                keep.append(len(out))
                continue
            out.append(" ")
            prev_space = True
        else:
            out.append(ch)
            prev_space = False
        keep.append(len(out) - 1)
    keep.append(len(out))
    while out and out[-1] == " ":
        out.pop()
    new_text = "".join(out)
    links = []
    for ln in para.links:
        s = keep[ln.start]
        if ln.start < len(text) and text[ln.start] in " \t\u00a0\r":
            s += 1
        e = keep[ln.end - 1] + 1 if ln.end > ln.start else s
        e = min(e, len(new_text))
        if e > s and new_text[s:e].strip():
            links.append(LinkSpan(s, e, ln.target, new_text[s:e]))
    return Paragraph(new_text, links)
