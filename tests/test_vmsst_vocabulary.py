"""VMSST's restricted output vocabulary (``VmsstObjective.decoder_vocab_size: corpus``; ``models.vmsst.decoder``): the
decoder's softmax over the token ids of the training corpus is the full-vocabulary log-softmax renormalised exactly
over that set (value and gradients, against a float64 reference), the component's loss differs from the full one by
exactly that renormalisation, a target outside the set is refused, the output layer holds only the set's rows (the
full layer's rows at the start), training with it moves every other weight exactly as the full-size layer restricted
by a gather does, the exported model is the same, and the settings reader takes ``corpus`` and refuses other words."""

from __future__ import annotations

import copy
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
    from models.training.tokenizer import train_tokenizer

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
    from models.training.train import build_components

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
    full_dec, table, x = _decoder_case()
    full_dec.checkpointing = checkpointing
    dec = copy.deepcopy(full_dec)
    start = x["start"].clone().requires_grad_()
    condition = x["condition"].clone().requires_grad_()
    targets, mask, ids = x["targets"], x["mask"], x["ids"]

    full = full_dec.logits(table, start, targets, condition)  # B×T×V, the unrestricted decoder
    assert full.shape[-1] == 60 and full.dtype == torch.float64
    picked = full.gather(-1, targets[..., None])[..., 0]
    ref = -((picked - full[..., ids].logsumexp(-1)) * mask).sum(1)
    ref_grads = _grads(full_dec, ref.sum(), start, condition)
    full_nll = full_dec.nll(table, start, targets, mask, condition).detach()
    outside = torch.ones(60, dtype=torch.bool)
    outside[ids] = False
    assert ref_grads["output.weight"][outside].abs().max() == 0  # rows outside S never get a gradient: droppable
    assert ref_grads["output.weight"][ids].abs().amax(1).min() > 0  # every row of S: some gradient

    dec.compact_output(ids)  # the copy keeps S's rows only
    s = ids.sort().values
    assert dec.output_ids.tolist() == s.tolist() and dec.output_size == len(ids)
    assert dec.output.weight.shape == (len(ids), 16 + 12)
    assert torch.equal(dec.output.weight, full_dec.output.weight[s])  # row i = the full layer's row of S_i
    assert full_dec.output.weight.shape == (60, 28)  # the original is left whole
    restricted = dec.nll(table, start, targets, mask, condition)
    got_grads = _grads(dec, restricted.sum(), start, condition)

    torch.testing.assert_close(restricted.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    assert got_grads.keys() == ref_grads.keys() and "output.weight" in got_grads
    for k, g in got_grads.items():
        want = ref_grads[k][s] if k == "output.weight" else ref_grads[k]
        torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-12, msg=lambda m, k=k: f"{k}: {m}")
    assert (restricted.detach() < full_nll).all()  # the full NLL also pays for the mass outside S
    # the restricted logits are the full ones of S's rows, in S's order
    torch.testing.assert_close(dec.logits(table, start, targets, condition), full[..., s], rtol=1e-12, atol=1e-12)
    # swapping the full layer back in gives the full decoder again
    compact = dec.output
    dec.use_output(full_dec.output, None)
    assert dec.output_ids is None and dec.output_size == 60
    torch.testing.assert_close(dec.nll(table, start, targets, mask, condition).detach(), full_nll, rtol=0, atol=0)
    dec.use_output(compact, ids)
    torch.testing.assert_close(dec.nll(table, start, targets, mask, condition).detach(), restricted.detach(), rtol=0,
                               atol=0)
    # a smaller set again, from the compact layer: the rows follow their ids
    dec.compact_output(s[::2])
    assert torch.equal(dec.output.weight, full_dec.output.weight[s[::2]])


def test_a_target_outside_the_set_is_refused_and_padding_is_not() -> None:
    dec, table, x = _decoder_case()
    dec.compact_output(x["ids"])
    targets = x["targets"].clone()
    assert x["mask"][3, 4] == 0 and 0 not in x["ids"].tolist()
    dec.nll(table, x["start"], targets, x["mask"], x["condition"])  # pad id 0 sits at masked positions only
    targets[0, 1] = 5  # a real position, an id outside S
    with pytest.raises(ValueError, match=r"1 target token\(s\) are not in the restricted output vocabulary of 13 ids,"
                                         r" e\.g\. id\(s\) \[5\]"):
        dec.nll(table, x["start"], targets, x["mask"], x["condition"])
    for bad in ([], [3, 60], [-1, 4]):
        with pytest.raises(ValueError, match=r"output vocabulary must be a non-empty set of ids in \[0, 60\)"):
            dec.compact_output(bad)
    with pytest.raises(ValueError, match=r"1 of the 2 ids have no row in the output layer of 13 ids, e\.g\. id\(s\) "
                                         r"\[5\]"):
        dec.compact_output([2, 5])  # 5 was dropped already
    with pytest.raises(ValueError, match=r"must be a bias-free 13×28 linear map, got \(60, 28\)"):
        dec.use_output(torch.nn.Linear(28, 60, bias=False).double(), x["ids"])


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
    # the same parameters, but the output layer only S's rows — those of the full layer: every other weight starts
    # as in the full model (the full layer is drawn, then cut, so the random stream is the same)
    state_f, state_c = m_full.state_dict(), m_corpus.state_dict()
    assert state_f.keys() == state_c.keys()
    for k in state_f:
        want = state_f[k][torch.as_tensor(expected)] if k == "decoder.output.weight" else state_f[k]
        assert torch.equal(state_c[k], want), k
    assert m_corpus.decoder.output.weight.shape[0] == len(expected) and m_full.decoder.output.weight.shape[0] == rows
    for name, p in student_f.state_dict().items():
        assert torch.equal(p, student_c.state_dict()[name]), name

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


class _GatheredOutput(torch.nn.Module):
    """The former ``corpus`` output layer, as the reference: full-size parameters, S's rows gathered every forward."""

    def __init__(self, full: torch.nn.Linear, ids: torch.Tensor) -> None:
        super().__init__()
        self.full, self.out_features = full, len(ids)
        self.register_buffer("ids", ids)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.full.weight.index_select(0, self.ids))


@pytest.mark.parametrize("translation_decoder", ["shared", "separate"])
def test_the_compact_output_layer_trains_everything_else_as_the_full_size_one(
        corpora: dict[str, Path], translation_decoder: str) -> None:
    """Three AdamW steps (weight decay, clipping) with the compact output layer move the student, every other module
    and the kept rows exactly as the full-size layer restricted by a gather does (same seed, same batches); the only
    difference is the full layer's rows outside S, which only AdamW's weight decay shrinks."""
    from models.training.train import _param_groups

    runs = {}
    for mode in ("gathered", "compact"):
        o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=0, translation_decoder=translation_decoder,
                           decoder_vocab_size=None if mode == "gathered" else "corpus")
        student, c = _component(o, corpora)
        model = c.modules["vmsst"]
        decoders = [m for m in model.modules() if isinstance(m, LatentConditionedDecoder)]
        assert len(decoders) == (1 if translation_decoder == "shared" else 2)
        if mode == "gathered":
            ids = torch.as_tensor(np.unique(np.concatenate([np.concatenate([np.asarray(x) for x in c.tokens]),
                                                            [c.eos]])))
            for d in decoders:
                position = torch.full((d.vocab_size,), -1, dtype=torch.long)
                position[ids] = torch.arange(len(ids))
                d.output = _GatheredOutput(d.output, ids)
                d.output_ids, d.output_position = ids, position
        modules = [student, c.modules]
        params = list({id(p): p for m in modules for p in m.parameters() if p.requires_grad}.values())
        opt = torch.optim.AdamW(_param_groups(modules, 0.01), lr=2e-3)
        losses = []
        for step in range(3):
            loss, _ = c.batch(step).direct()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
        runs[mode] = (student, model, losses, ids)
    (s_ref, m_ref, l_ref, ids), (s_new, m_new, l_new, _) = runs["gathered"], runs["compact"]
    assert l_new == pytest.approx(l_ref, rel=1e-6, abs=1e-6) and l_ref[0] != l_ref[-1]
    for name, p in s_ref.state_dict().items():  # the student (what is exported): the same weights
        torch.testing.assert_close(s_new.state_dict()[name], p, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    new = m_new.state_dict()
    outside = torch.ones(s_ref.backbone.get_input_embeddings().num_embeddings, dtype=torch.bool)
    outside[ids] = False
    for name, p in m_ref.state_dict().items():
        if name.endswith("output.full.weight"):
            kept = new[name.replace("output.full.weight", "output.weight")]
            torch.testing.assert_close(kept, p[ids], rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
        elif not name.endswith("output.ids"):
            torch.testing.assert_close(new[name], p, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    # the rows the compact layer drops: never a gradient, so only the weight decay moved them (the control)
    (decoder_ref, *_) = (m for m in m_ref.modules() if isinstance(m, LatentConditionedDecoder))
    full = decoder_ref.output.full.weight.detach()[outside]
    torch.manual_seed(0)  # the reference's initial layer again: the full layer as the corpus model drew it
    _, c0 = _component(VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=0,
                                      translation_decoder=translation_decoder), corpora)
    (decoder_0, *_) = (m for m in c0.modules["vmsst"].modules() if isinstance(m, LatentConditionedDecoder))
    start = decoder_0.output.weight.detach()[outside]
    torch.testing.assert_close(full, start * (1 - 2e-3 * 0.01) ** 3, rtol=1e-6, atol=1e-9)


def test_training_with_the_corpus_vocabulary_runs_and_saves_the_same_model_files(
        corpora: dict[str, Path], tmp_path: Path) -> None:
    from models.training.train import train

    out = {}
    for mode in (None, "corpus"):
        o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=1, decoder_vocab_size=mode)
        settings = TrainSettings(objectives=(o,), encoder=TINY, steps=2, lr=2e-3, warmup_steps=1, seed=5,
                                 device="cpu")
        res = train(settings, {"bitext_pairs": corpora["bitext_pairs"]}, tmp_path / str(mode),
                    tokenizer_dir=corpora["tokenizer"], progress=False)
        out[mode] = res
        assert np.isfinite(res.stats["final_loss"])
    files = {m: {p.relative_to(tmp_path / str(m)).as_posix(): p.stat().st_size
                 for p in (tmp_path / str(m) / "model").rglob("*") if p.is_file()} for m in out}
    # the exported sentence encoder is the student alone: the same files, of the same sizes (no decoder in them)
    assert files[None].keys() == files["corpus"].keys()
    weights = [f for f in files[None] if f.endswith((".safetensors", ".bin"))]
    assert weights and all(files[None][f] == files["corpus"][f] for f in weights)
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
