"""VMSST (models/vmsst/, models/objectives/vmsst.py, VmsstComponent): the decoder has no cross-attention and depends
on z_sem, the KL term and its annealing, gradients into both encoders, a tiny model learning on the sample bitext,
the μ_sem export, the baselines on the same code, the monitoring columns and the refusals before training; the
paper's readings: one shared decoder whose translation terms read μ_sem of the other side alone (no z_lang: the
no-information floor, zero gradient into the language encoder, the swap probe separating on a toy corpus), z_sem's
side alternating within the batch, the dot-product contrastive term, VMSST-CONTRASTIVE = contrastive + λ·VMSST with
λ by setting, and dropout only for CONTRASTIVE; the decoders' input embeddings (shared, detached, own) and the
scale-free active-units count."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import SAMPLE

from models.encoder import SentenceEncoder
from models.objectives.contrastive import info_nce
from models.objectives.vmsst import VmsstObjective, default_vmsst_weight, dot_product_info_nce
from models.settings import EncoderSettings, TokenizerSettings, TrainSettings
from models.training import distributed
from models.vmsst import LatentConditionedDecoder, VmsstModel
from models.vmsst.loss import gaussian_kl, kl_annealing, sequence_nll, vmsst_loss

TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.0,
                       projection=32)


def _write_pairs(root: Path, rows: dict[str, list[tuple[str, str]]]) -> Path:
    """A hive-partitioned ``bitext_pairs`` with English pivots: {lang: [(pivot_text, text)]}."""
    for lang, pairs in rows.items():
        (root / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in range(len(pairs))],
                                 "pivot_lang": ["en"] * len(pairs), "pivot_text": [p for p, _ in pairs],
                                 "text": [t for _, t in pairs]}), root / f"lang={lang}" / "part-0.parquet")
    return root


def _sample_rows() -> dict[str, list[tuple[str, str]]]:
    rows = {}
    for lang in ("de", "fr"):
        src = (SAMPLE / "bitext" / f"en-{lang}.en").read_text().splitlines()
        tgt = (SAMPLE / "bitext" / f"en-{lang}.{lang}").read_text().splitlines()
        rows[lang] = [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()]
    return rows


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample's en-de / en-fr bitext as ``bitext_pairs`` and a BPE tokenizer trained on it."""
    from models.training.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("vmsst")
    rows = _sample_rows()
    pairs = _write_pairs(root / "bitext_pairs", rows)
    texts = [x for r in rows.values() for p in r for x in p]
    pq.write_table(pa.table({"text": texts}), root / "tok_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=500), {"t": root / "tok_texts.parquet"}, root)
    return {"bitext_pairs": pairs, "tokenizer": root / "tokenizer"}


def _settings(objective: VmsstObjective | None = None, **kw) -> TrainSettings:
    base = {"objectives": (objective or VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=2),),
            "encoder": TINY, "steps": 4, "lr": 2e-3, "warmup_steps": 1, "seed": 5, "device": "cpu"}
    return TrainSettings(**{**base, **kw})


def _component(settings: TrainSettings, corpora: dict[str, Path], tables: dict[str, Path] | None = None):
    from models.training.train import build_components

    torch.manual_seed(0)
    student = SentenceEncoder.from_settings(settings.encoder, corpora["tokenizer"])
    (c,) = build_components(settings, tables or {"bitext_pairs": corpora["bitext_pairs"]}, student,
                            torch.device("cpu"))
    return student, c


def _train(settings: TrainSettings, corpora: dict[str, Path], out: Path, tables: dict[str, Path] | None = None,
           **kw) -> dict:
    from models.training.train import train

    return train(settings, tables or {"bitext_pairs": corpora["bitext_pairs"]}, out,
                 tokenizer_dir=corpora["tokenizer"], progress=False, **kw)


# ---------------------------------------------------------------------------------------------- decoder
def test_decoder_has_no_cross_attention_and_reads_s_everywhere() -> None:
    dec = LatentConditionedDecoder(vocab_size=50, dim=16, condition_dim=32, layers=2, heads=2, intermediate_size=24)
    names = [n for n, _ in dec.named_parameters()]
    assert not [n for n in names if any(w in n for w in ("encoder_attn", "cross", "memory", "enc_dec"))]
    per_layer = {n.split(".", 2)[2] for n in names if n.startswith("layers.")}
    assert per_layer == {f"{m}.{p}" for m in ("qkv", "attention_out", "attention_norm", "latent", "latent_norm",
                                              "fc1", "fc2", "output_norm") for p in ("weight", "bias")}
    assert {n for n in names if not n.startswith("layers.")} == {"positions.weight", "input_norm.weight",
                                                                "input_norm.bias", "output.weight"}
    # [x_t ; s] into every layer's latent block and into the output projection (V × (d + |s|), 3d for VMSST)
    assert all(layer.latent.in_features == 16 + 32 for layer in dec.layers)
    assert tuple(dec.output.weight.shape) == (50, 16 + 32)
    assert "memory" not in inspect.signature(dec.logits).parameters


def test_changing_z_sem_changes_the_logits_and_the_future_does_not_leak() -> None:
    torch.manual_seed(0)
    dec = LatentConditionedDecoder(vocab_size=40, dim=16, condition_dim=24, heads=2, intermediate_size=32).eval()
    table = torch.nn.Embedding(40, 16)
    start, targets = torch.randn(3, 16), torch.randint(0, 40, (3, 7))
    z_lang, z_sem = torch.randn(3, 12), torch.randn(3, 12)
    base = dec.logits(table, start, targets, torch.cat([z_lang, z_sem], 1))
    assert torch.equal(base, dec.logits(table, start, targets, torch.cat([z_lang, z_sem], 1)))
    other = dec.logits(table, start, targets, torch.cat([z_lang, z_sem + 0.5], 1))
    assert (other - base).abs().amax(-1).min() > 1e-4  # every position of every row moves with z_sem
    changed = targets.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 40  # target 4 is the input of position 5: positions 0..4 cannot see it
    after = dec.logits(table, start, changed, torch.cat([z_lang, z_sem], 1))
    assert torch.allclose(after[:, :5], base[:, :5], atol=1e-6) and not torch.allclose(after[:, 5:], base[:, 5:])


def test_decoder_checkpointing_gives_the_same_loss_and_gradients() -> None:
    torch.manual_seed(1)
    dec = LatentConditionedDecoder(vocab_size=30, dim=8, condition_dim=8, heads=2, intermediate_size=16)
    table = torch.nn.Embedding(30, 8)
    start, s = torch.randn(4, 8), torch.randn(4, 8, requires_grad=True)
    targets, mask = torch.randint(0, 30, (4, 6)), torch.ones(4, 6)
    mask[0, 3:] = 0
    grads = []
    for flag in (False, True):
        dec.checkpointing = flag
        dec.zero_grad()
        s.grad = None
        loss = dec.nll(table, start, targets, mask, s).sum()
        loss.backward()
        grads.append((loss.detach(), s.grad.clone(), dec.output.weight.grad.clone()))
    for x, y in zip(*grads, strict=True):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_nll_scores_the_real_positions_only_with_the_masked_loss_and_its_gradients(checkpointing: bool) -> None:
    """Float64: the NLL that projects only the real positions (index found from the mask, or given) equals
    ``sequence_nll`` of every position's logits masked afterwards (``score_padding``, and the formula directly) —
    values and gradients of every weight, the inputs and the shared table; the decoder inputs looked up together with
    another id tensor (``lookup_rows``: one gradient of the table) change nothing either."""
    from models.vmsst.decoder import lookup_rows

    torch.manual_seed(3)
    dec = LatentConditionedDecoder(vocab_size=30, dim=8, condition_dim=6, heads=2, intermediate_size=16).double()
    dec.checkpointing = checkpointing
    table = torch.nn.Embedding(30, 8, padding_idx=0).double()
    start = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    s = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    targets, mask = torch.randint(1, 30, (4, 7)), torch.ones(4, 7, dtype=torch.long)
    mask[0, 3:], mask[2, 5:], mask[3, 1:] = 0, 0, 0
    targets[mask == 0] = 0  # padding
    other = torch.randint(1, 30, (4, 5))  # e.g. the encoder's ids of the same batch

    def grads(run) -> list[torch.Tensor]:
        for p in [*dec.parameters(), *table.parameters(), start, s]:
            p.grad = None
        loss = run()
        loss.sum().backward()
        return [loss.detach(), start.grad.clone(), s.grad.clone(), table.weight.grad.clone(),
                *(p.grad.clone() for p in dec.parameters())]

    def reference() -> torch.Tensor:
        return sequence_nll(dec.logits(table, start, targets, s), targets, mask)

    def scored_all() -> torch.Tensor:
        dec.score_padding = True
        try:
            return dec.nll(table, start, targets, mask, s)
        finally:
            dec.score_padding = False

    def together() -> torch.Tensor:
        prefix, encoded = lookup_rows(table, targets[:, :-1], other)
        index = mask.flatten().nonzero().squeeze(1)
        return dec.nll(table, start, targets, mask, s, prefix=prefix, index=index) + 0 * encoded.sum()

    want = grads(reference)
    for run in (lambda: dec.nll(table, start, targets, mask, s), scored_all, together):
        for x, y in zip(grads(run), want, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)
    assert float(want[0][3]) > 0 and want[3][0].abs().max() == 0  # a one-token row scores; the pad row: no gradient
    # lookup_rows: the values of one lookup each
    a, b = lookup_rows(table, targets, other)
    assert torch.equal(a, table(targets)) and torch.equal(b, table(other))


# ---------------------------------------------------------------------------------------------- objective maths
def test_gaussian_kl_equals_the_closed_form_and_free_bits_floor_each_dimension() -> None:
    torch.manual_seed(2)
    mu, logvar = torch.randn(5, 6), torch.randn(5, 6)
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(mu, (0.5 * logvar).exp()),
                                            torch.distributions.Normal(torch.zeros(5, 6), torch.ones(5, 6))).sum(1)
    torch.testing.assert_close(gaussian_kl(mu, logvar), ref)
    hand = -0.5 * (1 + logvar - mu**2 - logvar.exp()).sum(1)
    torch.testing.assert_close(gaussian_kl(mu, logvar), hand)
    assert torch.allclose(gaussian_kl(torch.zeros(2, 4), torch.zeros(2, 4)), torch.zeros(2))  # posterior = prior
    per_dim = -0.5 * (1 + logvar - mu**2 - logvar.exp())
    torch.testing.assert_close(gaussian_kl(mu, logvar, free_bits=3.0), per_dim.clamp(min=0.5).sum(1))
    with pytest.raises(ValueError, match="one shape"):
        gaussian_kl(mu, logvar[:, :3])


def test_kl_annealing_is_linear_then_one() -> None:
    assert [kl_annealing(t, 4) for t in (0, 1, 2, 4, 9)] == [0.0, 0.25, 0.5, 1.0, 1.0]
    assert kl_annealing(0, 0) == 1.0  # x0 = 0: no annealing
    assert kl_annealing(100_000, 1_000_000) == pytest.approx(0.1)  # the paper's end point
    with pytest.raises(ValueError):
        kl_annealing(-1, 10)


def test_vmsst_loss_combines_translation_and_weighted_elbo() -> None:
    tr, rec, kl = torch.tensor([4.0, 2.0]), torch.tensor([10.0, 6.0]), torch.tensor([3.0, 1.0])
    torch.testing.assert_close(vmsst_loss(tr, rec, kl, elbo_weight=0.1, beta=0.5),
                               torch.tensor([4 + 0.1 * (10 + 1.5), 2 + 0.1 * (6 + 0.5)]))
    assert vmsst_loss(tr) is tr  # BITRANSLATION
    with pytest.raises(ValueError, match="both"):
        vmsst_loss(tr, rec)
    logits = torch.log_softmax(torch.randn(2, 3, 5), -1)
    targets, mask = torch.randint(0, 5, (2, 3)), torch.tensor([[1, 1, 0], [1, 1, 1]])
    ref = -(logits.gather(2, targets[..., None])[..., 0] * mask).sum(1)
    torch.testing.assert_close(sequence_nll(logits, targets, mask), ref)


# ---------------------------------------------------------------------------------------------- the model
def test_gradients_reach_both_encoders_and_reads_b_picks_the_semantic_side(corpora: dict[str, Path]) -> None:
    student, c = _component(_settings(), corpora)
    model: VmsstModel = c.modules["vmsst"]
    # the language encoder reads the student's word-embedding table, which the component does not own twice
    assert not any(p is student.backbone.get_input_embeddings().weight for p in c.modules.parameters())
    loss, metrics = c.batch(0).direct()
    loss.backward()
    for name, module in (("semantic encoder", student.backbone.encoder), ("W_mu", student.post[0]),
                         ("language encoder", model.language_encoder), ("language head", model.language_head),
                         ("semantic logvar", model.semantic_logvar), ("decoder", model.decoder)):
        grads = [p.grad for p in module.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads), name
        assert sum(float(g.abs().sum()) for g in grads) > 0, name
    # the language encoder's path alone moves the shared embedding table
    student.zero_grad()
    a, b = c.side(range(4), "a"), c.side(range(4), "b")
    table = student.backbone.get_input_embeddings()
    model.language_encoder(table, model.language_embeddings(a.language), a.ids, a.mask).sum().backward()
    assert float(table.weight.grad.abs().sum()) > 0
    assert {"translation_nll", "reconstruction_nll", "kl_sem", "kl_lang", "kl_beta", "active_units_sem",
            "active_units_lang", "active_units_sem_relative", "active_units_lang_relative", "swap_nll_own",
            "swap_nll_swapped"} <= set(metrics)
    assert float(metrics["kl_beta"]) == 0.0  # update 0 of a 10-step annealing
    # reads_b picks the side z_sem reads, for the whole batch or per row (same pairs, same noise)
    model.eval()
    student.eval()
    kls = []
    for reads_b in (False, True, torch.zeros(4, dtype=torch.bool), torch.tensor([False, True, False, True])):
        torch.manual_seed(7)
        kls.append(float(model(student, a, b, update=0, reads_b=reads_b).metrics["kl_sem"]))
    assert kls[0] == kls[2] != kls[1] and kls[3] not in (kls[0], kls[1])


def test_the_model_is_built_from_a_typed_config_the_objective_picks(corpora: dict[str, Path]) -> None:
    """``VmsstModel`` reads a ``VmsstModelConfig`` (issue 39): the objective's model fields and λ, nothing else of
    the objective; the same config builds the same model whatever objective it came from."""
    import dataclasses

    from models.vmsst import VmsstModelConfig

    o = VmsstObjective(variant="bitranslation", decoder_layers=2, decoder_heads=4, free_bits=0.5, kl_anneal_steps=10,
                       decoder_embeddings="detached", dropout=0.1)
    config = o.model_config(0.3)
    assert config == VmsstModelConfig(elbo_weight=0.3, generative=False, decoder_layers=2, decoder_heads=4,
                                      free_bits=0.5, kl_anneal_steps=10, decoder_embeddings="detached", dropout=0.1)
    shared = {f.name for f in dataclasses.fields(VmsstModelConfig)} - {"elbo_weight", "generative"}
    assert shared <= {f.name for f in dataclasses.fields(VmsstObjective)}
    assert {n: getattr(config, n) for n in shared} == {n: getattr(o, n) for n in shared}
    assert VmsstObjective().model_config(0.1).generative and VmsstObjective(variant="vmsst_contrastive").model_config(
        0.1).generative
    torch.manual_seed(0)
    student = SentenceEncoder.from_settings(TINY, corpora["tokenizer"])
    model = VmsstModel(student, config, ["de", "en"], max_positions=16)
    assert model.settings is config and model.elbo_weight == 0.3 and model.decoder_embeddings == "detached"
    assert not hasattr(model, "objective") and not hasattr(model, "decoder")  # BITRANSLATION: no ELBO decoder
    assert len(model.translation_decoder.layers) == 2 and model.translation_decoder.layers[0].heads == 4
    generative = VmsstModel(student, dataclasses.replace(config, generative=True), ["de", "en"], max_positions=16)
    assert generative.shared_translation and not hasattr(generative, "translation_decoder")


def test_both_sides_in_one_pass_give_each_sides_own_outputs(corpora: dict[str, Path]) -> None:
    """The student and the language encoder run sides a and b as one batch, right-padded to the wider side
    (``stacked_inputs``): each row's μ_sem and language encoding are those of its own side's batch."""
    from models.vmsst.model import stacked_inputs

    student, c = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0)), corpora)
    model: VmsstModel = c.modules["vmsst"]
    a, b = next((a, b) for i in range(0, len(c.pairs) - 8, 8)
                for a, b in [(c.side(range(i, i + 8), "a"), c.side(range(i, i + 8), "b"))]
                if a.ids.shape[1] != b.ids.shape[1])  # one side is padded further in the stacked batch
    (h_a, mu_a), (h_b, mu_b) = VmsstModel.semantic_means(student, a, b)
    for (h, mu), side in (((h_a, mu_a), a), ((h_b, mu_b), b)):
        want_h, want_mu = VmsstModel.semantic_mean(student, side)
        torch.testing.assert_close(h, want_h, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(mu, want_mu, rtol=1e-5, atol=1e-6)
    ids, mask = stacked_inputs(student, a, b)
    table = student.backbone.get_input_embeddings()
    lang = model.language_embeddings(torch.cat([a.language, b.language]))
    both = model.language_encoder(table, lang, ids, mask)
    for part, side in ((both[:8], a), (both[8:], b)):
        want = model.language_encoder(table, model.language_embeddings(side.language), side.ids, side.mask)
        torch.testing.assert_close(part, want, rtol=1e-5, atol=1e-6)


def test_tiny_vmsst_lowers_its_loss_and_logs_monitoring(corpora: dict[str, Path], tmp_path: Path) -> None:
    o = VmsstObjective(batch_size=16, kl_anneal_steps=20, monitor_every=10)
    res = _train(_settings(o, steps=60, lr=3e-3, warmup_steps=5), corpora, tmp_path / "run")
    t = pq.read_table(tmp_path / "run" / res.tables["train_steps"]).to_pydict()
    loss = t["loss"]
    assert np.mean(loss[-8:]) < 0.8 * np.mean(loss[:8]), (loss[:8], loss[-8:])
    assert np.mean(t["reconstruction_nll"][-8:]) < np.mean(t["reconstruction_nll"][:8])
    assert t["kl_beta"][0] == 0.0 and t["kl_beta"][-1] == 1.0 and t["kl_beta"][10] == pytest.approx(0.5)
    assert all(v is not None and v >= 0 for v in t["kl_sem"] + t["kl_lang"])
    probe = [i for i, v in enumerate(t["swap_nll_own"]) if v is not None]
    assert probe == [0, 10, 20, 30, 40, 50]  # every monitor_every updates, null otherwise
    assert all(t["swap_nll_swapped"][i] is not None for i in probe)
    assert 0 < t["active_units_sem"][-1] <= 32
    assert all(0 < v <= 32 for v in t["active_units_sem_relative"] + t["active_units_lang_relative"])
    assert res.stats["objectives"] == ["vmsst"]


def test_export_is_mu_sem_in_sentence_transformers_format(corpora: dict[str, Path], tmp_path: Path) -> None:
    settings = _settings(steps=3)
    _train(settings, corpora, tmp_path / "run")
    folder = tmp_path / "run" / "model"
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Dense"]
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
    dense = json.loads((folder / "2_Dense" / "config.json").read_text())
    assert dense["bias"] is False and dense["activation_function"].endswith("Identity")
    texts = ["Der Hund schläft.", "The dog sleeps.", "Le chien dort dans la maison."]
    loaded = SentenceEncoder.load(folder)
    mine = loaded.encode(texts, normalize=False)
    # μ_sem as the component computes it in training = the exported model's embedding
    student, c = _component(settings, corpora)
    student.load_state_dict(loaded.state_dict())
    student.eval()
    side = c.side([0, 1], "a")
    _, mu = VmsstModel.semantic_mean(student, side)
    ref = student.encode([c.pairs.a[0], c.pairs.a[1]], normalize=False)
    np.testing.assert_allclose(mu.detach().numpy(), ref, atol=1e-5)
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(folder), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(theirs, mine, atol=1e-5)


def test_a_pretrained_model_ending_in_normalize_gets_w_mu_before_it(corpora: dict[str, Path], tmp_path: Path) -> None:
    """multilingual-e5 and all-MiniLM are saved as Transformer → Pooling → Normalize: ``encoder.projection`` goes
    between pooling and the Normalize, VMSST reads μ_sem before the normalisation, and the export keeps both."""
    from models.encoder import Normalize

    base = SentenceEncoder.from_settings(dataclasses.replace(TINY, projection=None), corpora["tokenizer"])
    base.post = torch.nn.ModuleList([Normalize()])
    base.save(tmp_path / "pretrained")
    settings = _settings()
    encoder = dataclasses.replace(TINY, pretrained=str(tmp_path / "pretrained"), projection=32)
    settings = dataclasses.replace(settings, encoder=encoder)
    student, c = _component(settings, corpora)
    assert [type(m).__name__ for m in student.post] == ["Dense", "Normalize"]
    with torch.no_grad():
        student.post[0].linear.weight.mul_(3.0)  # so that μ_sem is not unit length
    student.eval()
    side = c.side([0, 1], "a")
    _, mu = VmsstModel.semantic_mean(student, side)
    assert not torch.allclose(mu.norm(dim=-1), torch.ones(2), atol=1e-3)
    ref = student.encode([c.pairs.a[0], c.pairs.a[1]], normalize=False)  # the saved Normalize applies
    np.testing.assert_allclose(ref, torch.nn.functional.normalize(mu, dim=-1).detach().numpy(), atol=1e-5)
    student.save(tmp_path / "exported")
    modules = json.loads((tmp_path / "exported" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Dense", "Normalize"]


def test_bitranslation_and_vmsst_contrastive_run_on_the_same_code(corpora: dict[str, Path], tmp_path: Path) -> None:
    _, c = _component(_settings(VmsstObjective(variant="bitranslation", batch_size=8)), corpora)
    model = c.modules["vmsst"]
    assert not hasattr(model, "decoder") and not hasattr(model, "language_encoder")
    loss, metrics = c.batch(0).direct()
    units = {"active_units_sem", "active_units_sem_relative"}
    assert set(metrics) == {"translation_nll", "translation_nll_unrelated", *units}  # update 0: probe
    assert set(c.batch(1).direct()[1]) == {"translation_nll", *units}
    assert float(loss.detach()) == pytest.approx(2 * float(metrics["translation_nll"]), rel=1e-5)
    # active units of z_sem count over μ_sem of both sides in every variant: same student, same batch → same count
    _, cv = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0)), corpora)
    _, vmsst_metrics = cv.batch(0).direct()
    assert float(vmsst_metrics["active_units_sem"]) == float(metrics["active_units_sem"]) > 0
    assert float(vmsst_metrics["active_units_sem_relative"]) == float(metrics["active_units_sem_relative"]) > 0
    assert "swap_nll_own" not in vmsst_metrics  # monitor_every 0: no swap probe, not even at update 0
    o = VmsstObjective(variant="vmsst_contrastive", batch_size=8, kl_anneal_steps=1)
    res = _train(_settings(o, steps=2), corpora, tmp_path / "vc")
    t = pq.read_table(tmp_path / "vc" / res.tables["train_steps"]).to_pydict()
    assert all(v is not None and v > 0 for v in t["contrastive_loss"])
    assert all(v is not None and v > 0 for v in t["vmsst_loss"])
    _, c = _component(_settings(o), corpora)
    assert c.vmsst_weight == 0.0005 and c.elbo_weight == 0.1  # the paper's values for a small random init
    _, c24 = _component(_settings(o, encoder=dataclasses.replace(TINY, num_layers=24)), corpora)
    assert c24.vmsst_weight == 0.001  # the 24-layer random-init setting
    with pytest.raises(ValueError, match=r"vmsst_weight .* applies to variant vmsst_contrastive"):
        _component(_settings(VmsstObjective(vmsst_weight=0.1)), corpora)
    with pytest.raises(ValueError, match="vmsst_weight must be ≥ 0"):
        _component(_settings(VmsstObjective(variant="vmsst_contrastive", vmsst_weight=-0.1)), corpora)


def _student_grads(student: SentenceEncoder, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    student.zero_grad(set_to_none=True)
    loss.backward()
    return {k: p.grad.clone() if p.grad is not None else torch.zeros_like(p) for k, p in student.named_parameters()}


def _flat(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.flatten() for g in grads.values()])


def test_vmsst_contrastive_is_infonce_plus_lambda_times_the_vmsst_loss(corpora: dict[str, Path]) -> None:
    """Paper §6.3: L = L_CONTRASTIVE + λ·L_VMSST — the contrastive vs generative gradient ratio is 1/λ."""
    lam, step = 0.25, 2
    o = VmsstObjective(variant="vmsst_contrastive", batch_size=8, kl_anneal_steps=4, monitor_every=0, vmsst_weight=lam)
    student, c = _component(_settings(o), corpora)
    loss, metrics = c.batch(step).direct()
    torch.testing.assert_close(loss.detach(), metrics["contrastive_loss"] + lam * metrics["vmsst_loss"])
    g_total = _student_grads(student, loss)
    # the contrastive term alone, computed here: symmetric InfoNCE on μ_sem of both sides of the same batch
    idx = c.plan.batch(step)
    (_, mu_a), (_, mu_b) = VmsstModel.semantic_means(student, c.side(list(idx), "a"), c.side(list(idx), "b"))
    contrastive = dot_product_info_nce(mu_a, mu_b)  # duplicate_negatives keep: no same-meaning mask
    torch.testing.assert_close(contrastive.detach(), metrics["contrastive_loss"])
    g_con = _student_grads(student, contrastive)
    # the VMSST loss alone: variant vmsst on the same initialisation, batch and noise
    student_v, cv = _component(_settings(dataclasses.replace(o, variant="vmsst", vmsst_weight=None)), corpora)
    for x, y in ((student, student_v), (c.modules, cv.modules)):
        assert all(torch.equal(p, q) for p, q in zip(x.state_dict().values(), y.state_dict().values(), strict=True))
    loss_v, _ = cv.batch(step).direct()
    torch.testing.assert_close(loss_v.detach(), metrics["vmsst_loss"])
    g_vmsst = _student_grads(student_v, loss_v)
    for k, g in g_total.items():
        torch.testing.assert_close(g, g_con[k] + lam * g_vmsst[k], atol=1e-6, rtol=1e-4, msg=lambda m, k=k: f"{k}: {m}")
    total, con, gen = _flat(g_total), _flat(g_con), _flat(g_vmsst)
    assert float(con.norm()) > 1e-3 and float(gen.norm()) > 1e-3
    assert not torch.allclose(con, gen, atol=1e-4)  # the two terms pull differently: the test can tell them apart
    # coefficient of the contrastive term 1, of the generative one λ: ratio 1/λ
    assert float((total - con).norm() / gen.norm()) == pytest.approx(lam, rel=1e-3)
    # λ → 0: pure contrastive gradients
    student_0, c0 = _component(_settings(dataclasses.replace(o, vmsst_weight=0.0)), corpora)
    loss_0, _ = c0.batch(step).direct()
    torch.testing.assert_close(loss_0.detach(), contrastive.detach())
    g_0 = _student_grads(student_0, loss_0)
    for k, g in g_0.items():
        torch.testing.assert_close(g, g_con[k], atol=1e-7, rtol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


def test_shared_translation_decoder_is_the_one_decoder_reading_mu_sem_alone(corpora: dict[str, Path]) -> None:
    student, c = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0)), corpora)
    model: VmsstModel = c.modules["vmsst"]
    decoders = [m for m in model.modules() if isinstance(m, LatentConditionedDecoder)]
    assert decoders == [model.decoder] and not hasattr(model, "translation_decoder")
    assert model.decoder.condition_dim == 2 * TINY.projection  # [z_lang ; z_sem], the 3d × V output projection
    student_s, cs = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0,
                                                        translation_decoder="separate")), corpora)
    separate: VmsstModel = cs.modules["vmsst"]
    assert isinstance(separate.translation_decoder, LatentConditionedDecoder)
    assert separate.translation_decoder.condition_dim == TINY.projection
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(separate) - count(model) == count(separate.translation_decoder) > 0
    for m in (student, model, student_s, separate):
        m.eval()
    a, b = c.side(range(4), "a"), c.side(range(4), "b")
    with torch.no_grad():
        _, mu_b = VmsstModel.semantic_mean(student, b)
        base = model.translation_logits(student, a, mu_b)
        table = student.backbone.get_input_embeddings()
        zero = torch.zeros(4, TINY.projection)
        ref = model.decoder.logits(table, model.language_embeddings(a.language), a.targets, torch.cat([zero, mu_b], 1))
        torch.testing.assert_close(base, ref)  # the ELBO's decoder on [0 (z_lang's prior mean) ; μ_sem of the other]
        assert (model.translation_logits(student, a, mu_b + 0.5) - base).abs().amax(-1).min() > 1e-4
        sep = separate.translation_logits(student_s, a, mu_b)
        assert (separate.translation_logits(student_s, a, mu_b + 0.5) - sep).abs().amax(-1).min() > 1e-4
        # through the loss: the target side's language sample never reaches the translation terms
        z = torch.randn(4, TINY.projection, generator=torch.Generator().manual_seed(3))
        for m, enc in ((model, student), (separate, student_s)):
            nll = [float(m(enc, a, b, update=0, noise={"sem": zero, "lang_a": eps, "lang_b": eps})
                         .metrics["translation_nll"]) for eps in (zero, 5 * z)]
            assert nll[0] == nll[1], nll
            rec = [float(m(enc, a, b, update=0, noise={"sem": zero, "lang_a": eps, "lang_b": eps})
                         .metrics["reconstruction_nll"]) for eps in (zero, 5 * z)]
            assert rec[0] != rec[1]  # …while the reconstruction does read z_lang: the probe can tell them apart


def test_translation_terms_give_the_language_encoder_no_gradient(corpora: dict[str, Path]) -> None:
    """λ = 0 leaves the translation terms alone in the loss: nothing of the language encoder, its head or the language
    variables' noise may receive a gradient from them (the leak fed the target's z_lang into those terms)."""
    for decoder in ("shared", "separate"):
        student, c = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0, elbo_weight=0.0,
                                                         translation_decoder=decoder)), corpora)
        model: VmsstModel = c.modules["vmsst"]
        loss, _ = c.batch(0).direct()
        loss.backward()
        for module in (model.language_encoder, model.language_head):
            grads = [p.grad for p in module.parameters()]
            assert all(g is None or float(g.abs().sum()) == 0.0 for g in grads), decoder
        moved = model.decoder if decoder == "shared" else model.translation_decoder
        assert sum(float(p.grad.abs().sum()) for p in moved.parameters() if p.grad is not None) > 0
        assert float(student.post[0].linear.weight.grad.abs().sum()) > 0  # W_μ learns from the translation terms


def test_translation_nll_cannot_beat_the_no_information_floor_when_mu_sem_is_noise(corpora: dict[str, Path]) -> None:
    """256 random sentences whose other side's μ_sem is pure noise: no decoder can do better than the uniform choice
    among the 256, ln 256 = 5.55 nats a sentence. The model's translation term (``VmsstModel.translation_nll``, the
    project's decoder, language encoder and embedding table all trainable) stays at or above that floor; the old
    reading — the target's own z_lang in the condition — falls far below it, which this test reproduces as its
    control, so it can fail."""
    from models.vmsst import SideBatch
    from models.vmsst.inference import GaussianHead

    n, length, k = 256, 4, TINY.projection
    floor = float(np.log(n))

    def train(leak: bool) -> float:
        student, c = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0)), corpora)
        model: VmsstModel = c.modules["vmsst"]
        table = student.backbone.get_input_embeddings()
        targets = torch.randint(5, 60, (n, length), generator=torch.Generator().manual_seed(1))
        ids = torch.cat([torch.full((n, 1), 1), targets, torch.full((n, 1), 2)], 1)
        side = SideBatch(ids, torch.ones_like(ids), targets, torch.ones_like(targets), torch.zeros(n, dtype=torch.long))
        opt = torch.optim.Adam([*model.parameters(), table.weight], lr=1e-2)

        def nll(rows: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
            t = SideBatch(*(x[rows] for x in (side.ids, side.mask, side.targets, side.target_mask, side.language)))
            if not leak:
                return model.translation_nll(student, t, noise)
            # the old reading: [z_lang of the target itself ; μ_sem of the other side] into the shared decoder
            start = model.language_embeddings(t.language)
            mu_l, logvar_l = model.language_head(model.language_encoder(table, start, t.ids, t.mask))
            condition = torch.cat([GaussianHead.sample(mu_l, logvar_l), noise], 1)
            return model.decoder.nll(table, start, t.targets, t.target_mask, condition)

        gen = torch.Generator().manual_seed(2)
        for _ in range(400):
            rows = torch.randint(0, n, (64,), generator=gen)
            loss = nll(rows, torch.randn(64, k, generator=gen)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            return float(nll(torch.arange(n), torch.randn(n, k, generator=gen)).mean())

    fixed, leaked = train(False), train(True)
    assert floor - 0.05 <= fixed < floor + 1.5, (fixed, floor)  # it learned the set, and no more
    assert leaked < 1.0, (leaked, floor)  # the control: the decoder copies the target through z_lang


def _semantic_sources(c, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(z_sem, μ_sem(a), μ_sem(b)) of this component's batch ``step``, with ε_sem = 0 so that z_sem = μ_sem of the
    side each row reads."""
    model = c.modules["vmsst"]
    seen = {}
    forward = model.forward

    def spy(*args, **kw):
        kw["noise"] = {**kw["noise"], "sem": torch.zeros_like(kw["noise"]["sem"])}
        seen["out"] = forward(*args, **kw)
        return seen["out"]

    model.forward = spy
    try:
        c.batch(step).direct()
    finally:
        del model.forward
    out = seen["out"]
    return out.z_sem.detach(), out.mu_a.detach(), out.mu_b.detach()


def test_semantic_side_rows_alternates_within_the_batch_by_global_row(corpora: dict[str, Path]) -> None:
    _, c = _component(_settings(VmsstObjective(batch_size=6, monitor_every=0)), corpora)
    assert c.objective.semantic_side == "rows"  # the paper's default
    for step in (0, 1):
        z, mu_a, mu_b = _semantic_sources(c, step)
        assert not torch.allclose(mu_a, mu_b, atol=1e-3)
        torch.testing.assert_close(z[0::2], mu_a[0::2])  # even rows read side a
        torch.testing.assert_close(z[1::2], mu_b[1::2])  # odd rows read side b: both sides in one batch
    assert c.semantic_reads_b(0, 6).tolist() == [False, True, False, True, False, True]
    # rank 1 of 2 holds global rows 3, 4, 5: sides b, a, b (its local parity would say a, b, a)
    c.rank, c.world = 1, 2
    assert c.semantic_reads_b(0, 6).tolist() == [True, False, True]
    z, mu_a, mu_b = _semantic_sources(c, 0)
    assert z.shape[0] == 3
    torch.testing.assert_close(z[[0, 2]], mu_b[[0, 2]])
    torch.testing.assert_close(z[1], mu_a[1])
    c.rank = 0
    assert [*c.semantic_reads_b(0, 6).tolist(), True, False, True] == [False, True] * 3  # shards → one process's


def test_semantic_side_steps_alternates_the_whole_batch_per_step(corpora: dict[str, Path]) -> None:
    _, c = _component(_settings(VmsstObjective(batch_size=6, monitor_every=0, semantic_side="steps")), corpora)
    for step, side in ((0, "a"), (1, "b"), (2, "a")):
        z, mu_a, mu_b = _semantic_sources(c, step)
        assert not torch.allclose(mu_a, mu_b, atol=1e-3)
        torch.testing.assert_close(z, mu_a if side == "a" else mu_b)  # one side for every row of the step
        assert c.semantic_reads_b(step, 6).tolist() == [side == "b"] * 6


def test_resume_reproduces_the_vmsst_loss_sequence(corpora: dict[str, Path], tmp_path: Path) -> None:
    full = _settings(steps=6, checkpoint_every=3)
    _train(full, corpora, tmp_path / "full", resume=False)
    ref = pq.read_table(tmp_path / "full" / "train_steps.parquet").column("loss").to_pylist()
    from models.training.train import train

    ckpt = tmp_path / "ckpt"
    train(dataclasses.replace(full, steps=6), {"bitext_pairs": corpora["bitext_pairs"]}, tmp_path / "part",
          tokenizer_dir=corpora["tokenizer"], progress=False, checkpoint_dir=ckpt)
    # resume from the step-3 checkpoint of the same run: the losses of steps 4..6 repeat exactly
    for extra in sorted(ckpt.iterdir())[1:]:
        import shutil

        shutil.rmtree(extra)
    train(full, {"bitext_pairs": corpora["bitext_pairs"]}, tmp_path / "resumed", tokenizer_dir=corpora["tokenizer"],
          progress=False, checkpoint_dir=ckpt)
    resumed = pq.read_table(tmp_path / "resumed" / "train_steps.parquet").column("loss").to_pylist()
    assert resumed == ref


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_input_is_refused_before_training(corpora: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"language-embedding table does not have \(fr: "):
        _train(_settings(VmsstObjective(languages=("en", "de"))), corpora, tmp_path / "a")
    with pytest.raises(ValueError, match="decoder_vocab_size 30000 does not match the tokenizer's vocabulary"):
        _train(_settings(VmsstObjective(decoder_vocab_size=30000)), corpora, tmp_path / "b")
    with pytest.raises(ValueError, match=r"and encoder\.projection"):
        _train(_settings(encoder=dataclasses.replace(TINY, projection=None)), corpora, tmp_path / "c")
    bad = _write_pairs(tmp_path / "bad_pairs", {"de": [("A dog.", "Ein Hund."), ("The cat.", "   "),
                                                       ("Two birds.", "Zwei Vögel.")]})
    with pytest.raises(ValueError, match=r"are blank or tokenise to no token .* pair 1 side b"):
        _train(_settings(VmsstObjective(batch_size=2)), corpora, tmp_path / "d", tables={"bitext_pairs": bad})
    with pytest.raises(ValueError, match="monitor_every must be ≥ 0"):
        _train(_settings(VmsstObjective(monitor_every=-1)), corpora, tmp_path / "e")
    assert not any((tmp_path / d / "model").exists() for d in "abcde")


# ---------------------------------------------------------------------------------------------- distributed
VARIANTS = ("vmsst", "vmsst_contrastive")


def _gradients(corpora: dict[str, Path], variant: str) -> dict[str, torch.Tensor]:
    """Gradients of update 2 (β 0.5, z_sem on side a of even global rows, b of odd ones) of a 16-pair batch, summed
    over ranks when distributed."""
    settings = _settings(VmsstObjective(variant=variant, batch_size=16, kl_anneal_steps=4, vmsst_weight=0.5
                                        if variant == "vmsst_contrastive" else None))
    student, c = _component(settings, corpora)
    loss, _ = c.batch(2).direct()
    loss.backward()
    named = {**{f"student.{k}": p for k, p in student.named_parameters()},
             **{f"vmsst.{k}": p for k, p in c.modules.named_parameters()}}
    params = list({id(p): p for p in named.values()}.values())
    distributed.all_reduce_gradients(params)
    return {k: p.grad.clone() for k, p in named.items() if p.grad is not None}


def _rank_worker(rank: int, world: int, port: int, bitext: str, tokenizer: str, out: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    assert distributed.init_process_group_from_env("gloo")
    try:
        corpora = {"bitext_pairs": Path(bitext), "tokenizer": Path(tokenizer)}
        results = {v: _gradients(corpora, v) for v in VARIANTS}
        if rank == 0:
            torch.save(results, Path(out) / "rank0.pt")
    finally:
        torch.distributed.destroy_process_group()


def test_two_gloo_ranks_give_the_single_process_gradients(corpora: dict[str, Path], tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("", 0))
        port = int(sock.getsockname()[1])
    ctx = mp.spawn(_rank_worker, args=(2, port, str(corpora["bitext_pairs"]), str(corpora["tokenizer"]),
                                       str(tmp_path)), nprocs=2, join=False)
    deadline = time.monotonic() + 180
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.terminate()
            pytest.fail("the 2-process gloo run did not finish within 180 s")
    ranks = torch.load(tmp_path / "rank0.pt", weights_only=False)
    for variant in VARIANTS:
        single = _gradients(corpora, variant)
        assert ranks[variant].keys() == single.keys()
        assert max(float(g.abs().max()) for g in single.values()) > 1e-2
        for k, g in single.items():  # float32 sums in another order (two shards, other padding)
            torch.testing.assert_close(ranks[variant][k], g, atol=2e-5, rtol=1e-4, msg=lambda m, k=k: f"{k}: {m}")


def _toy_corpus(root: Path, n: int = 600, seed: int = 0) -> dict[str, Path]:
    """Synthetic translation pairs: ``en`` sentences of 3–6 words from 24, their ``xx`` translations word by word
    through a fixed dictionary (a different surface form per word), and a BPE tokenizer trained on both."""
    from models.training.tokenizer import train_tokenizer

    rng = np.random.default_rng(seed)
    words = [f"w{chr(97 + i)}{chr(97 + (7 * i) % 24)}" for i in range(24)]
    foreign = {w: f"q{chr(97 + (5 * i + 3) % 24)}{chr(97 + (11 * i + 1) % 24)}z" for i, w in enumerate(words)}
    pairs, seen = [], set()
    while len(pairs) < n:
        s = tuple(rng.choice(words, size=int(rng.integers(3, 7))))
        if s not in seen:
            seen.add(s)
            pairs.append((" ".join(s), " ".join(foreign[w] for w in s)))
    out = {"bitext_pairs": _write_pairs(root / "bitext_pairs", {"xx": pairs})}
    pq.write_table(pa.table({"text": [x for p in pairs for x in p]}), root / "tok_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=200), {"t": root / "tok_texts.parquet"}, root)
    return {**out, "tokenizer": root / "tokenizer"}


def test_swap_probe_separates_once_mu_sem_carries_the_meaning(tmp_path: Path) -> None:
    """A few hundred updates on a toy corpus: each sentence's translation term and its reconstruction are better from
    its translation's μ_sem than from an unrelated pair's (the probe separates), while at update 0 they are equal —
    a decoder that could read the target through z_lang would never need μ_sem, and the two would stay together."""
    toy = _toy_corpus(tmp_path)
    o = VmsstObjective(batch_size=32, kl_anneal_steps=300, monitor_every=50)
    settings = _settings(o, steps=300, lr=3e-3, warmup_steps=20)
    from models.training.train import train

    res = train(settings, {"bitext_pairs": toy["bitext_pairs"]}, tmp_path / "run", tokenizer_dir=toy["tokenizer"],
                progress=False)
    t = pq.read_table(tmp_path / "run" / res.tables["train_steps"]).to_pydict()
    probe = [i for i, v in enumerate(t["swap_nll_own"]) if v is not None]
    assert probe == [0, 50, 100, 150, 200, 250]
    first, last = probe[0], probe[-1]
    gap = lambda i: t["translation_nll_unrelated"][i] - t["translation_nll"][i]  # noqa: E731
    assert abs(gap(first)) < 1.0, gap(first)
    assert gap(last) > 5.0, [gap(i) for i in probe]  # nats per sentence: the translation's μ_sem tells the words
    assert t["swap_nll_unrelated"][last] - t["swap_nll_swapped"][last] > 1.0
    assert t["swap_nll_unrelated"][last] - t["swap_nll_own"][last] > 1.0


def test_contrastive_term_is_the_papers_dot_product_softmax() -> None:
    """p(s_i | t_i) = exp(s_i·t_i) / Σ_j exp(s_i·t_j) on raw dot products (no normalisation, no temperature), both
    directions averaged; pairs of one meaning leave each other's denominators. Scaling the vectors changes it (cosine
    would not)."""
    g = torch.Generator().manual_seed(0)
    s_, t_ = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    dots = s_ @ t_.T
    by_hand = -(torch.diagonal(dots.log_softmax(1)).mean() + torch.diagonal(dots.log_softmax(0)).mean()) / 2
    torch.testing.assert_close(dot_product_info_nce(s_, t_), by_hand)
    assert float(dot_product_info_nce(2 * s_, t_)) != pytest.approx(float(by_hand))
    torch.testing.assert_close(info_nce(2 * s_, t_, 0.05), info_nce(s_, t_, 0.05))  # cosine ignores the norm
    groups = torch.tensor([0, 0, 1, 2, 3])
    masked = dots.clone()
    masked[0, 1] = masked[1, 0] = float("-inf")
    ref = -(torch.diagonal(masked.log_softmax(1)).mean() + torch.diagonal(masked.log_softmax(0)).mean()) / 2
    torch.testing.assert_close(dot_product_info_nce(s_, t_, groups), ref)
    assert default_vmsst_weight(True, 12) == default_vmsst_weight(False, 6) == 0.0005
    assert default_vmsst_weight(False, 24) == 0.001


def test_contrastive_baseline_and_dropout_follow_the_paper(corpora: dict[str, Path], tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """CONTRASTIVE = the dot-product term on μ_sem with no decoder, dropout kept; BITRANSLATION, VMSST and
    VMSST-CONTRASTIVE switch the student's dropout off (logged with the count); ``semantic_dropout`` overrides."""
    dropout = dataclasses.replace(TINY, dropout=0.1)
    rates = lambda m: {x.p for x in m.modules() if isinstance(x, torch.nn.Dropout)}  # noqa: E731
    with caplog.at_level("INFO", logger="polysent.models.objectives.vmsst"):
        student, c = _component(_settings(VmsstObjective(variant="contrastive", batch_size=8), encoder=dropout),
                                corpora)
    assert "vmsst" not in c.modules and rates(student) == {0.1}
    loss, metrics = c.batch(0).direct()
    idx = c.plan.batch(0)
    student.eval()  # the same dropout-free pass, to check the value: eval mode on both sides
    with torch.no_grad():
        loss_eval, _ = c.batch(0).direct()
        _, mu_a = VmsstModel.semantic_mean(student, c.side(list(idx), "a"))
        _, mu_b = VmsstModel.semantic_mean(student, c.side(list(idx), "b"))
    torch.testing.assert_close(loss_eval, dot_product_info_nce(mu_a, mu_b))
    assert set(metrics) == {"contrastive_loss", "active_units_sem", "active_units_sem_relative"}
    assert float(loss.detach()) > 0
    for variant in ("vmsst", "bitranslation", "vmsst_contrastive"):
        caplog.clear()
        with caplog.at_level("INFO", logger="polysent.models.objectives.vmsst"):
            student, _ = _component(_settings(VmsstObjective(variant=variant, batch_size=8), encoder=dropout),
                                    corpora)
        assert rates(student) == {0.0}, variant
        assert any("dropout off" in r.getMessage() and "dropout module(s)" in r.getMessage()
                   for r in caplog.records), variant
    student, _ = _component(_settings(VmsstObjective(batch_size=8, semantic_dropout=True), encoder=dropout), corpora)
    assert rates(student) == {0.1}
    res = _train(_settings(VmsstObjective(variant="contrastive", batch_size=8), steps=3), corpora, tmp_path / "c")
    t = pq.read_table(tmp_path / "c" / res.tables["train_steps"]).to_pydict()
    assert all(v is not None and v > 0 for v in t["contrastive_loss"])


def test_duplicate_negatives_keep_is_the_equation_and_mask_drops_same_meaning_pairs(
        corpora: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    """Pairs sharing a pivot sentence (one meaning) stay negatives of each other by default (the paper's equation);
    ``mask`` drops them from the denominators; both log the run's count."""
    losses, counts = {}, {}
    for mode in ("keep", "mask"):
        caplog.clear()
        o = VmsstObjective(variant="contrastive", batch_size=32, duplicate_negatives=mode)
        with caplog.at_level("INFO", logger="polysent.models.objectives.vmsst"):
            student, c = _component(_settings(o), corpora)
        line = next(r.getMessage() for r in caplog.records if "duplicate_negatives" in r.getMessage())
        counts[mode] = int(line.split(", ")[1].split()[0])
        assert ("masked from the denominators" if mode == "mask" else "kept as negatives") in line
        student.eval()
        step = next(k for k in range(4) if len(set(c.pairs.meaning[c.plan.batch(k)].tolist())) < 32)
        with torch.no_grad():
            losses[mode] = float(c.batch(step).direct()[0])
            idx = c.plan.batch(step)
            meaning = c.ids(c.pairs.meaning[idx])
            _, mu_a = VmsstModel.semantic_mean(student, c.side(list(idx), "a"))
            _, mu_b = VmsstModel.semantic_mean(student, c.side(list(idx), "b"))
        expected = dot_product_info_nce(mu_a, mu_b, groups=meaning if mode == "mask" else None)
        assert losses[mode] == pytest.approx(float(expected), rel=1e-5)
        assert len(set(meaning.tolist())) < len(idx)  # the batch has pairs of one meaning: the modes can differ
    assert counts["keep"] == counts["mask"] > 0 and losses["keep"] != pytest.approx(losses["mask"])


# ---------------------------------------------------------------------------------------------- decoder embeddings
def _decoder_terms(model: VmsstModel, student: SentenceEncoder, a, b) -> torch.Tensor:
    """Both translation terms and both reconstruction terms with every condition detached (μ_sem, z_lang, z_sem): the
    only way from this loss into a word-embedding table is the decoders' inputs."""
    with torch.no_grad():
        (_, mu_a), (_, mu_b) = VmsstModel.semantic_mean(student, a), VmsstModel.semantic_mean(student, b)
        table = student.backbone.get_input_embeddings()
        lang = {s: model.language_head(model.language_encoder(table, model.language_embeddings(x.language), x.ids,
                                                              x.mask))[0] for s, x in (("a", a), ("b", b))}
    inputs = model.decoder_inputs(student)
    reconstruction = sum(model.decoder.nll(inputs, model.language_embeddings(x.language), x.targets, x.target_mask,
                                           torch.cat([lang[s], mu], 1))
                         for s, x, mu in (("a", a, mu_a), ("b", b, mu_a)))
    return (model.translation_nll(student, a, mu_b) + model.translation_nll(student, b, mu_a) + reconstruction).sum()


def _rows(grad: torch.Tensor | None) -> set[int]:
    return set() if grad is None else set(torch.nonzero(grad.abs().sum(1)).flatten().tolist())


@pytest.mark.parametrize("mode", ["shared", "detached", "own"])
def test_decoder_embeddings_decide_whether_the_decoder_terms_train_the_students_table(
        corpora: dict[str, Path], mode: str) -> None:
    """``shared``: the decoder terms alone (conditions detached) give the student's word-embedding table a gradient,
    on the rows of the decoders' inputs; ``detached`` and ``own``: none (``own``: the decoders' own table gets it,
    a copy of the student's at the start). μ_sem's path still gives the student's table its gradient in every mode:
    a translation term with μ_sem attached moves exactly the rows of the other side's encoder input (plus, shared,
    the decoder inputs' rows)."""
    student, c = _component(_settings(VmsstObjective(batch_size=8, monitor_every=0, decoder_embeddings=mode)),
                            corpora)
    model: VmsstModel = c.modules["vmsst"]
    table = student.backbone.get_input_embeddings().weight
    a, b = c.side(range(8), "a"), c.side(range(8), "b")
    for x in (a, b):  # the component names the real target positions on the host
        assert torch.equal(x.target_index, x.target_mask.flatten().nonzero().squeeze(1))
    decoder_rows = set(a.targets[:, :-1][a.target_mask[:, 1:].bool()].tolist()) | set(
        b.targets[:, :-1][b.target_mask[:, 1:].bool()].tolist())
    if mode == "own":
        own = model.decoder_table.weight
        assert own is not table and torch.equal(own, table)  # a copy, not the same tensor
        assert any(p is own for p in c.modules.parameters()) and not any(p is table for p in c.modules.parameters())
    else:
        assert not hasattr(model, "decoder_table")

    _decoder_terms(model, student, a, b).backward()
    if mode == "shared":
        assert decoder_rows <= _rows(table.grad)  # every decoder input's row moves
    else:
        assert table.grad is None or float(table.grad.abs().sum()) == 0.0, mode
    if mode == "own":
        assert decoder_rows <= _rows(model.decoder_table.weight.grad)

    # μ_sem's path: side a's translation term from μ_sem(b), not detached
    student.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)
    _, mu_b = VmsstModel.semantic_mean(student, b)
    model.translation_nll(student, a, mu_b).sum().backward()
    encoder_rows = set(b.ids[b.mask.bool()].tolist())
    inputs_a = set(a.targets[:, :-1][a.target_mask[:, 1:].bool()].tolist())
    assert inputs_a - encoder_rows  # the test can tell the two paths apart
    moved = _rows(table.grad)
    assert moved and moved <= encoder_rows | inputs_a
    if mode == "shared":
        assert inputs_a <= moved
    else:
        assert moved <= encoder_rows, sorted(moved - encoder_rows)[:10]
    # the whole objective trains in every mode
    loss, _ = c.batch(1).direct()
    loss.backward()
    assert torch.isfinite(loss.detach())


def test_settings_reader_takes_the_three_decoder_embeddings_and_refuses_others(corpora: dict[str, Path]) -> None:
    from models.settings_io import SettingsError, from_mapping

    def read(value: object) -> VmsstObjective:
        return from_mapping(TrainSettings, {"objectives": [{"kind": "vmsst", "decoder_embeddings": value}]}
                            ).objectives[0]

    for value in ("shared", "detached", "own"):
        assert read(value).decoder_embeddings == value
    assert VmsstObjective().decoder_embeddings == "shared"  # the default: what the code has always done
    assert from_mapping(TrainSettings, {"objectives": [{"kind": "vmsst"}]}).objectives[0].decoder_embeddings == "shared"
    for bad in ("Own", "separate", "", None, 1, True):
        with pytest.raises(SettingsError, match=r"^TrainSettings\.objectives\.0\.decoder_embeddings: .*"
                                                r"'shared'.*'detached'.*'own'"):
            read(bad)
    with pytest.raises(ValueError, match=r"decoder_embeddings 'own' applies to the variants with a decoder"):
        _component(_settings(VmsstObjective(variant="contrastive", batch_size=8, decoder_embeddings="own")), corpora)


# ---------------------------------------------------------------------------------------------- active units
def test_relative_active_units_do_not_depend_on_the_scale_of_mu() -> None:
    """``active_units_*_relative``: dimensions whose batch variance is ≥ 1 % of the mean per-dimension variance. Any
    positive scale (or shift) of μ leaves it unchanged while BGT's absolute count moves; k constant dimensions of d
    give d − k."""
    from models.vmsst.model import active_unit_metrics, active_units, relative_active_units

    g = torch.Generator().manual_seed(0)
    d = 32
    base = torch.randn(64, d, generator=g) * torch.linspace(0.5, 2.0, d)  # dimensions of different spreads
    for k in (0, 1, 5, 31, 32):
        mu = base.clone()
        mu[:, :k] = torch.randn(1, k, generator=g)  # constant across the rows
        counts = {float(relative_active_units(mu * c + shift)) for c in (1e-3, 0.05, 1.0, 7.0, 1e3)
                  for shift in (0.0, 3.0)}
        assert counts == {float(d - k)}, (k, counts)
    assert float(active_units(base * 1e-3)) == 0 and float(active_units(base)) == d  # the absolute count moves
    assert float(relative_active_units(base * 1e-3)) == float(relative_active_units(base)) == d
    # a dimension far quieter than the rest is not active, relative to them
    quiet = base.clone()
    quiet[:, 0] *= 0.05  # its variance × 0.0025: far under 1 % of the mean per-dimension variance
    assert float(relative_active_units(quiet)) == d - 1
    assert set(active_unit_metrics("sem", base)) == {"active_units_sem", "active_units_sem_relative"}
    assert torch.isnan(relative_active_units(base[:1]))  # one row: no variance to measure
