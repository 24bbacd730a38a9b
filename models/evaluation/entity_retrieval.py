"""EASE's retrieval witness: sentence → entity retrieval on held-out (sentence, entity) pairs through the entity head.

Why a witness other than the loss: EASE's entity term (Nishikawa et al. 2022, Eq. 2; methods §4.2) scores sentence
z against entity e through the learnable matrix W as cos(z, W·E[e]) / τ_e, and at the paper's τ_e = 10 (multilingual;
100 monolingual) every logit lies in ±0.1, so L_e stays within 0.2 of ln N whatever is learnt. What the term learns
shows in the ranking those cosines induce — the ranking the softmax is taken over — and τ_e does not change a
ranking. So: for each held-out pair (sentence s, linked entity e), rank the candidate entities c by
cos(z_s, head(c)) — the loss's own similarity, with the head as trained (``W · E[c]``, or ``W · E[c] + b`` /
tanh(…) in the code's readings; ``models.objectives.ease.entity_head``) — and report

- ``accuracy``: top-1 accuracy, and ``mrr``: mean reciprocal rank (fractions; ties broken at random in expectation:
  a pair tied with t other candidates at the top scores 1/(t+1), so a head that scores every entity alike sits
  exactly at chance);
- ``chance`` = mean over pairs of 1/|C_p| (and ``chance_mrr`` = mean H(|C_p|)/|C_p|, H the harmonic number): what
  a ranking that ignores both sentence and entity scores;
- ``blind``: the largest share of pairs one entity is the answer to — the top-1 accuracy of a sentence-blind
  ranking that always names that entity (the held-out set's own majority: a ceiling for any constant ranking). With
  skewed entities (the kit's: mostly countries, one in three pairs the same) a head that learnt the entity prior
  alone reaches it; above it, the ranking reads the sentence;
- ``balanced``: top-1 averaged per entity first (the mean over answer entities of the share of their pairs ranked
  first; ``weights`` = 1 / (entities × the entity's pairs)). Every sentence-blind ranking scores exactly chance on it
  (1/C: the one entity it names first gets 1, the others 0), so it cannot move by which entity happens to rank first
  for most sentences — under a random W₀ that entity is a draw, and an encoder drift of the sentences' common
  direction can change it, swinging ``accuracy`` by up to ``blind`` without any sentence being read.

Candidates ``C_p``: the candidate entities (by default every entity that is the answer to some held-out pair) minus
the *other* entities linked from the same sentence (a sentence with k links is k pairs; the filtered setting of link
prediction, so a sentence is not penalised for naming its other link first). ``per_pair`` keeps each pair's expected
top-1 (for a paired standard error of a difference between two heads or encoders on the same pairs).

``witness`` embeds the sentences (``SentenceEncoder.encode``, eval mode, L2-normalised: exactly the cosine the loss
takes; the training forward adds dropout, which the witness leaves out) and the candidates through the head, then
ranks (``rank_entities``, numpy). ``read_pairs`` reads a held-out table (``text``, ``entity`` columns; the kit's
``eval_entity_pairs``, disjoint in sentences and pages from the training pairs: ``experiments.ease_corpus``).

``witness_run`` scores a trained run against its own start: the trained encoder through the trained head, and the
start encoder through the head as it was initialised (same W₀, same entity table: the file the run wrote,
``entity_head.save_heads``) — the retrieval at step 0 of that very run. Their difference (``gain``) is what training
did to the quantity the entity loss optimises; a run without the entity term (λ = 0) keeps its head at W₀ (up to
weight decay, which changes no cosine), so its gain measures the encoder's drift alone — the control. Why not a head
fitted to the start encoder (least squares): that measures what the start *could* show with an optimal head, a bar
the run's head, trained by the softmax for a few dozen steps, is not aiming at; the gain would then mix how far W
got with whether the term acted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    from models.encoder import SentenceEncoder

__all__ = ["EntityRetrieval", "RunWitness", "rank_entities", "read_pairs", "witness", "witness_run"]

log = logging.getLogger("polysent.models.evaluation.entity_retrieval")


@dataclass
class EntityRetrieval:
    """Sentence → entity retrieval over ``pairs`` held-out pairs (module docstring): fractions in [0, 1]."""

    accuracy: float
    mrr: float
    chance: float
    chance_mrr: float
    blind: float
    balanced: float
    balanced_chance: float
    pairs: int
    sentences: int
    candidates: int
    per_pair: np.ndarray  # each pair's expected top-1 (1/(ties+1) when none ranks above its entity, else 0)
    weights: np.ndarray  # each pair's weight in ``balanced`` (1 / (answer entities × its entity's pairs)): sum 1
    dropped: int = 0  # held-out pairs whose entity the head has no row for (not scored)


def _unit(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    norm = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(norm > 0, norm, 1.0)


def rank_entities(sentences: np.ndarray, entities: np.ndarray, pair_sentence: np.ndarray,
                  pair_entity: np.ndarray) -> EntityRetrieval:
    """Rank every candidate entity for each pair by cosine (module docstring), the pair's other links filtered out.

    Args:
        sentences: S×d sentence embeddings (any scale: cosines are taken).
        entities: C×d candidate entity vectors (the head's outputs); a zero row has cosine 0 with everything.
        pair_sentence: (P,) row of ``sentences`` of each pair.
        pair_entity: (P,) row of ``entities`` that is each pair's answer.

    Returns:
        ``EntityRetrieval`` (``dropped`` 0: the caller counts pairs it could not map).
    """
    pair_sentence = np.asarray(pair_sentence, dtype=np.int64)
    pair_entity = np.asarray(pair_entity, dtype=np.int64)
    n_sent, n_cand = len(sentences), len(entities)
    if pair_sentence.shape != pair_entity.shape or pair_sentence.ndim != 1 or len(pair_sentence) == 0:
        raise ValueError(f"pair_sentence and pair_entity must be equal-length non-empty 1-D arrays, got shapes "
                         f"{pair_sentence.shape} and {pair_entity.shape}")
    if pair_sentence.min() < 0 or pair_sentence.max() >= n_sent or pair_entity.min() < 0 \
            or pair_entity.max() >= n_cand:
        raise ValueError(f"pair indices out of range: {n_sent} sentences, {n_cand} candidate entities")
    scores = _unit(sentences) @ _unit(entities).T  # S×C cosines, float64
    links = np.zeros((n_sent, n_cand), dtype=bool)
    links[pair_sentence, pair_entity] = True  # every entity each sentence links
    rows = scores[pair_sentence]  # P×C
    allowed = ~links[pair_sentence]
    allowed[np.arange(len(pair_entity)), pair_entity] = True  # its own answer stays, its other links go
    own = rows[np.arange(len(pair_entity)), pair_entity][:, None]
    greater = ((rows > own) & allowed).sum(axis=1)
    ties = ((rows == own) & allowed).sum(axis=1) - 1  # other candidates scored exactly alike
    n = allowed.sum(axis=1)
    per_pair = np.where(greater == 0, 1.0 / (ties + 1), 0.0)
    # expected 1/rank with the tied block in random order: ranks greater+1 … greater+ties+1
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n_cand + 1))])
    rr = (harmonic[greater + ties + 1] - harmonic[greater]) / (ties + 1)
    counts = np.bincount(pair_entity, minlength=n_cand)
    weights = 1.0 / (np.count_nonzero(counts) * counts[pair_entity])
    return EntityRetrieval(accuracy=float(per_pair.mean()), mrr=float(rr.mean()), chance=float((1.0 / n).mean()),
                           chance_mrr=float((harmonic[n] / n).mean()), blind=float(counts.max() / len(pair_entity)),
                           balanced=float(weights @ per_pair), balanced_chance=float(weights @ (1.0 / n)),
                           pairs=len(pair_entity), sentences=len(np.unique(pair_sentence)), candidates=n_cand,
                           per_pair=per_pair, weights=weights)


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """``text`` and ``entity`` of a held-out pairs table (a Parquet file or hive-partitioned folder), in file order;
    rows without a text or an entity are skipped."""
    import pyarrow.dataset as ds

    t = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=["text", "entity"])
    texts, ents = t.column("text").to_pylist(), t.column("entity").to_pylist()
    keep = [i for i in range(len(texts)) if texts[i] and ents[i]]
    if not keep:
        raise ValueError(f"{path}: no (text, entity) pair to score")
    return [texts[i] for i in keep], [ents[i] for i in keep]


def _head_vectors(head: Callable[[torch.Tensor], torch.Tensor], ids: np.ndarray) -> np.ndarray:
    import torch

    first = next(head.parameters(), None) if isinstance(head, torch.nn.Module) else None
    device = first.device if first is not None else torch.device("cpu")
    with torch.no_grad():
        return head(torch.as_tensor(ids, dtype=torch.long, device=device)).float().cpu().numpy()


def witness(encoder: SentenceEncoder, head: Callable[[torch.Tensor], torch.Tensor], texts: Sequence[str],
            entity_ids: Sequence[int], candidate_ids: Sequence[int] | None = None, *,
            batch_size: int = 128, sentence_vectors: np.ndarray | None = None) -> EntityRetrieval:
    """Sentence → entity retrieval of held-out pairs (``texts[p]`` links the head's entity ``entity_ids[p]``).

    Args:
        encoder: the sentence encoder (embedded in eval mode, L2-normalised).
        head: the entity head (``EntityHead``: ids → W · E[id]); ids are 1-based, 0 is [PAD].
        texts: the pairs' sentences (repeats allowed: a sentence with k links is k pairs, embedded once).
        entity_ids: the pairs' entity ids in the head; a pair with id 0 (no row in the head) is dropped and counted.
        candidate_ids: the entities ranked (default: every id that answers some scored pair; chance is then
            1/|C|); each answer must be among them.
        batch_size: the encoder's batch size.
        sentence_vectors: embeddings of the distinct texts in first-appearance order, when already computed
            (the start and trained heads of one encoder share them).

    Returns:
        ``EntityRetrieval`` with ``dropped`` = pairs not scored.
    """
    ids = np.asarray(entity_ids, dtype=np.int64)
    if len(ids) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(ids)} entity ids")
    kept = np.flatnonzero(ids > 0)
    if len(kept) == 0:
        raise ValueError("no held-out pair has an entity the head knows")
    distinct = list(dict.fromkeys(texts[i] for i in kept))
    where = {t: i for i, t in enumerate(distinct)}
    cands = np.unique(ids[kept]) if candidate_ids is None else np.asarray(list(candidate_ids), dtype=np.int64)
    col = {int(c): j for j, c in enumerate(cands)}
    if any(int(i) not in col for i in ids[kept]):
        raise ValueError("every scored pair's entity must be among candidate_ids")
    t0 = time.perf_counter()
    if sentence_vectors is None:
        sentence_vectors = encoder.encode(distinct, batch_size, normalize=True)
    elif len(sentence_vectors) != len(distinct):
        raise ValueError(f"sentence_vectors has {len(sentence_vectors)} rows for {len(distinct)} distinct texts")
    got = rank_entities(sentence_vectors, _head_vectors(head, cands), np.array([where[texts[i]] for i in kept]),
                        np.array([col[int(i)] for i in ids[kept]]))
    got.dropped = len(ids) - len(kept)
    log.info("entity retrieval: %d pairs (%d sentences, %d dropped without a head row) over %d candidates: top-1 "
             "%.3f (chance %.3f, sentence-blind %.3f), per entity %.3f, MRR %.3f (%.1f s)", got.pairs, got.sentences,
             got.dropped, got.candidates, got.accuracy, got.chance, got.blind, got.balanced, got.mrr,
             time.perf_counter() - t0)
    return got


@dataclass
class RunWitness:
    """``trained``: the trained encoder through the trained head; ``start``: the start encoder through the initial
    head (the same pairs and candidates); ``movement``: ``entity_head.head_movement``; ``gain`` = trained − start
    top-1 and ``gain_se`` its standard error, ``balanced_gain`` / ``balanced_gain_se`` the same per entity first
    (sentences as the sampling units: a sentence's k links are not k independent draws); ``head_file``: where the
    heads were read."""

    trained: EntityRetrieval
    start: EntityRetrieval
    movement: dict[str, float]
    gain: float
    gain_se: float
    balanced_gain: float
    balanced_gain_se: float
    head_file: str


def _clustered_se(diff: np.ndarray, weights: np.ndarray, cluster: Sequence[str]) -> float:
    """Standard error of Σ_p weights_p · diff_p with sentences (``cluster``) as the independent units: the sum of S
    sentence totals t_s has variance S · var(t_s)."""
    keys = {c: i for i, c in enumerate(dict.fromkeys(cluster))}
    totals = np.bincount(np.array([keys[c] for c in cluster]), weights=weights * diff)
    return float(np.sqrt(len(totals)) * totals.std(ddof=1)) if len(totals) > 1 else float("nan")


def witness_run(model: SentenceEncoder, start: SentenceEncoder, head_file: Path, pairs: Path, *,
                batch_size: int = 128) -> RunWitness:
    """The retrieval witness of one trained run against its own start (module docstring).

    Args:
        model: the trained encoder (the run's exported ``model``).
        start: the encoder as the run started (the start model, or the random init the run's seed drew).
        head_file: the run's ``entity_head/<objective>.safetensors`` (trained and initial head, vocabulary).
        pairs: the held-out pairs table (``read_pairs``); pairs whose entity the head has no row for are dropped.
        batch_size: the encoders' batch size.

    Returns:
        ``RunWitness``.
    """
    from models.objectives.ease.entity_head import head_movement, load_heads

    heads = load_heads(head_file)
    texts, names = read_pairs(pairs)
    ids = heads.ids(names)
    trained = witness(model, heads.trained, texts, ids, batch_size=batch_size)
    begun = witness(start, heads.initial, texts, ids, batch_size=batch_size)
    scored = [texts[i] for i in np.flatnonzero(ids > 0)]
    diff = trained.per_pair - begun.per_pair
    flat = np.full(len(diff), 1.0 / len(diff))
    movement = head_movement(heads.initial.state_dict(), heads.trained.state_dict())
    out = RunWitness(trained, begun, movement, float(diff.mean()), _clustered_se(diff, flat, scored),
                     float(trained.weights @ diff), _clustered_se(diff, trained.weights, scored), str(head_file))
    log.info("entity retrieval witness (%s): top-1 %.3f trained vs %.3f at the start (gain %+.3f ± %.3f), per entity "
             "%.3f vs %.3f (gain %+.3f ± %.3f), chance %.3f, sentence-blind %.3f; ‖W − W₀‖/‖W₀‖ = %.4g", head_file,
             trained.accuracy, begun.accuracy, out.gain, out.gain_se, trained.balanced, begun.balanced,
             out.balanced_gain, out.balanced_gain_se, trained.chance, trained.blind, movement["w"])
    return out
