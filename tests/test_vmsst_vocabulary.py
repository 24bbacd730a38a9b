"""VMSST's restricted output vocabulary (``VmsstObjective.decoder_vocab_size: corpus``; ``models.vmsst.decoder``): the
decoder's softmax over the token ids of the training corpus is the full-vocabulary log-softmax renormalised exactly
over that set (value and gradients, against a float64 reference), the component's loss differs from the full one by
exactly that renormalisation, a target outside the set is refused, the parameters stay full-size, and the settings
reader takes ``corpus`` and refuses other words."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import SAMPLE

from models.encoder import SentenceEncoder
from models.objectives.vmsst import VmsstObjective
from models.settings import EncoderSettings, TokenizerSettings, TrainSettings
from models.settings_io import SettingsError, from_mapping
from models.vmsst import LatentConditionedDecoder, VmsstModel

TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.0,
                       projection=32)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample's en-de / en-fr bitext as ``bitext_pairs`` (English pivots) and a BPE tokenizer trained on it."""
    from models.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("vmsst_vocabulary")
    texts = []
    for lang in ("de", "fr"):
        src = (SAMPLE / "bitext" / f"en-{lang}.en").read_text().splitlines()
        tgt = (SAMPLE / "bitext" / f"en-{lang}.{lang}").read_text().splitlines()
        pairs = [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()]
        (root / "bitext_pairs" / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in range(len(pairs))],
                                 "pivot_lang": ["en"] * len(pairs), "pivot_text": [p for p, _ in pairs],
                                 "text": [t for _, t in pairs]}),
                       root / "bitext_pairs" / f"lang={lang}" / "part-0.parquet")
        texts += [x for p in pairs for x in p]
    pq.write_table(pa.table({"text": texts}), root / "tok_texts.parquet")
    # a vocabulary larger than the sample uses, so that the corpus set is a strict subset
    train_tokenizer(TokenizerSettings(vocab_size=2000), {"t": root / "tok_texts.parquet"}, root)
    return {"bitext_pairs": root / "bitext_pairs", "tokenizer": root / "tokenizer"}


def _component(objective: VmsstObjective, corpora: dict[str, Path]):
    from models.train import build_components

    settings = TrainSettings(objectives=(objective,), encoder=TINY, steps=2, lr=2e-3, warmup_steps=1, seed=5,
                             device="cpu")
    torch.manual_seed(0)
    student = SentenceEncoder.from_settings(settings.encoder, corpora["tokenizer"])
    (c,) = build_components(settings, {"bitext_pairs": corpora["bitext_pairs"]}, student, torch.device("cpu"))
    return student, c


def _decoder_case(seed: int = 3) -> tuple[LatentConditionedDecoder, torch.nn.Embedding, dict[str, torch.Tensor]]:
    """A float64 decoder over 60 ids, the set S (13 ids), and a padded batch whose real targets are all in S."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    dec = LatentConditionedDecoder(vocab_size=60, dim=16, condition_dim=12, heads=2, intermediate_size=24).double()
    with torch.no_grad():  # random weights of a larger scale than the init, so the logits spread
        dec.output.weight.normal_(0.0, 1.0, generator=g)
    table = torch.nn.Embedding(60, 16).double()
    ids = torch.tensor([41, 2, 7, 13, 19, 23, 29, 31, 37, 43, 47, 53, 59])  # unsorted on purpose
    targets = ids[torch.randint(0, len(ids), (4, 7), generator=g)]
    mask = torch.ones(4, 7, dtype=torch.long)
    mask[1, 5:], mask[3, 2:] = 0, 0
    targets[mask == 0] = 0  # the pad id, not in S: masked positions may hold it
    case = {"ids": ids, "targets": targets, "mask": mask,
            "start": torch.randn(4, 16, dtype=torch.float64, generator=g),
            "condition": torch.randn(4, 12, dtype=torch.float64, generator=g)}
    return dec, table, case


def _grads(dec: LatentConditionedDecoder, loss: torch.Tensor, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    dec.zero_grad(set_to_none=True)
    for x in inputs:
        x.grad = None
    loss.backward()
    out = {n: p.grad.clone() for n, p in dec.named_parameters() if p.grad is not None}
    out.update({f"input{i}": x.grad.clone() for i, x in enumerate(inputs)})
    return out


@pytest.mark.parametrize("checkpointing", [False, True])
def test_restricted_softmax_is_the_full_log_softmax_renormalised_over_the_set(checkpointing: bool) -> None:
    """Float64: the restricted NLL equals −Σ mask·(l_y − logsumexp_{v∈S} l_v) computed directly from the full
    vocabulary's logits, and so do its gradients with respect to every weight and to the decoder's inputs."""
    dec, table, x = _decoder_case()
    dec.checkpointing = checkpointing
    start = x["start"].clone().requires_grad_()
    condition = x["condition"].clone().requires_grad_()
    targets, mask, ids = x["targets"], x["mask"], x["ids"]

    full = dec.logits(table, start, targets, condition)  # B×T×V, the unrestricted decoder
    assert full.shape[-1] == 60 and full.dtype == torch.float64
    picked = full.gather(-1, targets[..., None])[..., 0]
    ref = -((picked - full[..., ids].logsumexp(-1)) * mask).sum(1)
    ref_grads = _grads(dec, ref.sum(), start, condition)
    full_nll = dec.nll(table, start, targets, mask, condition).detach()

    dec.restrict_output(ids)
    assert dec.output_ids.tolist() == sorted(ids.tolist()) and dec.output_size == len(ids)
    restricted = dec.nll(table, start, targets, mask, condition)
    got_grads = _grads(dec, restricted.sum(), start, condition)

    torch.testing.assert_close(restricted.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    assert got_grads.keys() == ref_grads.keys() and "output.weight" in got_grads
    for k, g in got_grads.items():
        torch.testing.assert_close(g, ref_grads[k], rtol=1e-10, atol=1e-12, msg=lambda m, k=k: f"{k}: {m}")
    outside = torch.ones(60, dtype=torch.bool)
    outside[ids] = False
    assert got_grads["output.weight"][outside].abs().max() == 0  # rows outside S: no gradient
    assert got_grads["output.weight"][ids].abs().amax(1).min() > 0  # every row of S: some gradient
    assert (restricted.detach() < full_nll).all()  # the full NLL also pays for the mass outside S
    # the restricted logits are the full ones of S's rows, in S's order
    torch.testing.assert_close(dec.logits(table, start, targets, condition), full[..., dec.output_ids],
                               rtol=1e-12, atol=1e-12)
    dec.restrict_output(None)  # back to the full vocabulary
    assert dec.output_ids is None and dec.output_size == 60
    torch.testing.assert_close(dec.nll(table, start, targets, mask, condition).detach(), full_nll, rtol=0, atol=0)


def test_a_target_outside_the_set_is_refused_and_padding_is_not() -> None:
    dec, table, x = _decoder_case()
    dec.restrict_output(x["ids"])
    targets = x["targets"].clone()
    assert x["mask"][3, 4] == 0 and 0 not in x["ids"].tolist()
    dec.nll(table, x["start"], targets, x["mask"], x["condition"])  # pad id 0 sits at masked positions only
    targets[0, 1] = 5  # a real position, an id outside S
    with pytest.raises(ValueError, match=r"1 target token\(s\) are not in the restricted output vocabulary of 13 ids,"
                                         r" e\.g\. id\(s\) \[5\]"):
        dec.nll(table, x["start"], targets, x["mask"], x["condition"])
    for bad in ([], [3, 60], [-1, 4]):
        with pytest.raises(ValueError, match=r"output vocabulary must be a non-empty set of ids in \[0, 60\)"):
            dec.restrict_output(bad)


def test_corpus_vocabulary_is_the_targets_ids_and_changes_the_loss_by_exactly_the_renormalisation(
        corpora: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    """The component collects the ids of every target (both sides) and the end token; with the same weights the
    corpus model's per-pair NLL is the full one minus Σ mask·(logsumexp_V − logsumexp_S), which is > 0 here."""
    base = VmsstObjective(batch_size=8, monitor_every=0)
    student_f, full = _component(base, corpora)
    with caplog.at_level(logging.INFO, logger="polysent.models.objectives.vmsst"):
        student_c, corpus = _component(VmsstObjective(batch_size=8, monitor_every=0, decoder_vocab_size="corpus"),
                                       corpora)
    m_full, m_corpus = full.modules["vmsst"], corpus.modules["vmsst"]
    rows = student_c.backbone.get_input_embeddings().num_embeddings
    expected = np.unique(np.concatenate([np.concatenate([np.asarray(x) for x in corpus.tokens]), [corpus.eos]]))
    assert m_corpus.decoder.output_ids.tolist() == expected.tolist() and 0 < len(expected) < rows
    assert m_full.decoder.output_ids is None
    assert f"VMSST output vocabulary: {len(expected):,} of {rows:,} ids occur in bitext_pairs" in caplog.text
    # same parameters, full-size, and the same saved state: the setting changes no weight and nothing saved
    state_f, state_c = m_full.state_dict(), m_corpus.state_dict()
    assert state_f.keys() == state_c.keys()
    for k in state_f:
        assert torch.equal(state_f[k], state_c[k]), k
    assert m_corpus.decoder.output.weight.shape[0] == rows

    for m in (student_f, student_c, m_full, m_corpus):
        m.eval()
    a, b = corpus.side(range(8), "a"), corpus.side(range(8), "b")
    with torch.no_grad():
        _, mu_b = VmsstModel.semantic_mean(student_f, b)
        logits = m_full.translation_logits(student_f, a, mu_b).double()
        s = torch.as_tensor(expected)
        renorm = ((logits.logsumexp(-1) - logits[..., s].logsumexp(-1)) * a.target_mask).sum(1)
        nll_full = m_full.translation_nll(student_f, a, mu_b)
        nll_corpus = m_corpus.translation_nll(student_c, a, mu_b)
        torch.testing.assert_close(m_corpus.translation_logits(student_c, a, mu_b), logits[..., s].float())
    assert (renorm > 0.1).all()  # the test could fail: the two losses do differ
    torch.testing.assert_close(nll_corpus.double(), nll_full.double() - renorm, rtol=1e-5, atol=1e-4)


def test_training_with_the_corpus_vocabulary_runs_and_saves_the_same_model_files(
        corpora: dict[str, Path], tmp_path: Path) -> None:
    from models.train import train

    out = {}
    for mode in (None, "corpus"):
        o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=1, decoder_vocab_size=mode)
        settings = TrainSettings(objectives=(o,), encoder=TINY, steps=2, lr=2e-3, warmup_steps=1, seed=5,
                                 device="cpu")
        res = train(settings, {"bitext_pairs": corpora["bitext_pairs"]}, tmp_path / str(mode),
                    tokenizer_dir=corpora["tokenizer"], progress=False)
        out[mode] = res
        assert np.isfinite(res.stats["final_loss"])
    files = {m: sorted(p.relative_to(tmp_path / str(m)).as_posix() for p in (tmp_path / str(m) / "model").rglob("*"))
             for m in out}
    assert files[None] == files["corpus"]
    assert out[None].stats["final_loss"] != out["corpus"].stats["final_loss"]


def test_settings_reader_takes_corpus_and_refuses_other_words() -> None:
    def read(value: object) -> VmsstObjective:
        return from_mapping(TrainSettings, {"objectives": [{"kind": "vmsst", "decoder_vocab_size": value}]}
                            ).objectives[0]

    assert read("corpus").decoder_vocab_size == "corpus"
    assert read(250002).decoder_vocab_size == 250002
    assert read(None).decoder_vocab_size is None
    assert VmsstObjective().decoder_vocab_size is None  # the default: the full vocabulary, as before
    for bad in ("full", "Corpus", 0, True):
        with pytest.raises(SettingsError, match=rf"^TrainSettings\.objectives\.0\.decoder_vocab_size: .*\(value "
                                                rf"{bad!r}\); expected an integer ≥ 1 or 'corpus' or null$"):
            read(bad)
