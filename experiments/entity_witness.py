"""EASE's retrieval witness as figures of a ledger row (``experiments.figures.ENTITY_FIGURES``).

The entity term of EASE (Nishikawa et al. 2022, Eq. 2: cos(z, W·E[e]) / τ_e, λ = 0.01, τ_e = 10 multilingual) cannot
be read from its loss: its logits lie in ±0.1, so L_e stays within 0.2 of ln N whatever is learnt (methods §4.2). Its
witness is sentence → entity retrieval on held-out pairs (``models.evaluation.entity_retrieval``): the trained
encoder through the trained head against the run's own start — the start encoder (built exactly as the trainer built
it: the run's seed, then ``SentenceEncoder.from_settings``) through the head as it was initialised (same W₀ and
entity table, which the run wrote beside its model: ``<run>/entity_head/<objective>.safetensors``). Why that start
and not a head fitted by least squares to the start encoder: see ``models.evaluation.entity_retrieval``.

Figures (percent but for the movement; ``entity_figures``):

- ``entity_retrieval_acc`` / ``entity_retrieval_mrr``: top-1 / MRR × 100 of the trained encoder and head;
- ``entity_retrieval_start``: top-1 × 100 of the start encoder through the initial head;
- ``entity_retrieval_gain`` = acc − start (points) and ``entity_retrieval_gain_se`` its standard error over
  held-out sentences (same pairs, same candidates: a paired difference);
- ``entity_retrieval_chance``: 100 / candidates (the filtered mean); ``entity_retrieval_blind``: the held-out
  majority entity's share × 100 (a sentence-blind ranking's best top-1);
- ``entity_retrieval_balanced`` / ``_balanced_start`` / ``_balanced_gain`` / ``_balanced_gain_se``: the same top-1
  averaged per entity first. The figure to judge the mechanism by: every sentence-blind ranking scores chance on it,
  so neither a head that learnt only the entity prior nor an encoder drift that changes which entity a random W₀
  ranks first for most sentences moves it (either can move the plain top-1 by up to ``entity_retrieval_blind``);
- ``entity_head_movement``: ‖W_trained − W_init‖_F / ‖W_init‖_F.

Pairs: the kit's ``eval_entity_pairs`` (report tables), every 5th page of each language held out of the training pairs
(``experiments.ease_corpus.hold_out_entity_pairs``); a condition trained on another EASE corpus of the kit is scored on
that corpus's held-out pairs (``ConditionSpec.witness_table``: ``hard_negatives_en`` → ``eval_entity_pairs_en``);
candidates: every entity that answers a held-out pair.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.figures import ENTITY_FIGURES, family

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.evaluation.entity_retrieval import RunWitness
    from models.settings import TrainSettings

log = logging.getLogger("polysent.experiments.entity_witness")


def asks_for_witness(names: Sequence[str]) -> bool:
    """Whether any of the figure ``names`` is an ``entity_*`` figure."""
    return any(family(n) == "entity" for n in names)


def start_encoder(settings: TrainSettings, tokenizer: Path | None, device: str) -> SentenceEncoder:
    """The student as the run's training started: the trainer seeds the global generator with the run's seed and
    builds the encoder from its settings (``models.training.train.start_run``); here inside a forked generator, so
    the caller's random stream is left as it was. A pretrained start loads the same weights; a random init draws
    the same ones."""
    import torch

    from models.encoder import SentenceEncoder

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        return SentenceEncoder.from_settings(settings.encoder, tokenizer).to(device).eval()


def head_file(trained: Path) -> Path:
    """The run's one entity head file under ``trained/entity_head/`` (``Component.export``)."""
    from models.objectives.ease.entity_head import HEAD_DIR

    found = sorted((trained / HEAD_DIR).glob("*.safetensors"))
    if len(found) != 1:
        raise FileNotFoundError(f"{trained / HEAD_DIR}: expected one entity head file, found {len(found)} "
                                f"({', '.join(p.name for p in found) or 'none'}); the entity_* figures need a run "
                                "with one ease objective, trained by code that exports its head (train stage ≥ 10)")
    return found[0]


def as_figures(w: RunWitness) -> dict[str, float]:
    """``ENTITY_FIGURES`` of a witness (module docstring)."""
    out = {"entity_retrieval_acc": 100 * w.trained.accuracy, "entity_retrieval_start": 100 * w.start.accuracy,
           "entity_retrieval_gain": 100 * w.gain, "entity_retrieval_gain_se": 100 * w.gain_se,
           "entity_retrieval_balanced": 100 * w.trained.balanced,
           "entity_retrieval_balanced_start": 100 * w.start.balanced,
           "entity_retrieval_balanced_gain": 100 * w.balanced_gain,
           "entity_retrieval_balanced_gain_se": 100 * w.balanced_gain_se,
           "entity_retrieval_mrr": 100 * w.trained.mrr, "entity_retrieval_chance": 100 * w.trained.chance,
           "entity_retrieval_blind": 100 * w.trained.blind, "entity_head_movement": w.movement["w"]}
    assert set(out) == set(ENTITY_FIGURES)
    return out


def entity_figures(names: Sequence[str], settings: TrainSettings, trained: Path, model: Path, pairs: Path | None,
                   tokenizer: Path | None, device: str, batch_size: int = 128,
                   table: str = "eval_entity_pairs") -> dict[str, float]:
    """Every ``entity_*`` figure of one trained run when ``names`` (the question's report figures) ask for any, else
    nothing.

    Args:
        names: the figures the row records (``q.evaluation.report``).
        settings: the run's ``TrainSettings`` (its seed and encoder settings rebuild the start encoder).
        trained: the run's training folder (holds ``model/`` and ``entity_head/``).
        model: the model the row is scored on (``trained/model``; an interpolated model's own folder).
        pairs: the kit's held-out pairs (``kits.tables(kit, "report")[table]``); None: the kit lacks them, an
            error saying how to add them.
        tokenizer: the kit's tokenizer for a random-init start (None for a pretrained start).
        device: where to embed (``cuda`` / ``cpu``).
        batch_size: the encoders' batch size.
        table: the kit table ``pairs`` is (``ConditionSpec.witness_table``), named by the error.

    Returns:
        ``ENTITY_FIGURES`` by name (percent, the movement a fraction), or ``{}``.
    """
    if not asks_for_witness(names):
        return {}
    if pairs is None or not Path(pairs).exists():
        from experiments.kits import ADDED_BY

        how = (f"add them: `python -m experiments prepare me5_replication {ADDED_BY[table]}`" if table in ADDED_BY
               else "rebuild it: `python -m experiments prepare me5_replication`")
        raise FileNotFoundError(f"entity figures {[n for n in names if family(n) == 'entity']} need the kit's "
                                f"held-out pairs {table}, which this kit does not have; {how}")
    from models.encoder import SentenceEncoder
    from models.evaluation.entity_retrieval import witness_run

    t0 = time.perf_counter()
    found = head_file(trained)
    w = witness_run(SentenceEncoder.load(model, device), start_encoder(settings, tokenizer, device), found,
                    Path(pairs), batch_size=batch_size)
    out = as_figures(w)
    log.info("%s: entity retrieval %.1f %% (start %.1f %%, gain %+.1f ± %.1f points), per entity %.1f %% (gain "
             "%+.1f ± %.1f); chance %.1f %%, sentence-blind %.1f %%; %d held-out pairs, ‖W − W₀‖/‖W₀‖ %.4g (%.1f s)",
             trained, out["entity_retrieval_acc"], out["entity_retrieval_start"], out["entity_retrieval_gain"],
             out["entity_retrieval_gain_se"], out["entity_retrieval_balanced"], out["entity_retrieval_balanced_gain"],
             out["entity_retrieval_balanced_gain_se"], out["entity_retrieval_chance"], out["entity_retrieval_blind"],
             w.trained.pairs, out["entity_head_movement"], time.perf_counter() - t0)
    return out
