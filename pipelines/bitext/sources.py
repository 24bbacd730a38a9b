"""Where bitext comes from: one config entry per source, told apart by ``format`` (default ``moses``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_serializer, model_validator

from pipelines.key_defaults import without_defaults
from pipelines.ntrex_documents import DOCUMENT_IDS, HELD_OUT_EVERY, Documents


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MosesSource(_Strict):
    """Two line-aligned text files (plain, .gz, .bz2, .xz): line i of ``src_file`` translates line i of ``tgt_file``."""

    format: Literal["moses"] = "moses"
    src: str
    tgt: str
    src_file: Path
    tgt_file: Path


class TmxSource(_Strict):
    """A TMX 1.1–1.4 file; ``src``/``tgt`` match each ``<tuv>``'s ``xml:lang`` (or ``lang``) by primary subtag."""

    format: Literal["tmx"]
    path: Path
    src: str
    tgt: str


class NwaySource(_Strict):
    """Multi-way line-aligned files, one per language (NTREX-128, FLORES): line i is the same sentence everywhere.

    Either ``files`` (language → file) or ``dir`` + ``pattern`` with ``{code}`` + ``languages`` (language → the code
    in the file name, e.g. ``de: deu`` for NTREX's ``newstest2019-ref.deu.txt``). Pairs are formed between every pivot
    and every other language present.

    ``documents: train`` / ``held_out`` reads only the lines of NTREX's training / held-out documents
    (``pipelines.ntrex_documents``: every ``held_out_every``-th document held out), from ``document_ids`` (default
    ``dir/DOCUMENT_IDS.tsv``); the ``line`` column keeps the files' own line numbers. Train on ``train`` and score
    xSIM on the ``parallel`` evaluation set with ``documents: held_out``.
    """

    format: Literal["nway"]
    files: dict[str, Path] | None = None
    dir: Path | None = None
    pattern: str | None = None
    languages: dict[str, str] | None = None
    documents: Documents = Field("all", description="all lines, or NTREX's training / held-out documents only")
    held_out_every: int = Field(HELD_OUT_EVERY, ge=2, description="every n-th document is held out")
    document_ids: Path | None = Field(None, description=f"the per-line document ids (default dir/{DOCUMENT_IDS})")

    @model_validator(mode="after")
    def _one_layout(self) -> NwaySource:
        if self.files is None and (self.dir is None or self.pattern is None or not self.languages):
            raise ValueError("give either files: {lang: path} or dir + pattern ('...{code}...') + languages")
        if self.files is not None and self.dir is not None:
            raise ValueError("give files or dir + pattern, not both")
        if self.pattern is not None and "{code}" not in self.pattern:
            raise ValueError(f"pattern {self.pattern!r} must contain '{{code}}'")
        if self.documents != "all" and self.document_ids is None and self.dir is None:
            raise ValueError(f"documents: {self.documents} needs document_ids (the DOCUMENT_IDS.tsv of the files) "
                             "or dir (read as dir/DOCUMENT_IDS.tsv)")
        return self

    @model_serializer(mode="wrap")
    def _key(self, handler: Any) -> Any:
        """The document split stays out of the dump (and cache keys) while unset."""
        return without_defaults(self, handler(self), ("documents", "held_out_every", "document_ids"))

    def document_ids_file(self) -> Path | None:
        """The ids file that ``documents`` reads (``None`` for ``all``)."""
        if self.documents == "all":
            return None
        if self.document_ids is not None:
            return self.document_ids
        assert self.dir is not None
        return self.dir / DOCUMENT_IDS

    def language_files(self) -> dict[str, Path]:
        if self.files is not None:
            return dict(self.files)
        assert self.dir is not None and self.pattern is not None and self.languages is not None
        return {lang: self.dir / self.pattern.format(code=code) for lang, code in self.languages.items()}


class OpusZipSource(_Strict):
    """An OPUS Moses download (``en-es.txt.zip`` holding ``Corpus.en-es.en`` and ``Corpus.en-es.es``)."""

    format: Literal["opus_zip"]
    path: Path
    src: str
    tgt: str


class ParquetSource(_Strict):
    """A Parquet file (or folder of files) with one row per pair."""

    format: Literal["parquet"]
    path: Path
    src: str
    tgt: str
    src_column: str = "src"
    tgt_column: str = "tgt"


class HubSource(_Strict):
    """A hub dataset with a ``translation`` dict per row, e.g. ``Helsinki-NLP/opus-100`` config ``en-es``."""

    format: Literal["hub"]
    hub_id: str
    config: str | None = None
    split: str = "train"
    src: str
    tgt: str
    field: str = "translation"


class MinedSource(_Strict):
    """The pairs a ``mine.<name>`` node mined (``mining.<name>`` in the config): its ``mined_pairs`` table, read as a
    Parquet source with the languages of the mining entry's two sides. The bitext stage treats it as any other source
    (filters, leakage guard, pivot quotas); the node's artifact enters the bitext node's key as an upstream input."""

    format: Literal["mined"]
    mining: str


def _format_of(v: Any) -> str:
    if isinstance(v, dict):
        return v.get("format", "moses")
    return getattr(v, "format", "moses")


BitextSource = Annotated[
    Annotated[MosesSource, Tag("moses")] | Annotated[TmxSource, Tag("tmx")] | Annotated[NwaySource, Tag("nway")]
    | Annotated[OpusZipSource, Tag("opus_zip")] | Annotated[ParquetSource, Tag("parquet")]
    | Annotated[HubSource, Tag("hub")] | Annotated[MinedSource, Tag("mined")],
    Discriminator(_format_of),
]


def source_files(source: Any) -> dict[str, Path]:
    """The local files a source reads (they enter the node's cache key); empty for hub and mined sources (a mined
    source's content enters as its node's artifact)."""
    if isinstance(source, MosesSource):
        return {f"{source.src}-{source.tgt}/{source.src}/{source.src_file.name}": source.src_file,
                f"{source.src}-{source.tgt}/{source.tgt}/{source.tgt_file.name}": source.tgt_file}
    if isinstance(source, TmxSource | OpusZipSource):
        return {f"{source.src}-{source.tgt}/{source.path.name}": source.path}
    if isinstance(source, ParquetSource):
        if source.path.is_dir():
            return {f"{source.src}-{source.tgt}/{p.relative_to(source.path)}": p
                    for p in sorted(source.path.rglob("*.parquet"))}
        return {f"{source.src}-{source.tgt}/{source.path.name}": source.path}
    if isinstance(source, NwaySource):
        ids = source.document_ids_file()
        return {**{f"nway/{lang}/{p.name}": p for lang, p in sorted(source.language_files().items())},
                **({f"nway/{ids.name}": ids} if ids is not None else {})}
    return {}


