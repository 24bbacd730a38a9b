"""EASE's paper readings as defaults and the code's as settings (models/objectives/ease/), and EASE under GradCache.

- defaults: N = 256 in one contrast set, hard-negative weight 0 (Eq. 2), W a bias-free linear map (the paper's matrix),
  duplicates kept as negatives;
- ``entity_projection_bias: true`` gives back the head with a bias (the code's ``nn.Linear``, polysent's former head),
  the settings reader takes only true / false for it, and a short training runs with either;
- each code reading (``hard_negative_weight: 1``, ``nonlinear: true``) and polysent's ``duplicate_negatives: mask``
  changes the loss as its docstring says, on a batch with a repeated sentence and a repeated entity, and the counts of
  kept / masked columns are logged;
- GradCache (``TrainSettings.grad_cache``) gives the gradients of the direct loss for the encoder *and* the entity
  head (a trainable module the loss owns), so the paper's contrast set of 256 fits any memory; inside the trainer the
  loss sequence matches.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import REPO, SAMPLE
from grad_compare import grads as _grads
from grad_compare import max_diff as _max_diff
from grad_compare import zero_grads as _zero
from torch import nn

from models.encoder import SentenceEncoder
from models.objectives.ease import EaseComponent, EaseObjective, ease_entity_loss, ease_loss
from models.objectives.loss_parts import duplicate_counts
from models.settings import EncoderSettings, TokenizerSettings, TrainSettings
from models.training.gradcache import embed_and_backward
from models.training.tokenizer import train_tokenizer

DIM = 32
ENCODER = EncoderSettings(hidden_size=DIM, num_layers=2, num_heads=2, intermediate_size=64, max_length=32,
                          dropout=0.0)
LOGGER = "polysent.models.objectives.ease"


def _premises() -> list[str]:
    rows = [line.split("\t") for line in (SAMPLE / "xnli" / "dev-en.tsv").read_text(encoding="utf-8").splitlines()]
    return list(dict.fromkeys(r[0] for r in rows if r and r[0]))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """8 EASE rows: rows 0 and 1 are one sentence with two links (same text), entity Q1 is the positive of rows 0, 2
    and 4 (same entity); a tokenizer for the tiny encoder."""
    root = tmp_path_factory.mktemp("ease")
    s = _premises()
    texts = [s[0], s[0], s[1], s[2], s[3], s[4], s[5], s[6]]
    entities = ["Q1", "Q2", "Q1", "Q3", "Q1", "Q4", "Q5", "Q6"]
    negatives = ["Q7", "Q8", "Q9", "Q10", "Q7", "Q8", "Q9", "Q10"]
    pq.write_table(pa.table({"page_id": [0, 0, 1, 2, 3, 4, 5, 6], "sent_id": [0] * 8,
                             "link_no": [0, 1, 0, 0, 0, 0, 0, 0], "text": texts, "entity": entities,
                             "negative": negatives, "lang": ["en"] * 8}),
                   root / "hard_negatives.parquet")
    rng = np.random.default_rng(0)
    vocab = [f"Q{k}" for k in range(1, 11)]
    pq.write_table(pa.table({"entity": vocab, "vector": [rng.normal(size=16).tolist() for _ in vocab]}),
                   root / "entity_vectors.parquet")
    pq.write_table(pa.table({"text": s}), root / "tok.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=300), {"t": root / "tok.parquet"}, root)
    return {"hard_negatives": root / "hard_negatives.parquet", "entity_vectors": root / "entity_vectors.parquet",
            "tokenizer": root / "tokenizer"}


def _encoder(corpus: dict[str, Path], dropout: float = 0.0, seed: int = 0) -> SentenceEncoder:
    torch.manual_seed(seed)
    return SentenceEncoder.from_settings(dataclasses.replace(ENCODER, dropout=dropout), corpus["tokenizer"]).train()


def _component(corpus: dict[str, Path], student: SentenceEncoder, steps: int = 2, **kw) -> EaseComponent:
    o = EaseObjective(**{"batch_size": 8, **kw})
    settings = TrainSettings(objectives=(o,), encoder=ENCODER, steps=steps, device="cpu")
    tables = {k: corpus[k] for k in ("hard_negatives", "entity_vectors")}
    return o.build("ease", tables, settings, 0, torch.device("cpu"), student)


# ---------------------------------------------------------------------------------------------- defaults
def test_defaults_are_the_papers_and_the_code_readings_are_settings() -> None:
    o = EaseObjective()
    assert (o.batch_size, o.hard_negative_weight, o.nonlinear, o.duplicate_negatives) == (256, 0.0, False, "keep")
    assert o.entity_projection_bias is False
    assert (o.simcse_temperature, o.entity_temperature, o.entity_weight) == (0.05, 10.0, 0.01)
    code = EaseObjective(batch_size=8, hard_negative_weight=1.0, nonlinear=True, entity_projection_bias=True,
                         duplicate_negatives="mask")
    assert (code.batch_size, code.hard_negative_weight, code.nonlinear, code.entity_projection_bias,
            code.duplicate_negatives) == (8, 1.0, True, True, "mask")


def test_simcse_weight_scales_the_dropout_term_and_zero_leaves_the_entity_term_alone() -> None:
    """``simcse_weight`` μ (issue 51's entity-only diagnostic): L = μ·L_s + λ·L_e; μ 1 (the default) is the paper's
    sum to the bit, μ 0 the entity term alone; the field stays out of cache keys at its default."""
    from models.objectives.simcse import simcse_loss
    from models.settings import key_view
    from models.settings_io import to_mapping

    g = torch.Generator().manual_seed(0)
    z1, z2, e, n = (torch.randn(6, 8, generator=g, dtype=torch.float64) for _ in range(4))
    s_term = simcse_loss(z1, z2, temperature=0.05).item()
    e_term = ease_entity_loss(z1, e, n, 0.1).item()
    both = ease_loss(z1, z2, e, n, entity_temperature=0.1, entity_weight=0.5)
    assert both.item() == ease_loss(z1, z2, e, n, entity_temperature=0.1, entity_weight=0.5, simcse_weight=1.0).item()
    assert both.item() == pytest.approx(s_term + 0.5 * e_term, rel=1e-12)
    alone = ease_loss(z1, z2, e, n, entity_temperature=0.1, entity_weight=1.0, simcse_weight=0.0)
    assert alone.item() == pytest.approx(e_term, rel=1e-12)
    half = ease_loss(z1, z2, e, n, entity_temperature=0.1, entity_weight=1.0, simcse_weight=0.5)
    assert half.item() == pytest.approx(0.5 * s_term + e_term, rel=1e-12)
    def keyed(o: EaseObjective) -> dict:
        return key_view({"objectives": [to_mapping(o)]})["objectives"][0]

    assert "simcse_weight" not in keyed(EaseObjective())
    assert keyed(EaseObjective(simcse_weight=0.0))["simcse_weight"] == 0.0


def test_hard_negative_weight_zero_keeps_the_hard_negative_only_in_the_denominator() -> None:
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    e = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)  # cos(s, e) = [[1, R], [0, R]]
    n = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)  # cos(s, n) = [[0, −1], [1, 0]]
    r, tau = 1 / math.sqrt(2), 10.0

    def ce(logits: list[float], target: int) -> float:
        return -math.log(math.exp(logits[target]) / sum(math.exp(x) for x in logits))

    def want(w: float) -> float:
        return (ce([1 / tau, r / tau, 0 + w, -1 / tau], 0) + ce([0, r / tau, 1 / tau, 0 + w], 1)) / 2

    paper = ease_entity_loss(s, e, n, tau)  # the default: Eq. 2
    code = ease_entity_loss(s, e, n, tau, hard_negative_weight=1.0)
    assert paper.item() == pytest.approx(want(0.0), rel=1e-12)
    assert code.item() == pytest.approx(want(1.0), rel=1e-12)
    assert code.item() > paper.item() + 0.1  # the own hard negative's exp-term × e
    z2 = s.flip(0)
    assert ease_loss(s, z2, e, n, entity_temperature=tau).item() == pytest.approx(
        ease_loss(s, z2, e, n, entity_temperature=tau, hard_negative_weight=0.0).item(), rel=1e-15)


def test_nonlinear_false_is_the_linear_w_and_true_the_codes_tanh(corpus: dict[str, Path]) -> None:
    student = _encoder(corpus)
    ids = torch.tensor([1, 2, 3, 4])
    for nonlinear in (False, True):
        head = _component(corpus, student, nonlinear=nonlinear).modules["entities"]
        with torch.no_grad():
            head.embedding.weight.mul_(50)  # pre-activations far outside tanh's linear range
            pre = head.linear(head.embedding(ids))
            out = head(ids)
        assert head.nonlinear is nonlinear
        if nonlinear:
            torch.testing.assert_close(out, torch.tanh(pre))
            assert out.abs().max() <= 1
        else:
            torch.testing.assert_close(out, pre)
            assert out.abs().max() > 1


# ---------------------------------------------------------------------------------------------- W: matrix or + bias
def test_entity_projection_default_is_the_papers_matrix_without_a_bias(corpus: dict[str, Path]) -> None:
    """The default head compares z1 with W · e: no bias parameter, and W is exactly linear — W(a·e) = a·W(e) bit for
    bit for powers of two (exact in floating point), to rounding for any a; W(0) = 0, so [PAD] maps to zeros."""
    head = _component(corpus, _encoder(corpus)).modules["entities"]
    assert head.bias is False and head.linear.bias is None
    assert {k for k, _ in head.named_parameters()} == {"embedding.weight", "linear.weight"}
    assert set(head.state_dict()) == {"embedding.weight", "linear.weight"}
    ids = torch.tensor([1, 2, 3, 4, 5])
    with torch.no_grad():
        e = head.embedding(ids)
        we = head.linear(e)
        torch.testing.assert_close(head(ids), we, rtol=0, atol=0)
        for a in (2.0, 0.5, -4.0, 0.0):
            torch.testing.assert_close(head.linear(a * e), a * we, rtol=0, atol=0)
        torch.testing.assert_close(head.linear(0.3 * e), 0.3 * we)
        torch.testing.assert_close(head.linear(e[:2] + e[2:4]), we[:2] + we[2:4])
        torch.testing.assert_close(head.linear(torch.zeros_like(e)), torch.zeros_like(we), rtol=0, atol=0)
        torch.testing.assert_close(head(torch.tensor([0])), torch.zeros(1, DIM), rtol=0, atol=0)
    assert we.abs().max() > 0


def test_entity_projection_bias_true_is_the_former_head(corpus: dict[str, Path]) -> None:
    """``entity_projection_bias: true``: W · e + b with a trainable bias, the head polysent had before (its state keys
    and layout); with ``nonlinear: true`` too, the code's ``EntityMLPLayer`` tanh(W · e + b)."""
    student = _encoder(corpus)
    ids = torch.tensor([0, 1, 2, 3])
    for nonlinear in (False, True):
        head = _component(corpus, student, entity_projection_bias=True, nonlinear=nonlinear).modules["entities"]
        assert head.bias is True and isinstance(head.linear.bias, nn.Parameter)
        assert head.linear.bias.shape == (DIM,) and head.linear.bias.requires_grad
        assert set(head.state_dict()) == {"embedding.weight", "linear.weight", "linear.bias"}
        with torch.no_grad():
            head.linear.bias.fill_(0.25)  # PyTorch's initialisation draws it; make it plainly non-zero
            e = head.embedding(ids)
            want = e @ head.linear.weight.T + head.linear.bias
            want = torch.tanh(want) if nonlinear else want
            torch.testing.assert_close(head(ids), want)
            pad = head(torch.tensor([0]))[0]  # [PAD] is a zero row: only the bias is left
            torch.testing.assert_close(pad, torch.full((DIM,), math.tanh(0.25) if nonlinear else 0.25))
            e1 = head.embedding(ids[1:2])
            assert not torch.allclose(head.linear(2 * e1), 2 * head.linear(e1))  # affine, not linear


def test_the_head_readings_train_under_the_same_random_stream(corpus: dict[str, Path]) -> None:
    """experiments/ease compares the head with and without a bias at the same seed: building the head must not draw
    from the run's random stream (the bias's draw used to shift every later dropout mask, so the comparison measured
    other masks as much as the head). Both builds leave the global generator where it was, draw the same W, and the
    SimCSE views of the first step are the same bits."""
    student = _encoder(corpus, dropout=0.1)
    states, heads, views = [], [], []
    for bias in (False, True):
        torch.manual_seed(7)
        component = _component(corpus, student, entity_projection_bias=bias)
        states.append(torch.get_rng_state())
        heads.append(component.modules["entities"])
        with torch.no_grad():
            views.append(student(["a short sentence", "another one"]))
    torch.manual_seed(7)
    assert torch.equal(states[0], states[1]) and torch.equal(states[0], torch.get_rng_state())
    torch.testing.assert_close(heads[0].linear.weight, heads[1].linear.weight, rtol=0, atol=0)
    torch.testing.assert_close(views[0], views[1], rtol=0, atol=0)
    other = _component(corpus, student, entity_projection_bias=False)
    # W is drawn from the run's seed, not from wherever its stream stands
    assert torch.equal(other.modules["entities"].linear.weight, heads[0].linear.weight)


def test_entity_head_bias_follows_nonlinear_unless_given() -> None:
    """``EntityHead`` itself: ``bias=None`` (its default) is no bias for the paper's linear W and a bias for the code's
    Linear + tanh; an explicit bool wins (the objective always passes ``entity_projection_bias``)."""
    from models.objectives.ease.entity_head import EntityHead

    vectors = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    cases = {(False, None): False, (True, None): True, (False, True): True, (True, False): False}
    for (nonlinear, bias), want in cases.items():
        for head in (EntityHead(4, 6, 8, nonlinear=nonlinear, bias=bias),
                     EntityHead.from_vectors(vectors, 8, nonlinear=nonlinear, bias=bias)):
            assert head.bias is want and (head.linear.bias is not None) is want
    for bad in ("yes", 1, 0.0):
        with pytest.raises(ValueError, match="bias must be a bool or None"):
            EntityHead(4, 6, 8, bias=bad)
    with pytest.raises(ValueError, match="nonlinear must be a bool"):
        EntityHead(4, 6, 8, nonlinear=1)


def test_settings_reader_takes_entity_projection_bias_true_or_false_only() -> None:
    from models.settings_io import SettingsError, from_mapping

    def read(value: object) -> EaseObjective:
        return from_mapping(TrainSettings, {"objectives": [{"kind": "ease", "entity_projection_bias": value}]}
                            ).objectives[0]

    assert read(True).entity_projection_bias is True
    assert read(False).entity_projection_bias is False
    assert from_mapping(TrainSettings, {"objectives": [{"kind": "ease"}]}).objectives[0].entity_projection_bias is False
    for bad in ("yes", "true", 1, 0, None, 1.0):
        with pytest.raises(SettingsError, match=rf"^TrainSettings\.objectives\.0\.entity_projection_bias: not true "
                                                rf"or false \(value {re.escape(repr(bad))}\); expected true or false$"):
            read(bad)


@pytest.mark.parametrize("bias", [False, True], ids=["matrix", "bias"])
def test_ease_trains_with_and_without_the_entity_projection_bias(tmp_path: Path, corpus: dict[str, Path],
                                                                  bias: bool) -> None:
    """A short EASE run through the trainer with either head: finite, changing losses; the head's W (and b with the
    setting) is updated; the checkpoint state holds the bias exactly when the setting asks for it."""
    from models.training.train import start_run, train_loop

    settings = TrainSettings(objectives=(EaseObjective(batch_size=8, entity_weight=1.0, entity_projection_bias=bias),),
                             encoder=ENCODER, steps=3, lr=1e-2, warmup_steps=0, seed=3, device="cpu")
    tables = {k: corpus[k] for k in ("hard_negatives", "entity_vectors")}
    run = start_run(settings, tables, run_name="bias", tokenizer_dir=corpus["tokenizer"], dev_tables=None,
                    checkpoints=tmp_path / "checkpoints")
    (comp,) = run.components
    head = comp.modules["entities"]
    before = {k: v.detach().clone() for k, v in head.state_dict().items()}
    train_loop(run, {}, progress=False)
    losses = run.history.steps["loss"]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses) and losses[0] != losses[-1]
    assert set(before) == {"embedding.weight", "linear.weight", *(["linear.bias"] if bias else [])}
    after = head.state_dict()
    for k in before:
        assert not torch.equal(after[k], before[k]), f"{k} was not updated"
    assert set(run.snapshot(3)["modules"][comp.name]) == {f"entities.{k}" for k in before}


# ---------------------------------------------------------------------------------------------- duplicates
def _batch_loss(comp: EaseComponent, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    return comp.batch(0).loss_fn([z1, z2])


def test_duplicate_negatives_keep_is_the_equation_and_mask_drops_same_text_and_same_entity_columns(
        corpus: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    student = _encoder(corpus)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        keep = _component(corpus, student, entity_weight=1.0)
        mask = _component(corpus, student, entity_weight=1.0, duplicate_negatives="mask")
    mask.modules.load_state_dict(keep.modules.state_dict())
    idx = keep.plan.batch(0)
    assert sorted(idx.tolist()) == list(range(8)) and mask.plan.batch(0).tolist() == idx.tolist()
    text_ids, ent = keep.text_ids[idx], keep.data.entity[idx]
    assert duplicate_counts(text_ids) == (2, 2) and duplicate_counts(ent) == (6, 3)

    torch.manual_seed(5)
    z1, z2 = torch.randn(8, DIM), torch.randn(8, DIM)
    head = keep.modules["entities"]
    with torch.no_grad():
        e, n = head(torch.as_tensor(ent)), head(torch.as_tensor(keep.data.negative[idx]))
        got_keep, got_mask = _batch_loss(keep, z1, z2), _batch_loss(mask, z1, z2)
    plain = ease_loss(z1, z2, e, n, entity_weight=1.0)
    grouped = ease_loss(z1, z2, e, n, entity_weight=1.0, groups=torch.as_tensor(text_ids),
                        entity_groups=torch.as_tensor(ent))
    assert got_keep.item() == pytest.approx(plain.item(), rel=1e-5)
    assert got_mask.item() == pytest.approx(grouped.item(), rel=1e-5)
    assert got_mask.item() < got_keep.item() - 1e-3  # fewer denominator terms

    # the counts over the run's 2 batches (steps 2 × accumulation 1; one batch = the whole corpus)
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert ("objective ease: duplicate_negatives keep: over the run's 2 batches of 8, 4 same-text columns in 4 rows "
            "(2 batches) kept as negatives (SimCSE term)") in lines
    assert ("objective ease: duplicate_negatives keep: over the run's 2 batches of 8, 12 same-entity columns in 6 "
            "rows (2 batches) kept as negatives (entity term)") in lines
    assert ("objective ease: duplicate_negatives mask: over the run's 2 batches of 8, 12 same-entity columns in 6 "
            "rows (2 batches) masked from the denominators (entity term)") in lines
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        mask.batch(1)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG] == [
        "objective ease batch 1: 2 same-text columns in 2 rows masked from the denominators (SimCSE term)",
        "objective ease batch 1: 6 same-entity columns in 3 rows masked from the denominators (entity term)"]


def test_duplicate_counts() -> None:
    assert duplicate_counts(np.array([1, 2, 3])) == (0, 0)
    assert duplicate_counts(np.array([4, 4, 5, 4, 5, 6])) == (3 * 2 + 2 * 1, 5)


# ---------------------------------------------------------------------------------------------- GradCache
def _named(student: SentenceEncoder, comp: EaseComponent) -> Iterator[tuple[str, nn.Parameter]]:
    yield from student.named_parameters()
    yield from (("entities." + k, p) for k, p in comp.modules["entities"].named_parameters())


READINGS = {"paper": {}, "code": {"hard_negative_weight": 1.0, "nonlinear": True, "entity_projection_bias": True},
            "mask": {"duplicate_negatives": "mask"}, "bias": {"entity_projection_bias": True}}


@pytest.mark.parametrize("reading", list(READINGS))
def test_gradcache_gives_the_direct_gradients_of_encoder_and_entity_head(corpus: dict[str, Path],
                                                                         reading: str) -> None:
    """Dropout off: GradCache in chunks of 3 (8 = 3 + 3 + 2 per view) against one direct backward of the batch."""
    student = _encoder(corpus)
    comp = _component(corpus, student, entity_weight=1.0, **READINGS[reading])
    batch = comp.batch(0)
    params = [p for _, p in _named(student, comp)]
    runs = {}
    for mini_batch in (None, 3):
        _zero(params)
        loss = embed_and_backward(student, batch.columns, batch.loss_fn, mini_batch=mini_batch, scale=0.5)
        runs[mini_batch] = (float(loss), _grads(_named(student, comp)))
    (plain_loss, plain), (cached_loss, cached) = runs[None], runs[3]
    assert cached_loss == pytest.approx(plain_loss, abs=1e-6)
    assert max(float(g.abs().max()) for g in plain.values()) > 1e-2  # the tolerance below is meaningful
    assert _max_diff(cached, plain) <= 1e-5
    head = {k: v for k, v in cached.items() if k.startswith("entities.")}
    with_bias = READINGS[reading].get("entity_projection_bias", False)
    assert set(head) == {"entities.embedding.weight", "entities.linear.weight",
                         *(["entities.linear.bias"] if with_bias else [])}
    assert all(float(g.abs().max()) > 1e-4 for g in head.values())  # the entity term reaches the head
    assert _max_diff(head, {k: plain[k] for k in head}) <= 1e-6


def test_gradcache_with_dropout_equals_the_same_chunks_embedded_with_grad(corpus: dict[str, Path]) -> None:
    """Dropout on (the two SimCSE views differ): GradCache's replayed RNG gives the gradients of the chunks its first
    pass embedded, for the encoder and the entity head."""
    student = _encoder(corpus, dropout=0.1)
    comp = _component(corpus, student, entity_weight=1.0)
    batch = comp.batch(0)
    params = [p for _, p in _named(student, comp)]
    _zero(params)
    torch.manual_seed(11)
    embs = [torch.cat([student(col[i:i + 3]) for i in range(0, len(col), 3)]) for col in batch.columns]
    assert not torch.allclose(embs[0], embs[1], atol=1e-4)  # two dropout views
    ref_loss = batch.loss_fn(embs)
    ref_loss.backward()
    reference = _grads(_named(student, comp))
    _zero(params)
    torch.manual_seed(11)
    loss = embed_and_backward(student, batch.columns, batch.loss_fn, mini_batch=3)
    assert float(loss) == pytest.approx(float(ref_loss.detach()), abs=1e-6)
    assert _max_diff(_grads(_named(student, comp)), reference) <= 1e-5


def test_ease_trains_under_grad_cache_like_the_direct_loss(tmp_path: Path, corpus: dict[str, Path]) -> None:
    """Inside the trainer (dropout off): the paper's reading with GradCache mini-batches of 3 gives the loss sequence
    of whole-batch back-propagation, entity head included (its update changes the next steps' losses)."""
    from models.training.train import train

    settings = TrainSettings(objectives=(EaseObjective(batch_size=8, entity_weight=1.0),), encoder=ENCODER, steps=4,
                             lr=1e-3, warmup_steps=1, seed=3, device="cpu")
    tables = {k: corpus[k] for k in ("hard_negatives", "entity_vectors")}
    losses = {}
    for cache in (None, 3):
        out = tmp_path / f"cache-{cache}"
        train(dataclasses.replace(settings, grad_cache=cache), tables, out, tokenizer_dir=corpus["tokenizer"],
              progress=False, keep_checkpoints_after=False)
        losses[cache] = pq.read_table(out / "train_steps.parquet").column("loss").to_pylist()
    assert len(losses[None]) == 4 and losses[None][0] != losses[None][-1]
    np.testing.assert_allclose(losses[3], losses[None], rtol=1e-4)


def test_the_papers_entity_term_is_bounded_near_chance_and_barely_moves_the_embeddings() -> None:
    """Why ``ease+simcse`` ties ``simcse`` at ×1 (experiments/ease): τ_e = 10 *divides* the cosine, so every entity
    logit lies in [−0.1, 0.1] and L_e of 2N candidates cannot leave [ln(1 + (2N−1)e^{−0.2}), ln(1 + (2N−1)e^{0.2})]:
    λ·L_e moves the total loss by at most ±0.002 around λ·ln 2N, and its gradient into the sentence embeddings is
    orders of magnitude below the SimCSE term's. Optimising the sentences against the entity term alone stays above
    the floor; with a temperature that multiplies (1/τ_e) the same term falls towards 0."""
    torch.manual_seed(0)
    n, d, tau, lam = 32, 64, 10.0, 0.01
    entities, negatives = torch.randn(n, d), torch.randn(n, d)
    floor = math.log(1 + (2 * n - 1) * math.exp(-2 / tau))
    ceiling = math.log(1 + (2 * n - 1) * math.exp(2 / tau))
    z = torch.randn(n, d, requires_grad=True)
    opt = torch.optim.Adam([z], lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        loss = ease_entity_loss(z, entities, negatives, tau)
        loss.backward()
        opt.step()
    best = ease_entity_loss(z, entities, negatives, tau).item()
    assert floor - 1e-6 <= best < math.log(2 * n) < ceiling
    assert lam * (math.log(2 * n) - floor) < 0.002 and lam * (ceiling - math.log(2 * n)) < 0.002
    sharp = torch.randn(n, d, requires_grad=True)
    opt = torch.optim.Adam([sharp], lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        ease_entity_loss(sharp, entities, negatives, 1 / tau).backward()
        opt.step()
    assert ease_entity_loss(sharp, entities, negatives, 1 / tau).item() < 0.05
    # the gradients at a SimCSE loss like the ×1 runs' (0.1–0.8): the entity term's is < 0.1 % of the SimCSE term's
    base = torch.randn(n, d)
    z1 = (base + 1.2 * torch.randn(n, d)).requires_grad_()
    z2 = base + 1.2 * torch.randn(n, d)
    full = ease_loss(z1, z2, entities, negatives)
    alone = ease_loss(z1, z2, entities, negatives, entity_weight=0.0)
    g_full, = torch.autograd.grad(full, z1)
    g_alone, = torch.autograd.grad(alone, z1)
    assert 0.1 < alone.item() < 0.8
    assert 0 < (g_full - g_alone).norm().item() < 0.001 * g_alone.norm().item()


# ---------------------------------------------------------------------------------------------- the experiment
def test_the_contrast_set_conditions_compare_equal_pairs_per_update() -> None:
    """experiments/ease: EASE+SimCSE and SimCSE at 256 pairs per update, as one contrast set through GradCache
    (``[256]``) and as 32 accumulated micro-batches of 8 (``[8x32]``), and one set of 64 seeing as many pairs in all;
    the question's ``train_settings`` applies the overrides."""
    from experiments.question import load_question

    q = load_question("ease")
    for name in ("ease+simcse", "simcse"):
        big, small, mid = (q.train_settings(q.condition(f"{name}[{tag}]"), 13, 10, start="start", device="cpu")
                           for tag in ("256", "8x32", "64"))
        (o_big,), (o_small,), (o_mid,) = big.objectives, small.objectives, mid.objectives
        assert (o_big.batch_size, big.grad_cache, big.grad_accumulation) == (256, 64, 1)
        assert (o_small.batch_size, small.grad_cache, small.grad_accumulation) == (8, None, 32)
        assert dataclasses.replace(o_big, batch_size=8) == o_small == dataclasses.replace(o_mid, batch_size=8)
        assert big.steps == small.steps == 20 and mid.steps == 80
        pairs = [s.objectives[0].batch_size * s.grad_accumulation * s.steps for s in (big, small, mid)]
        assert pairs == [5120] * 3
        assert (o_big.entity_weight == 0.0) is (name == "simcse")


def test_entity_vectors_train_five_iterations_unless_a_config_says_otherwise() -> None:
    """Wikipedia2Vec's default of 5 passes, which the EASE paper kept; the sample pipeline's explicit 1 stays."""
    from flows.config import load_config
    from pipelines.wikipedia.entity_vectors import EntityVectorSettings

    assert EntityVectorSettings().iterations == 5
    assert load_config(REPO / "configs" / "default.yaml").corpora.entity_vectors.iterations == 1
    assert load_config(REPO / "configs" / "paper" / "ease-mbert.yaml").corpora.entity_vectors.iterations == 5


# ---------------------------------------------------------------------------------------------- the retrieval witness
def test_rank_entities_scores_top1_mrr_and_chance_with_ties_and_the_sentences_other_links_filtered() -> None:
    """The witness's maths on hand-made vectors: an exact head gives 1; a head scoring every entity alike sits exactly
    at chance (ties in random order, in expectation) for top-1 and MRR; a sentence's other links are not candidates
    for it; a random head over many balanced pairs is within three standard errors of chance."""
    from models.evaluation.entity_retrieval import rank_entities

    eye = np.eye(4)
    exact = rank_entities(eye, eye, np.arange(4), np.arange(4))
    assert (exact.accuracy, exact.mrr, exact.chance, exact.blind) == (1.0, 1.0, 0.25, 0.25)
    flat = rank_entities(eye, np.ones((4, 4)), np.arange(4), np.arange(4))
    assert flat.accuracy == pytest.approx(0.25) and flat.mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert flat.mrr == pytest.approx(flat.chance_mrr) and np.allclose(flat.per_pair, 0.25)
    # sentence 0 links entities 0 and 1 and lies nearer 1: for the pair (0, 0), entity 1 is not a candidate
    s = np.array([[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    e = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    two = rank_entities(s, e, np.array([0, 0, 1]), np.array([0, 1, 2]))
    assert two.per_pair.tolist() == [1.0, 1.0, 1.0]
    assert two.chance == pytest.approx((1 / 2 + 1 / 2 + 1 / 3) / 3) and two.sentences == 2
    wrong = rank_entities(np.array([[0.0, 1.0, 0.0]]), e, np.array([0]), np.array([0]))
    # entity 1 above the answer, entity 2 tied with it: rank 2 or 3, each half the time
    assert wrong.accuracy == 0.0 and wrong.mrr == pytest.approx((1 / 2 + 1 / 3) / 2)
    # a sentence-blind ranking (entity 0 first for every sentence) on skewed answers: its top-1 is the majority's
    # share, its top-1 per entity is chance whichever entity it names
    blind = rank_entities(np.tile([1.0, 0.0, 0.0, 0.0], (9, 1)), np.array([[1.0, 0, 0, 0], [0.9, 0.1, 0, 0],
                                                                            [0.8, 0, 0.2, 0], [0.7, 0, 0, 0.3]]),
                          np.arange(9), np.array([0] * 6 + [1, 2, 3]))
    assert blind.accuracy == pytest.approx(6 / 9) == pytest.approx(blind.blind)
    assert blind.balanced == pytest.approx(0.25) == pytest.approx(blind.balanced_chance)
    assert blind.weights.sum() == pytest.approx(1.0) and exact.balanced == 1.0
    rng = np.random.default_rng(0)
    n, c = 4000, 20
    rand = rank_entities(rng.normal(size=(n, 16)), rng.normal(size=(c, 16)), np.arange(n), np.arange(n) % c)
    assert abs(rand.accuracy - 1 / c) < 3 * math.sqrt((1 / c) * (1 - 1 / c) / n)
    with pytest.raises(ValueError, match="out of range"):
        rank_entities(eye, eye, np.array([0]), np.array([4]))


def _entity_pairs(n_entities: int, per_entity: int) -> tuple[list[str], list[int]]:
    s = _premises()
    texts = s[:n_entities * per_entity]
    return texts, [1 + i % n_entities for i in range(len(texts))]


def test_the_witness_is_at_chance_for_a_random_head_and_near_one_for_a_head_onto_each_sentences_entity(
        corpus: dict[str, Path]) -> None:
    """Through a tiny encoder: a head whose entity k is the mean embedding of entity k's sentences ranks nearly every
    sentence's own entity first; random heads (Wikipedia2Vec-like random table, PyTorch's W) average chance."""
    from models.evaluation.entity_retrieval import witness
    from models.objectives.ease.entity_head import EntityHead

    n, per = 12, 2
    texts, ids = _entity_pairs(n, per)
    enc = _encoder(corpus).eval()
    z = enc.encode(texts, normalize=True)
    onto = EntityHead(n, n, DIM)
    with torch.no_grad():
        onto.embedding.weight.copy_(torch.cat([torch.zeros(1, n), torch.eye(n)]))
        means = np.stack([z[[i for i in range(len(ids)) if ids[i] == k]].mean(axis=0) for k in range(1, n + 1)])
        onto.linear.weight.copy_(torch.from_numpy(means.T))
    good = witness(enc, onto, texts, ids)
    assert good.accuracy >= 0.9 and good.mrr >= 0.9 and good.chance == pytest.approx(1 / n)
    assert (good.pairs, good.sentences, good.candidates, good.dropped) == (n * per, n * per, n, 0)
    rng = np.random.default_rng(3)
    accs = [witness(enc, EntityHead.from_vectors(rng.normal(size=(n, 16)).astype(np.float32), DIM, init_seed=k),
                    texts, ids, sentence_vectors=z).accuracy for k in range(20)]
    assert abs(float(np.mean(accs)) - 1 / n) < 0.05
    # a pair whose entity the head has no row for (id 0) is dropped and counted, not scored
    partial = witness(enc, onto, texts, [0, *ids[1:]])
    assert (partial.pairs, partial.dropped) == (n * per - 1, 1)


def test_a_run_writes_its_entity_head_trained_and_initial_and_its_movement(tmp_path: Path,
                                                                            corpus: dict[str, Path]) -> None:
    """``train`` exports the EASE head beside the model (``entity_head/ease.safetensors``): the initial state is the
    head a fresh build of the run draws (the witness's start), the trained one the run's last; the stats record
    ‖W − W₀‖/‖W₀‖ as computed from the file; equal heads give equal bytes (an artifact's content hash)."""
    from models.objectives.ease.entity_head import load_heads
    from models.training.train import train

    settings = TrainSettings(objectives=(EaseObjective(batch_size=8, entity_weight=1.0),), encoder=ENCODER, steps=3,
                             lr=1e-2, warmup_steps=0, seed=3, device="cpu")
    tables = {k: corpus[k] for k in ("hard_negatives", "entity_vectors")}
    res = train(settings, tables, tmp_path / "run", tokenizer_dir=corpus["tokenizer"], progress=False,
                keep_checkpoints_after=False)
    got = res.stats["components"]["ease"]
    assert got["entity_head"] == "entity_head/ease.safetensors" and (tmp_path / "run" / "model").is_dir()
    heads = load_heads(tmp_path / "run" / got["entity_head"])
    assert heads.entities == [f"Q{k}" for k in sorted(range(1, 11), key=str)]  # the run's sorted vocabulary
    assert heads.meta["steps"] == 3 and heads.meta["entity_temperature"] == 10.0
    fresh = settings.objectives[0].build("ease", tables, settings, 0, torch.device("cpu"), _encoder(corpus))
    for k, v in fresh.modules["entities"].state_dict().items():
        torch.testing.assert_close(heads.initial.state_dict()[k], v, rtol=0, atol=0)
    w0, w1 = heads.initial.linear.weight, heads.trained.linear.weight
    assert got["entity_head_movement"] == pytest.approx(float((w1 - w0).norm() / w0.norm()), rel=1e-5)
    assert got["entity_head_movement"] > 0 and got["entity_table_movement"] > 0
    assert heads.ids(["Q3", "nope"]).tolist() == [heads.entities.index("Q3") + 1, 0]
    again = fresh.export(tmp_path / "again")  # a fresh build exported twice: the same bytes
    fresh.export(tmp_path / "twice")
    assert again["entity_head_movement"] == 0.0
    assert (tmp_path / "again" / again["entity_head"]).read_bytes() == (tmp_path / "twice" / again["entity_head"]
                                                                        ).read_bytes()
    (tmp_path / "bad.safetensors").write_bytes((tmp_path / "run" / "model" / "model.safetensors").read_bytes())
    with pytest.raises(ValueError, match="not an entity head file"):
        load_heads(tmp_path / "bad.safetensors")


def _ease_rows(pages: list[tuple[str, int]], texts: list[str], entities: list[str]) -> pa.Table:
    n = len(texts)
    return pa.table({"page_id": [p for _, p in pages], "sent_id": list(range(n)), "link_no": [0] * n,
                     "text": texts, "entity": entities, "negative": ["Q99"] * n, "lang": [lang for lang, _ in pages]})


def test_the_held_out_pairs_are_whole_pages_and_share_no_sentence_with_the_training_pairs(tmp_path: Path) -> None:
    """``hold_out_entity_pairs``: every 5th page of each language (page_id order) is held out whole; a training-page
    row whose text is also on a held-out page moves to the held-out side; the split is deterministic, loses no row,
    writes the stage's hive layout (read by the trainer's reader) and a held-out file."""
    from experiments.ease_corpus import hold_out_entity_pairs
    from models.training.corpus_tables import load_entity_pairs

    pages, texts, ents = [], [], []
    for lang, n_pages in (("el", 12), ("vi", 7)):
        for p in range(n_pages):
            for k in range(p % 3 + 1):  # pages of 1–3 sentences
                pages.append((lang, 100 + 10 * p))
                texts.append(f"{lang} page {p} sentence {k}")
                ents.append(f"Q{(p + k) % 4 + 1}")
    texts[3] = "vi page 4 sentence 0"  # el's 3rd page (3 rows) repeats a sentence of vi's 5th page (held out)
    src = tmp_path / "src"
    for lang in ("el", "vi"):
        (src / f"lang={lang}").mkdir(parents=True)
        keep = [i for i, (x, _) in enumerate(pages) if x == lang]
        t = _ease_rows([pages[i] for i in keep], [texts[i] for i in keep], [ents[i] for i in keep])
        pq.write_table(t.drop_columns(["lang"]), src / f"lang={lang}" / "part-00000.parquet")
    stats = hold_out_entity_pairs(src, tmp_path / "train", tmp_path / "held.parquet")
    held = pq.read_table(tmp_path / "held.parquet").to_pydict()
    train_t = ds_table(tmp_path / "train")
    held_pages = set(zip(held["lang"], held["page_id"], strict=True))
    want = {("el", 140), ("el", 190), ("vi", 140)}  # the 5th and 10th of el's 12 pages, the 5th of vi's 7
    assert want <= held_pages and held_pages - want == {("el", 120)}  # el's 3rd page only through its repeated text
    assert ("el", 120) in set(zip(train_t["lang"], train_t["page_id"], strict=True))  # its other rows still train
    assert not set(held["text"]) & set(train_t["text"])
    assert len(held["text"]) + len(train_t["text"]) == len(texts)
    assert stats["held_out"]["rows"] == len(held["text"]) and stats["train"]["rows"] == len(train_t["text"])
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["lang=el", "lang=vi"]
    assert len(load_entity_pairs(tmp_path / "train", _vectors(tmp_path), require_negative=True)) == stats["train"][
        "rows"]
    hold_out_entity_pairs(src, tmp_path / "again", tmp_path / "again.parquet")
    assert pq.read_table(tmp_path / "again.parquet").equals(pq.read_table(tmp_path / "held.parquet"))
    with pytest.raises(ValueError, match="every must be ≥ 2"):
        hold_out_entity_pairs(src, tmp_path / "x", tmp_path / "x.parquet", every=1)


def ds_table(path: Path) -> dict[str, list]:
    import pyarrow.dataset as ds

    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pydict()


def _vectors(root: Path) -> Path:
    vocab = [f"Q{k}" for k in range(1, 5)] + ["Q99"]
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"entity": vocab, "vector": [rng.normal(size=8).tolist() for _ in vocab]}),
                   root / "vectors.parquet")
    return root / "vectors.parquet"


@pytest.fixture(scope="module")
def cue_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """160 EASE pairs, one page each: entity k's sentences hold its cue word (a city) among five random words;
    every 5th page held out (``hold_out_entity_pairs``: 32 pairs, 4 per entity); random 16-d entity vectors."""
    from experiments.ease_corpus import hold_out_entity_pairs

    root = tmp_path_factory.mktemp("cues")
    words = list(dict.fromkeys(w.lower() for s in _premises() for w in s.split() if w.isalpha()))[:200]
    cues = ["paris", "berlin", "tokyo", "athens", "hanoi", "kyiv", "madrid", "rome"]
    rng = np.random.default_rng(0)
    texts = []
    for i in range(160):
        fill = list(rng.choice(words, size=5))
        fill.insert(int(rng.integers(0, 6)), cues[i % 8])
        texts.append(" ".join(fill))
    ents = [f"Q{i % 8 + 1}" for i in range(160)]
    pq.write_table(_ease_rows([("en", i) for i in range(160)], texts, ents).set_column(
        5, "negative", pa.array([f"Q{(i + 1) % 8 + 1}" for i in range(160)])), root / "all.parquet")
    hold_out_entity_pairs(root / "all.parquet", root / "train", root / "held.parquet")
    vocab = [f"Q{k}" for k in range(1, 9)]
    pq.write_table(pa.table({"entity": vocab, "vector": [rng.normal(size=16).tolist() for _ in vocab]}),
                   root / "vectors.parquet")
    pq.write_table(pa.table({"text": texts}), root / "tok.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=400), {"t": root / "tok.parquet"}, root)
    return {"hard_negatives": root / "train", "entity_vectors": root / "vectors.parquet", "held": root / "held.parquet",
            "tokenizer": root / "tokenizer"}


def test_a_strong_entity_term_raises_the_witness_above_chance_and_without_the_term_the_head_stays(
        tmp_path: Path, cue_corpus: dict[str, Path]) -> None:
    """The diagnostic condition (τ_e 0.1, λ 0.1) on a tiny random-init encoder, 40 steps: held-out sentence → entity
    top-1 far above chance (1/8) and above the run's own start (the same seed's random init through W₀), by more
    than twice its standard error, and W moved; ``entity_figures`` rebuilds that start from the run's settings. With
    λ = 0 the head's only move is weight decay's shrink (≈ lr·wd·steps)."""
    from experiments.entity_witness import entity_figures
    from experiments.figures import ENTITY_FIGURES
    from models.training.train import train

    encoder = dataclasses.replace(ENCODER, dropout=0.1)
    tables = {k: cue_corpus[k] for k in ("hard_negatives", "entity_vectors")}
    got = {}
    for name, weight in (("strong", 0.1), ("none", 0.0)):
        settings = TrainSettings(objectives=(EaseObjective(batch_size=16, entity_temperature=0.1,
                                                           entity_weight=weight),),
                                 encoder=encoder, steps=40, lr=1e-2, warmup_steps=0, weight_decay=0.01, seed=5,
                                 device="cpu")
        train(settings, tables, tmp_path / name, tokenizer_dir=cue_corpus["tokenizer"], progress=False,
              keep_checkpoints_after=False)
        got[name] = entity_figures(["sts17", "entity_retrieval_gain"], settings, tmp_path / name,
                                   tmp_path / name / "model", cue_corpus["held"], cue_corpus["tokenizer"], "cpu")
    strong = got["strong"]
    assert strong["entity_retrieval_chance"] == pytest.approx(12.5) and strong["entity_retrieval_blind"] == 12.5
    assert strong["entity_retrieval_acc"] >= strong["entity_retrieval_chance"] + 20
    assert strong["entity_retrieval_gain"] == pytest.approx(strong["entity_retrieval_acc"]
                                                            - strong["entity_retrieval_start"])
    assert strong["entity_retrieval_gain"] > max(15.0, 2 * strong["entity_retrieval_gain_se"])
    assert strong["entity_retrieval_balanced_gain"] > max(15.0, 2 * strong["entity_retrieval_balanced_gain_se"])
    assert set(strong) == set(ENTITY_FIGURES) == set(got["none"])
    assert strong["entity_head_movement"] > 0.1
    assert 0 < got["none"]["entity_head_movement"] < 1e-2 * 1e-2 * 40 * 1.01
    assert entity_figures(["sts17"], settings, tmp_path / "none", tmp_path / "none" / "model", None, None,
                          "cpu") == {}
