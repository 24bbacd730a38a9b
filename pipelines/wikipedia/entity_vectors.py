"""Entity vectors for EASE: Wikipedia2Vec models trained on a dump (or loaded pretrained), exported to Parquet.

EASE (methods §4.1, §4.4) initialises its entity table from Wikipedia2Vec (``get_entity_vector(title)``); its entity
vocabulary is the Wikipedia2Vec entities with link count > 10 (:func:`model_entities`) and the vector dimension must
equal the encoder's hidden size (768 for BERT-base). This module

* trains a model with the ``wikipedia2vec`` package (:func:`train_model`: dump DB → dictionary → link graph →
  mention DB → train), or checks a pretrained ``.pkl`` (:func:`load_pretrained`);
* exports only the vocabulary's rows (:func:`export_vectors`): Parquet ``entity`` (str key, a QID or ``"en:Title"``),
  ``title`` (str, as given), ``vector`` (``fixed_size_list<float32>[dim]``). Wikipedia2Vec's word2vec text export is not
  used: it does not read back (a token contains a newline, titles contain U+00A0), and the full model does not fit
  in memory for large dumps (EASE issue #9), so only the needed rows are read from the memory-mapped model;
* looks each vocabulary entity up by its title in the model's language (:func:`vocabulary_titles`): its page there,
  else its Wikidata sitelink to that Wikipedia. Wikipedia2Vec's entities are link *targets* — every title linked
  ``min_entity_count`` times gets a vector, whether its page is in the dump or not — so taking titles from pages alone
  dropped every linked entity whose own page is absent (issue 51: trained on the English sample, the model has 11 of
  the EASE kit's 16 entities, but only 2 got their vector — of the 5 whose page is in the sample, the 2 linked at
  least 5 times; "United States", "China" and 7 more have no page there. With sitelinks all 11 get theirs). An
  entity keyed by a linked title with neither a page nor a QID (``corpora.entities.unlinked_titles: title``, EASE's
  monolingual setting without Wikidata) is looked up by that title (``entity_link_titles``).

``wikipedia2vec`` (optional extra ``entity-vectors``, pinned to 2.0.0: a binary manylinux wheel, no compiler) is
imported inside functions, so this module imports without it. No torch, no prefect.

The link-graph crash of wikipedia2vec 2.0.0 and the fix
-------------------------------------------------------
``wikipedia2vec train`` (and ``train-embedding --link-graph``) fails in the training workers with::

    File "wikipedia2vec/link_graph.py", line 39, in wikipedia2vec.link_graph.LinkGraph.neighbor_indices
    IndexError: index 275 is out of bounds for axis 0 with size 274

(English sample: 277 entities, so ``indptr`` must have 278 entries.) Cause, in ``link_graph.py``:
``LinkGraph.build`` collects (page, link target) entity pairs, symmetrises them and builds
``coo_matrix((ones, (rows, cols)), dtype=bool)`` **without** ``shape=``. scipy then infers the shape as
``(max(rows) + 1, max(cols) + 1)``, so ``tocsr().indptr`` has ``max linked index + 2`` entries instead of
``entity_size + 1``. An entity is "linked" only if it is a dictionary entity whose page links to a dictionary entity
or is linked from such a page; dictionary entities come from link *counts* (``min_entity_count``), so many have no
edge: red links and pages outside the dump (common in samples), targets linked only from pages that are themselves not
entities. Whenever the entities with the highest dictionary (marisa-trie) indices are all edgeless, the matrix is too
short. Training then walks *every* entity index (``Wikipedia2Vec._build_link_indices`` is a permutation of all of
them) and ``LinkGraph.neighbor_indices`` reads ``indptr[index + 1]`` past the end. Edgeless entities in the middle
are harmless (empty CSR rows); a dump with no entity-to-entity link at all fails earlier, in ``build-link-graph``
(scipy cannot infer a shape from empty index arrays).

Fix (:func:`build_link_graph`): the offending step is re-implemented in Python with the same output — the same
(page, target) pairs, taken through the public ``DumpDB`` / ``Dictionary`` API with the same rules (pages and
targets looked up with ``Dictionary.get_entity_index``, so redirects resolve and ``#fragment`` targets are dropped, as
upstream), the same symmetric boolean CSR, ``indices`` shifted by ``entity_offset``, a ``LinkGraph`` with the
dictionary's uuid — but the matrix is built with ``shape=(entity_size, entity_size)``, so ``indptr`` always has
``entity_size + 1`` entries (edgeless trailing entities get empty rows). Where upstream does not crash the result is
identical (indices and indptr; see ``tests/test_entity_vectors.py``). Nothing is monkeypatched. Because the builder
relies on 2.0.x internals (the ``LinkGraph(dictionary, indices, indptr, build_params, uuid)`` constructor and the
indptr contract of ``neighbor_indices``), training refuses other wikipedia2vec versions with a clear error.

Cost (measured once; 2 cores shared with other jobs, load average 3–4, so times are noisy): ``train_model`` on
``enwiki-sample.xml.bz2`` (1.7 MB bz2, 106 pages, 8,948 words, 277 entities), dim 50, 1 iteration, link graph on,
mention DB on, pool 2, ``word_neg_power=0.75``, under ``/usr/bin/time -v``: **66.6 s wall, 5.32 GB peak RSS** (dump DB
5.8 s, dictionary 1.3 s, link graph 0.1 s, mention DB 1.5 s, train 56.7 s). The training cost is nearly constant on
small dumps: with ``word_neg_power != 0`` wikipedia2vec builds a 10⁸-entry unigram table for word negatives (17 s, a
Python-level loop) and ``_convert_np_array_to_shared_array_object`` copies it into a shared ``RawArray`` by argument
unpacking (10⁸ Python objects: the ~5 GB and most of the remaining time). Replacing that copy by
``np.frombuffer(raw)[:] = arr`` (tried, not applied here) gives 36.6 s and 1.03 GB. ``word_neg_power=0`` (uniform word
negatives) skips the table: same run 18.4 s wall, 0.26 GB peak RSS — for tests, not for real models.

Reproducibility: ``seed`` fixes the initial weights, the link-walk order and the page order. The training workers
reseed from OS entropy (``np.random.seed()`` in their initialiser) and update the shared weights asynchronously
(Hogwild): with several workers two runs give different vectors. With ``pool_size: 1`` :func:`_deterministic_workers`
derives the worker's seed from ``seed`` and the vectors are identical run to run (tested), which the pipeline's
byte-identical rebuilds need.

Those seeds live in the *process-wide* ``random`` and ``numpy.random`` streams, and wikipedia2vec draws the page
order (``random.shuffle``) in its pool's task-handler thread, a moment after the weights. Any other thread of the
process that draws from ``random`` in between shifts the stream. In a ``polysent run`` such threads exist: Prefect's
event client draws a ``random.getrandbits(32)`` mask for every websocket frame it sends (task-run state events of the
other nodes, or of the previous task on the same Dask worker, sent asynchronously) and Prefect names runs with
``coolname`` (``random.randrange``); a Dask worker's own threads draw too. Whether a draw lands inside that window
depends on timing, so the Dask run and the thread pool gave different vectors now and then, mostly on a busy machine
(issue 21). So all training steps run in a fresh child interpreter (:func:`_train_in_child`) that has no other thread
drawing numbers, with fixed thread counts and hash seed (:data:`TRAIN_ENV`), whichever process starts it (a Prefect
thread, a Dask worker, a test); on a quiet machine its vectors are the same bytes as before. The child and its pool
workers die with the process that started it (``pipelines/worker_lifetime.py``). Measured with
``python -m bench.entity_vectors_determinism --repeat 10`` (the stage on the sample, 2 CPU burners on 2 shared cores):
before, the stage on a Dask LocalCluster worker gave the quiet run's bytes 4 times in 10, on a thread beside a thread
drawing ``random`` every millisecond 0 times in 10; after, 10/10 and 10/10.

Only load trusted model files: ``.pkl`` models are unpickled (joblib).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from importlib import metadata
from multiprocessing.pool import Pool
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from uuid import uuid1

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, model_validator

from contract import StageResult
from pipelines.wikipedia.artifact_tables import scan_table
from pipelines.wikipedia.wikitext import normalize_title
from pipelines.worker_lifetime import die_with, fork_children_die_with_me
from warehouse.atomic import atomic_path, write_text_atomic

if TYPE_CHECKING:  # wikipedia2vec is optional: only for annotations
    from wikipedia2vec import Dictionary, DumpDB, Wikipedia2Vec
    from wikipedia2vec.link_graph import LinkGraph

log = logging.getLogger("polysent.pipelines.wiki.entity_vectors")

SUPPORTED_WIKIPEDIA2VEC = "2.0."  # train_model / build_link_graph rely on 2.0.x internals (see module docstring)
_CHUNK_SIZE = 100  # pages per worker task, the wikipedia2vec CLI default
_MAX_REDIRECT_HOPS = 10  # as DumpDB.resolve_redirect
_MISSING_LOGGED = 10


class EntityModelError(ValueError):
    """A file that is not a usable Wikipedia2Vec model (or has the wrong dimension)."""


class EntityVectorSettings(BaseModel):
    """Where EASE's entity vectors come from and how a Wikipedia2Vec model is trained."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    mode: Literal["train", "pretrained", "none"] = "none"
    """``train``: train Wikipedia2Vec on the dump; ``pretrained``: use the model file ``pretrained``; ``none``: no
    Wikipedia2Vec vectors (entity embeddings start random)."""
    language: str = "en"
    """The wiki whose dump trains the model (or whose titles a pretrained model uses); entities are looked up by
    their title in this language (EASE: English Wikipedia2Vec vectors shared by all languages)."""
    pretrained: Path | None = None
    """A Wikipedia2Vec ``.pkl`` model file (``Wikipedia2Vec.save`` / the released ``*_<dim>d.pkl``); required when
    mode is ``pretrained``, ignored otherwise."""
    dim: int = Field(768, ge=1)
    """Vector dimension; must equal the encoder's hidden size when EASE uses the vectors (768 for BERT-base). A
    pretrained model of another dimension is an error."""
    iterations: int = Field(5, ge=1)
    """Passes over the dump's pages (wikipedia2vec ``--iteration``): 5, wikipedia2vec's default, which the EASE paper
    kept. Fewer is faster (the sample pipeline sets 1)."""
    window: int = Field(5, ge=1)
    """Maximum distance between a word/anchor and a context word (``--window``)."""
    negative: int = Field(5, ge=1)
    """Negative samples per positive pair (``--negative``)."""
    min_entity_count: int = Field(5, ge=1)
    """Entities linked fewer times than this (redirects merged) are not in the dictionary (``--min-entity-count``)."""
    min_word_count: int = Field(5, ge=1)
    """Words occurring fewer times than this are not in the dictionary (``--min-word-count``)."""
    link_graph: bool = True
    """Also learn from the link graph (entity → neighbouring entities), built with the shape fix of this module."""
    link_mentions: bool = True
    """Build a mention DB and treat unlinked mentions of entity names as links (wikipedia2vec's default
    ``--link-mentions``)."""
    word_neg_power: float = Field(0.75, ge=0.0)
    """Word negatives ∝ count^power (``--word-neg-power``). 0 = uniform, which skips wikipedia2vec's 10⁸-entry unigram
    table (~5 GB RSS and ~45 s per run whatever the dump size): for tests only."""
    tokenizer: Literal["icu", "regexp", "mecab", "jieba"] | None = None
    """Word tokenizer; None = wikipedia2vec's default for the dump's language (ICU where PyICU imports, else regexp;
    MeCab for ja, jieba for zh)."""
    pool_size: int = Field(2, ge=1)
    """Worker processes for every step (wikipedia2vec's CLI default is all cores)."""
    seed: int = 13
    """Seeds initial weights, link walk and page order; with ``pool_size: 1`` training is reproducible (the worker's
    seed is derived from it), with more workers updates race and vectors differ from run to run."""

    @model_validator(mode="after")
    def _pretrained_needs_a_file(self) -> EntityVectorSettings:
        if self.mode == "pretrained" and self.pretrained is None:
            raise ValueError("entity vectors: mode 'pretrained' needs `pretrained` (a Wikipedia2Vec .pkl model file)")
        return self


# --------------------------------------------------------------------------------------------------- wikipedia2vec


def _import_wikipedia2vec(*, internals: bool) -> Any:
    """Import wikipedia2vec with a clear error; with ``internals``, insist on the 2.0.x line this module fixes."""
    try:
        import wikipedia2vec
    except ImportError as exc:
        raise ImportError(
            "entity vectors need the optional `wikipedia2vec` package: pip install 'polysent[entity-vectors]' "
            "(wikipedia2vec==2.0.0)"
        ) from exc
    version = metadata.version("wikipedia2vec")
    if internals and not version.startswith(SUPPORTED_WIKIPEDIA2VEC):
        raise RuntimeError(
            f"wikipedia2vec {version} is installed, but polysent's link-graph builder and training wrapper are written "
            f"for wikipedia2vec {SUPPORTED_WIKIPEDIA2VEC}x (they construct LinkGraph(dictionary, indices, indptr, "
            "build_params, uuid) and rely on indptr having entity_size + 1 entries); install wikipedia2vec==2.0.0 or "
            "re-check pipelines/wikipedia/entity_vectors.py against the new version"
        )
    return wikipedia2vec


# Link graph (the shape fix). Worker state lives in module globals, as in wikipedia2vec's own pools.
_lg_dump_db: DumpDB | None = None
_lg_dictionary: Dictionary | None = None


def _lg_init_worker(owner: int, dump_db: DumpDB, dictionary_obj: dict) -> None:
    from wikipedia2vec import Dictionary

    die_with(owner)  # no orphan if the run is killed
    global _lg_dump_db, _lg_dictionary
    _lg_dump_db = dump_db
    _lg_dictionary = Dictionary.load(dictionary_obj)


def _lg_page_links(title: str) -> tuple[int, np.ndarray] | None:
    """(page row, target rows) for one page, rows = entity index − entity_offset; None if the page is no entity."""
    assert _lg_dump_db is not None and _lg_dictionary is not None
    page_index = _lg_dictionary.get_entity_index(title)
    if page_index == -1:
        return None
    targets = [
        index
        for paragraph in _lg_dump_db.get_paragraphs(title)
        for link in paragraph.wiki_links
        if (index := _lg_dictionary.get_entity_index(link.title)) != -1
    ]
    offset = _lg_dictionary.entity_offset
    return page_index - offset, np.asarray(targets, dtype=np.int32) - np.int32(offset)


def build_link_graph(
    dump_db: DumpDB, dictionary: Dictionary, pool_size: int = 2, chunk_size: int = _CHUNK_SIZE,
    progressbar: bool = True,
) -> LinkGraph:
    """``LinkGraph.build`` of wikipedia2vec 2.0.x with the matrix shape fixed to ``(entity_size, entity_size)``.

    Same pairs and output format as upstream (symmetric boolean CSR, ``indices`` offset by ``entity_offset``, int32),
    but ``indptr`` always has ``entity_size + 1`` entries, so training never indexes past it.
    """
    _import_wikipedia2vec(internals=True)
    from scipy.sparse import coo_matrix
    from tqdm import tqdm
    from wikipedia2vec.link_graph import LinkGraph

    start = time.time()
    n = dictionary.entity_size
    page_rows: list[np.ndarray] = []
    target_rows: list[np.ndarray] = []
    pages_with_entity = 0
    init_args = (os.getpid(), dump_db, dictionary.serialize(shared_array=True))
    with closing(Pool(pool_size, initializer=_lg_init_worker, initargs=init_args)) as pool, tqdm(
        total=dump_db.page_size(), mininterval=0.5, disable=not progressbar, desc="link graph"
    ) as bar:
        for ret in pool.imap_unordered(_lg_page_links, dump_db.titles(), chunksize=chunk_size):
            if ret is not None:
                page_row, targets = ret
                pages_with_entity += 1
                page_rows.append(np.full(len(targets), page_row, dtype=np.int32))
                target_rows.append(targets)
            bar.update(1)
    pool.join()

    src = np.concatenate(page_rows) if page_rows else np.empty(0, dtype=np.int32)
    dst = np.concatenate(target_rows) if target_rows else np.empty(0, dtype=np.int32)
    rows, cols = np.concatenate([src, dst]), np.concatenate([dst, src])  # both directions, as upstream
    matrix = coo_matrix((np.ones(len(rows), dtype=bool), (rows, cols)), shape=(n, n), dtype=bool).tocsr()
    indices = (matrix.indices.astype(np.int64) + dictionary.entity_offset).astype(np.int32)
    indptr = matrix.indptr.astype(np.int32)
    if len(indptr) != n + 1:  # the invariant the upstream builder breaks
        raise AssertionError(f"link graph indptr has {len(indptr)} entries for {n} entities")

    linked = int(np.count_nonzero(np.diff(indptr)))
    build_params = {
        "dump_file": dump_db.dump_file,
        "dump_db": dump_db.uuid,
        "dictionary": dictionary.uuid,
        "build_time": time.time() - start,
        "builder": "polysent.pipelines.wikipedia.entity_vectors.build_link_graph (shape=(entity_size, entity_size))",
    }
    log.info("link graph: %d of %d pages are entities; %d links between entities; %d of %d entities have "
             "neighbours (%d symmetric CSR entries, %.1fs)", pages_with_entity, dump_db.page_size(), len(src), linked,
             n, len(indices), time.time() - start)
    return LinkGraph(dictionary, indices, indptr, build_params, uuid1().hex)


# --------------------------------------------------------------------------------------------------------- training


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed the global ``random`` / ``numpy.random`` (wikipedia2vec uses them in the parent), then restore them."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


@contextmanager
def _deterministic_workers(settings: EntityVectorSettings) -> Iterator[None]:
    """With one worker process, make training reproducible.

    wikipedia2vec's worker initialiser calls ``np.random.seed()`` (OS entropy) and draws its C++ ``mt19937`` seed
    from it; with ``pool_size == 1`` there are no concurrent updates either, so seeding that call from
    ``settings.seed`` makes the model identical from run to run (the artifact is then byte-reproducible, which the
    pipeline's kill-and-rerun guarantee needs). The worker inherits the patched function only when it is *forked*:
    wikipedia2vec's ``Pool`` takes the default start method, which is not ``fork`` everywhere (``spawn`` on macOS
    and in a process that multiprocessing spawned; ``forkserver`` from Python 3.14 on Linux) — so the default is set
    to ``fork`` for the duration where the platform has it. Forking is safe here: this runs in the single-threaded
    training child (:func:`_train_in_child`). Both are restored here. With several workers updates race (Hogwild),
    so nothing is patched.
    """
    if settings.pool_size != 1:
        yield
        return
    original = np.random.seed
    method = multiprocessing.get_start_method(allow_none=True)
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)
    else:  # pragma: no cover - Windows
        log.warning("entity vectors: this platform cannot fork, so the training worker reseeds from OS entropy and "
                    "the vectors differ from run to run")

    def seed(value: Any = None) -> None:
        original(settings.seed % 2**32 if value is None else value)

    np.random.seed = seed
    try:
        yield
    finally:
        np.random.seed = original
        multiprocessing.set_start_method(method, force=True)


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def train_model(dump: Path, settings: EntityVectorSettings, work: Path, progress: bool = True) -> Path:
    """Train Wikipedia2Vec on a ``*.xml.bz2`` MediaWiki dump; return the model ``.pkl`` (in ``work``).

    Steps (each written atomically into ``work``): ``dump.db`` (LMDB of parsed pages), ``dictionary.pkl``,
    ``link_graph.pkl`` (with the shape fix, if ``settings.link_graph``), ``mention_db.pkl`` (if
    ``settings.link_mentions``), ``model.pkl``, and ``model.json`` (settings, counts, timings).

    The steps run in a child process of their own (:func:`_train_in_child`): wikipedia2vec draws from the
    process-wide ``random`` / ``numpy.random`` streams, which the threads of a Prefect or Dask process draw from
    too (see "Reproducibility" in the module docstring). Errors of the child are raised here with their message.
    """
    _import_wikipedia2vec(internals=True)
    dump, work = Path(dump), Path(work)
    if not dump.is_file():
        raise FileNotFoundError(f"Wikipedia dump not found: {dump}")
    with open(dump, "rb") as fh:
        if fh.read(3) != b"BZh":
            raise ValueError(f"{dump}: wikipedia2vec reads bz2-compressed MediaWiki XML dumps (*.xml.bz2) only")
    if settings.mode != "train":
        log.warning("train_model called with entity-vector mode %r", settings.mode)
    work.mkdir(parents=True, exist_ok=True)
    return _train_in_child(dump, settings, work, progress)


# the training child's environment: the same thread counts whether it is started by the main process or by a Dask
# worker (whose nanny sets these to 1), and one str hash order
TRAIN_ENV = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_TRAIN_RESULT = ".train-result.json"
_CHILD_ERRORS: dict[str, type[BaseException]] = {
    e.__name__: e for e in (ValueError, FileNotFoundError, RuntimeError, IndexError, ImportError, MemoryError,
                            EntityModelError)}


def _train_in_child(dump: Path, settings: EntityVectorSettings, work: Path, progress: bool) -> Path:
    """Run :func:`_train_here` in a fresh ``python`` process that dies with this one; its model path or its error.

    A fresh interpreter (not a ``multiprocessing`` child: that would import the parent's ``__main__`` and, under
    ``fork``, inherit its threads' state) with :data:`TRAIN_ENV`; it has no thread that draws random numbers while
    the seeded steps run, so the seed alone determines the model.
    """
    result = work / _TRAIN_RESULT
    result.unlink(missing_ok=True)
    request = {"dump": str(dump), "settings": settings.model_dump(mode="json"), "work": str(work),
               "progress": progress, "owner": os.getpid()}
    root = str(Path(__file__).resolve().parents[2])  # the folder holding `pipelines`
    env = {**os.environ, **TRAIN_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    code = "import sys; from pipelines.wikipedia.entity_vectors import _train_child; _train_child(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(request)], env=env, stdin=subprocess.DEVNULL,
                          check=False)
    try:
        outcome = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        outcome = {}
    finally:
        result.unlink(missing_ok=True)
    if proc.returncode == 0 and "model" in outcome:
        return Path(outcome["model"])
    if "error" in outcome:
        error = _CHILD_ERRORS.get(outcome["error"])
        if error is None:
            raise RuntimeError(f"entity vectors: training failed: {outcome['error']}: {outcome['message']}")
        raise error(outcome["message"])
    how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
    raise RuntimeError(f"entity vectors: the wikipedia2vec training process ended without a model ({how}; "
                       f"dump {dump}, work folder {work}); its log is on stderr")


def _train_child(request: str) -> None:
    """Entry point of the training child (see :func:`_train_in_child`): train, report the model or the error."""
    req = json.loads(request)
    die_with(int(req["owner"]))  # a kill -9 of the run takes this process ...
    fork_children_die_with_me()  # ... and wikipedia2vec's pool workers with it
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(req["work"])
    try:
        model = _train_here(Path(req["dump"]), EntityVectorSettings.model_validate(req["settings"]), work,
                            bool(req["progress"]))
        outcome: dict[str, str] = {"model": str(model)}
    except Exception as exc:
        log.exception("entity vectors: training failed")
        outcome = {"error": type(exc).__name__, "message": str(exc)}
    write_text_atomic(work / _TRAIN_RESULT, json.dumps(outcome))
    sys.exit(0 if "model" in outcome else 1)


def _train_here(dump: Path, settings: EntityVectorSettings, work: Path, progress: bool) -> Path:
    """The training steps of :func:`train_model`, in this process: the dump DB, the dictionary, the link graph and the
    mention DB (each written to ``work`` and timed), then the model; ``work/model.json`` records what was built."""
    from wikipedia2vec.utils.tokenizer import get_default_tokenizer, get_tokenizer

    timings: dict[str, float] = {}
    counts: dict[str, int] = {}
    total = time.time()
    dump_db = _dump_db(dump, settings, work, counts, timings)
    if settings.tokenizer is None:
        tokenizer = get_default_tokenizer(dump_db.language)
    else:
        tokenizer = get_tokenizer(settings.tokenizer, dump_db.language)
    log.info("tokenizer: %s", type(tokenizer).__name__)
    dictionary = _dictionary(dump, dump_db, tokenizer, settings, work, progress, counts, timings)
    link_graph = _link_graph(dump_db, dictionary, settings, work, progress, counts, timings) \
        if settings.link_graph else None
    mention_db = _mention_db(dump_db, dictionary, tokenizer, settings, work, progress, counts, timings) \
        if settings.link_mentions else None
    model_path = _train(dump_db, dictionary, link_graph, mention_db, tokenizer, settings, work, progress, timings)
    timings["total"] = time.time() - total
    log.info("model: wrote %s (%s): %d × %d float32 (%.1fs; all steps %.1fs)", model_path, _size(model_path),
             len(dictionary), settings.dim, timings["train"], timings["total"])

    meta = {
        "dump": str(dump), "wikipedia2vec": metadata.version("wikipedia2vec"), "language": dump_db.language,
        "settings": settings.model_dump(mode="json"), "counts": counts,
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
    }
    write_text_atomic(work / "model.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return model_path


def _dump_db(dump: Path, settings: EntityVectorSettings, work: Path, counts: dict[str, int],
             timings: dict[str, float]) -> Any:
    """wikipedia2vec's ``DumpDB`` of the dump, written to ``work/dump.db``; its page and redirect counts."""
    from wikipedia2vec import DumpDB
    from wikipedia2vec.utils.wiki_dump_reader import WikiDumpReader

    t = time.time()
    db_path = work / "dump.db"
    log.info("entity vectors: reading dump %s (%s) → %s", dump, _size(dump), db_path)
    reader = WikiDumpReader(str(dump))
    with atomic_path(db_path) as tmp:
        DumpDB.build(reader, str(tmp), pool_size=settings.pool_size, chunk_size=_CHUNK_SIZE)
        Path(f"{tmp}-lock").unlink(missing_ok=True)  # LMDB's lock file; readers open the DB with lock=False
    dump_db = DumpDB(str(db_path))
    counts["pages"] = dump_db.page_size()
    counts["redirects"] = sum(1 for _ in dump_db.redirects())
    timings["dump_db"] = time.time() - t
    log.info("dump DB: wrote %s (%s): %d pages, %d redirects, language %r (%.1fs)", db_path, _size(db_path),
             counts["pages"], counts["redirects"], dump_db.language, timings["dump_db"])
    return dump_db


def _dictionary(dump: Path, dump_db: Any, tokenizer: Any, settings: EntityVectorSettings, work: Path, progress: bool,
                counts: dict[str, int], timings: dict[str, float]) -> Any:
    """The word and entity ``Dictionary`` (by ``min_word_count`` / ``min_entity_count``), written to
    ``work/dictionary.pkl``; ``ValueError`` when it holds no entity."""
    from wikipedia2vec import Dictionary

    t = time.time()
    dic_path = work / "dictionary.pkl"
    dictionary = Dictionary.build(
        dump_db, tokenizer, lowercase=True, min_word_count=settings.min_word_count,
        min_entity_count=settings.min_entity_count, min_paragraph_len=5, category=False, disambi=False,
        pool_size=settings.pool_size, chunk_size=_CHUNK_SIZE, progressbar=progress,
    )
    with atomic_path(dic_path) as tmp:
        dictionary.save(str(tmp))
    counts["words"], counts["entities"] = dictionary.word_size, dictionary.entity_size
    timings["dictionary"] = time.time() - t
    log.info("dictionary: wrote %s: %d words (count ≥ %d), %d entities (link count ≥ %d) (%.1fs)", dic_path,
             dictionary.word_size, settings.min_word_count, dictionary.entity_size, settings.min_entity_count,
             timings["dictionary"])
    if dictionary.entity_size == 0:
        raise ValueError(f"{dump}: no entity is linked ≥ {settings.min_entity_count} times; lower min_entity_count")
    return dictionary


def _link_graph(dump_db: Any, dictionary: Any, settings: EntityVectorSettings, work: Path, progress: bool,
                counts: dict[str, int], timings: dict[str, float]) -> Any:
    """The link graph (:func:`build_link_graph`), written to ``work/link_graph.pkl``."""
    t = time.time()
    lg_path = work / "link_graph.pkl"
    link_graph = build_link_graph(dump_db, dictionary, settings.pool_size, _CHUNK_SIZE, progress)
    with atomic_path(lg_path) as tmp:
        link_graph.save(str(tmp))
    counts["link_graph_edges"] = len(link_graph.serialize()["indices"])
    timings["link_graph"] = time.time() - t
    log.info("link graph: wrote %s (%s)", lg_path, _size(lg_path))
    return link_graph


def _mention_db(dump_db: Any, dictionary: Any, tokenizer: Any, settings: EntityVectorSettings, work: Path,
                progress: bool, counts: dict[str, int], timings: dict[str, float]) -> Any:
    """The ``MentionDB`` (wikipedia2vec's defaults: link probability ≥ 0.2, prior ≥ 0.01, mentions of ≤ 20
    characters, case-insensitive), written to ``work/mention_db.pkl``."""
    from wikipedia2vec.mention_db import MentionDB

    t = time.time()
    mention_path = work / "mention_db.pkl"
    mention_db = MentionDB.build(
        dump_db, dictionary, tokenizer, min_link_prob=0.2, min_prior_prob=0.01, max_mention_len=20,
        case_sensitive=False, pool_size=settings.pool_size, chunk_size=_CHUNK_SIZE, progressbar=progress,
    )
    with atomic_path(mention_path) as tmp:
        mention_db.save(str(tmp))
    counts["mentions"] = len(mention_db.mention_trie)
    timings["mention_db"] = time.time() - t
    log.info("mention DB: wrote %s: %d mention names (%.1fs)", mention_path, counts["mentions"],
             timings["mention_db"])
    return mention_db


def _train(dump_db: Any, dictionary: Any, link_graph: Any, mention_db: Any, tokenizer: Any,
           settings: EntityVectorSettings, work: Path, progress: bool, timings: dict[str, float]) -> Path:
    """The Wikipedia2Vec model trained (seeded, its workers deterministic) and written to ``work/model.pkl``."""
    from wikipedia2vec import Wikipedia2Vec

    t = time.time()
    model_path = work / "model.pkl"
    log.info("training: dim %d, %d iteration(s), window %d, negative %d, link graph %s, mentions %s, pool %d",
             settings.dim, settings.iterations, settings.window, settings.negative, settings.link_graph,
             settings.link_mentions, settings.pool_size)
    model = Wikipedia2Vec(dictionary)
    with _seeded(settings.seed), _deterministic_workers(settings):
        model.train(
            dump_db, link_graph, mention_db, tokenizer, None, dim_size=settings.dim, init_alpha=0.025,
            min_alpha=0.0001, window=settings.window, negative=settings.negative,
            word_neg_power=settings.word_neg_power, entity_neg_power=0.0, sample=1e-4,
            iteration=settings.iterations, entities_per_page=10, pool_size=settings.pool_size,
            chunk_size=_CHUNK_SIZE, progressbar=progress,
        )
    with atomic_path(model_path) as tmp:
        model.save(str(tmp))
    timings["train"] = time.time() - t
    return model_path


# ------------------------------------------------------------------------------------------------------ loading


def load_pretrained(path: Path, dim: int | None = None) -> Wikipedia2Vec:
    """Load a Wikipedia2Vec ``.pkl`` model (vectors memory-mapped); with ``dim``, check its dimension.

    Raises ``FileNotFoundError`` for a missing file and :class:`EntityModelError` for a file that is not a
    Wikipedia2Vec model or whose dimension differs from ``dim``.
    """
    _import_wikipedia2vec(internals=False)
    from wikipedia2vec import Dictionary, Wikipedia2Vec

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Wikipedia2Vec model file not found: {path}")
    try:
        model = Wikipedia2Vec.load(str(path))
    except Exception as exc:  # joblib/pickle raise many types for foreign files
        raise EntityModelError(
            f"{path}: not a Wikipedia2Vec model file (a .pkl written by Wikipedia2Vec.save, not the text format); "
            f"loading failed with {type(exc).__name__}: {exc}"
        ) from exc
    syn0 = getattr(model, "syn0", None)
    if not isinstance(model.dictionary, Dictionary) or syn0 is None or getattr(syn0, "ndim", 0) != 2:
        raise EntityModelError(f"{path}: not a Wikipedia2Vec model file (no 2-D syn0 vector matrix)")
    if syn0.shape[0] != len(model.dictionary):
        raise EntityModelError(f"{path}: {syn0.shape[0]} vectors for {len(model.dictionary)} dictionary items")
    if dim is not None and syn0.shape[1] != dim:
        raise EntityModelError(
            f"{path}: the Wikipedia2Vec model has dimension {syn0.shape[1]}, but dimension {dim} is configured "
            "(entity vectors must match the encoder hidden size); use a model of that dimension or train one"
        )
    return model


def model_for(settings: EntityVectorSettings, work: Path, dump: Path | None = None) -> Path | None:
    """The model file ``settings`` asks for: trained into ``work``, the checked pretrained file, or None."""
    if settings.mode == "none":
        return None
    if settings.mode == "pretrained":
        assert settings.pretrained is not None  # validated
        load_pretrained(settings.pretrained, dim=settings.dim)
        return Path(settings.pretrained)
    if dump is None:
        raise ValueError("entity vectors: mode 'train' needs a Wikipedia dump")
    return train_model(dump, settings, work)


def model_entities(model_path: Path, min_count: int = 0) -> pl.DataFrame:
    """The model's entities: ``title``, ``count`` (anchor links), ``doc_count`` (pages linking), count ≥ min_count.

    EASE's entity vocabulary is ``count > 10`` (methods §4.4): ``model_entities(path, min_count=11)``.
    """
    model = load_pretrained(model_path)
    rows = [(e.title, e.count, e.doc_count) for e in model.dictionary.entities() if e.count >= min_count]
    return pl.DataFrame(rows, schema={"title": pl.Utf8, "count": pl.Int64, "doc_count": pl.Int64}, orient="row")


# ------------------------------------------------------------------------------------------------------- export


def _pairs(entities: Iterable[tuple[str, str]] | pl.DataFrame) -> list[tuple[str, str]]:
    if isinstance(entities, pl.DataFrame):
        missing = {"entity", "title"} - set(entities.columns)
        if missing:
            raise ValueError(f"entities frame needs columns entity and title; missing {sorted(missing)}")
        return list(entities.select(pl.col("entity").cast(pl.Utf8), pl.col("title").cast(pl.Utf8)).iter_rows())
    return [(str(e), str(t)) for e, t in entities]


def _follow(title: str, redirects: Mapping[str, str]) -> str:
    seen = {title}
    for _ in range(_MAX_REDIRECT_HOPS):
        nxt = redirects.get(title)
        if nxt is None or nxt in seen:
            break
        seen.add(nxt)
        title = nxt
    return title


def _lookup(dictionary: Dictionary, title: str, redirects: Mapping[str, str] | None) -> tuple[int, str]:
    """Entity index of ``title`` (or -1) and how it was found.

    Order: as given (``exact``, then the model's own redirect table: ``model_redirect``), through ``redirects``
    (``redirect``), first letter upper-cased / fragment dropped / underscores as spaces (``normalised``, then
    ``normalised_redirect``).
    """

    def probe(candidate: str) -> tuple[int, str]:
        index = dictionary.get_entity_index(candidate, resolve_redirect=False)
        if index != -1:
            return index, ""
        index = dictionary.get_entity_index(candidate, resolve_redirect=True)
        return index, "model_redirect" if index != -1 else ""

    if not title:
        return -1, ""
    index, how = probe(title)
    if index != -1:
        return index, how or "exact"
    if redirects:
        target = _follow(title, redirects)
        if target != title and (index := probe(target)[0]) != -1:
            return index, "redirect"
    norm = normalize_title(title)  # MediaWiki's normalisation, as for link targets
    if norm and norm != title:
        if (index := probe(norm)[0]) != -1:
            return index, "normalised"
        if redirects:
            target = _follow(norm, redirects)
            if target != norm and (index := probe(target)[0]) != -1:
                return index, "normalised_redirect"
    return -1, ""


def export_vectors(
    model_path: Path, entities: Iterable[tuple[str, str]] | pl.DataFrame, out: Path, dim: int,
    redirects: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write the vectors of ``entities`` (``(entity, title)`` pairs) found in the model to Parquet ``out``.

    Columns: ``entity`` (str), ``title`` (str, as given), ``vector`` (``fixed_size_list<float32>[dim]``); one row per
    distinct entity key that the model knows (see :func:`_lookup` for the title look-up order); entities not found are
    counted and the first few logged. ``dim`` must equal the model's dimension. Written atomically. Returns counts.
    """
    model = load_pretrained(model_path, dim=dim)
    dictionary = model.dictionary
    pairs = _pairs(entities)
    seen: set[str] = set()
    keys: list[str] = []
    titles: list[str] = []
    indices: list[int] = []
    missing: list[str] = []
    how_counts: dict[str, int] = {}
    duplicates = 0
    for key, title in pairs:
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        index, how = _lookup(dictionary, title, redirects)
        if index == -1:
            missing.append(title)
            continue
        how_counts[how] = how_counts.get(how, 0) + 1
        keys.append(key)
        titles.append(title)
        indices.append(index)

    vectors = np.asarray(model.syn0[np.asarray(indices, dtype=np.int64)], dtype=np.float32).reshape(len(indices), dim)
    non_finite = int((~np.isfinite(vectors).all(axis=1)).sum()) if len(indices) else 0
    schema = pa.schema([("entity", pa.string()), ("title", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    table = pa.Table.from_arrays(
        [pa.array(keys, pa.string()), pa.array(titles, pa.string()),
         pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim)],
        schema=schema,
    )
    out = Path(out)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)

    stats: dict[str, Any] = {
        "out": str(out), "model": str(model_path), "dim": dim, "requested": len(pairs),
        "duplicate_keys": duplicates, "found": len(keys), "missing": len(missing), "found_by": how_counts,
        "missing_examples": missing[:_MISSING_LOGGED], "non_finite_rows": non_finite,
    }
    log.info("entity vectors: read %s; wrote %s: %d of %d entities found (%s), %d missing%s", model_path, out,
             len(keys), len(pairs) - duplicates, ", ".join(f"{k} {v}" for k, v in sorted(how_counts.items())) or "-",
             len(missing), f", e.g. {missing[:_MISSING_LOGGED]}" if missing else "")
    if duplicates:
        log.warning("entity vectors: %d duplicate entity keys ignored (first title kept)", duplicates)
    if non_finite:
        log.warning("entity vectors: %d rows with NaN/inf in %s", non_finite, model_path)
    if len(pairs) and not keys:
        log.warning("entity vectors: none of %d titles is in %s (wrong language or title form?)", len(pairs),
                    model_path)
    return stats


# ---------------------------------------------------------------------------------------------------- stage

STAGE_VERSION = "2"  # 2: vocabulary entities without a page in the dump are looked up by their Wikidata sitelink title


def _read_columns(path: Path, columns: tuple[str, ...], what: str) -> pl.DataFrame:
    """``columns`` of the Parquet table ``path`` (an upstream artifact), with errors naming the file and what is
    missing, so a stale or foreign artifact fails here rather than deep inside a join."""
    if not path.is_file():
        raise FileNotFoundError(f"entity vectors: the {what} table is missing: {path}")
    have = pl.read_parquet_schema(path)
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"entity vectors: {path} ({what}) has no column(s) {missing}; it has {sorted(have)}")
    return pl.read_parquet(path, columns=list(columns))


def vocabulary_titles(entities_dir: Path, language: str,
                      wikidata_dir: Path | None = None) -> tuple[pl.DataFrame, dict[str, int]]:
    """The title in ``language`` of each vocabulary entity: ``entity``, ``title``, sorted by entity; and counts.

    A title comes from the entity's page in the dump (``entity_titles``), for an entity keyed by a QID whose page
    the dump lacks from its Wikidata sitelink to the ``<language>`` Wikipedia (``wikidata_sitelinks``), and for an
    entity keyed by a linked title of ``language`` without a page or a QID (``corpora.entities.unlinked_titles:
    title``) from that title (``entity_link_titles`` rows without a ``qid``; there are none by default). Why all:
    Wikipedia2Vec's entities are link *targets* (every title linked at least ``min_entity_count`` times gets a vector,
    whether or not its page is in the dump), so a page-only lookup silently drops every linked entity whose own page is
    absent (module docstring). The page title wins where both exist (they agree: ``entities`` keys a page by the
    sitelink of its title).
    ``<lang>:<title>`` keys (no QID) have no sitelink; those of ``language`` are pages or linked titles.
    """
    vocab = _read_columns(entities_dir / "entities.parquet", ("entity", "in_vocab"), "entities").filter("in_vocab")
    pages = (_read_columns(entities_dir / "entity_titles.parquet", ("lang", "entity", "title"), "entity_titles")
             .filter(pl.col("lang") == language).select("entity", "title"))
    unlinked = (_read_columns(entities_dir / "entity_link_titles.parquet", ("lang", "title", "entity", "qid"),
                              "entity_link_titles")
                .filter((pl.col("lang") == language) & pl.col("qid").is_null()).select("entity", "title"))
    frames = [vocab.select("entity").join(pages, on="entity", how="inner").with_columns(pl.lit(0).alias("source")),
              vocab.select("entity").join(unlinked, on="entity", how="inner").with_columns(pl.lit(2).alias("source"))]
    sitelink_rows = 0
    if wikidata_dir is not None:
        links = (_read_columns(wikidata_dir / "wikidata_sitelinks.parquet", ("qid", "lang", "title"),
                               "wikidata_sitelinks")
                 .filter(pl.col("lang") == language).select(pl.col("qid").alias("entity"), "title"))
        sitelink_rows = links.height
        if not sitelink_rows:
            log.warning("entity vectors: %s has no sitelink to the %r Wikipedia (corpora.wikidata.wikis lacks "
                        "'%swiki'?): entities without a %s page in the dump get no title", wikidata_dir, language,
                        language, language)
        frames.append(vocab.select("entity").join(links, on="entity", how="inner")
                      .with_columns(pl.lit(1).alias("source")))
    titles = (pl.concat(frames).sort("entity", "source", maintain_order=True)
              .unique("entity", keep="first", maintain_order=True))
    counts = {"vocabulary": vocab.height, "vocabulary_with_title": titles.height,
              "titles_from_pages": int((titles["source"] == 0).sum()),
              "titles_from_sitelinks": int((titles["source"] == 1).sum()), "sitelinks_in_language": sitelink_rows}
    if by_title := int((titles["source"] == 2).sum()):  # only then: a default run's stats stay as they were
        counts["titles_from_link_titles"] = by_title
    return titles.select("entity", "title"), counts


def build_entity_vectors(settings: EntityVectorSettings, dump: Path | None, entities_dir: Path, wiki_lang_dir: Path,
                         out: Path, wikidata_dir: Path | None = None) -> StageResult:
    """Stage ``entity_vectors``: vectors of the vocabulary entities (``entities`` artifact, ``in_vocab``) by their
    title in ``settings.language`` (:func:`vocabulary_titles`: their page there, else — with the ``wikidata``
    artifact — their sitelink there), from a model trained on ``dump`` or the pretrained file. Redirects of that wiki
    (``wiki_extract`` artifact) resolve titles the model lacks."""
    wanted, title_counts = vocabulary_titles(entities_dir, settings.language, wikidata_dir)
    pages = scan_table(wiki_lang_dir / "wiki_pages")
    redirects = dict(pages.filter(pl.col("is_redirect") & pl.col("redirect_to").is_not_null())
                     .select("title", "redirect_to").collect().iter_rows())
    # the trained model (dump DB, dictionary with a random uuid, timings) is scratch: only the vectors are the
    # artifact, so a rebuild with one worker is byte-identical. It lives inside the node's temporary folder (and is
    # gone before the stage returns), so a killed build's scratch goes with that folder when the next run sweeps it
    with tempfile.TemporaryDirectory(prefix=".wikipedia2vec-", dir=out) as work:
        model = model_for(settings, Path(work), dump)
        assert model is not None, "entity_vectors runs only when mode is not 'none'"
        counts = export_vectors(model, wanted, out / "entity_vectors.parquet", settings.dim, redirects)
    counts = {k: v for k, v in counts.items() if isinstance(v, int | float | str)}
    counts.update(title_counts, language=settings.language)
    log.info("entity vectors: %s of %d vocabulary entities with a %s title (%d from their page, %d from a Wikidata "
             "sitelink, %d a linked title without page or QID; %d in the vocabulary)", counts.get("found", "?"),
             wanted.height, settings.language, title_counts["titles_from_pages"],
             title_counts["titles_from_sitelinks"], title_counts.get("titles_from_link_titles", 0),
             title_counts["vocabulary"])
    return StageResult(tables={"entity_vectors": "entity_vectors.parquet"}, stats=counts)
