"""GradCache (models.training.gradcache) and gathered-negatives data parallelism (models.training.distributed) on a
tiny real encoder.

References the tests check against, each computed independently of the code under test:
- GradCache: the plain full-batch backward (dropout 0), and a sequential with-grad forward of the same chunks after
  the same seed (dropout 0.1) — the run without RNG replay must differ from it;
- distributed: the single-process whole-batch loss and gradients, versus 2 gloo CPU processes that each embed a shard,
  gather, compute the full-batch loss and SUM-reduce their gradients.
"""

from __future__ import annotations

import importlib
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from grad_compare import grads as _grads
from grad_compare import max_diff as _max_diff
from grad_compare import zero_grads as _zero
from torch import nn

from models.encoder import SentenceEncoder
from models.objectives.contrastive import info_nce
from models.settings import EncoderSettings, TokenizerSettings
from models.training import distributed, gradcache
from models.training.distributed import all_reduce_gradients, gather, shard
from models.training.gradcache import RandContext, embed_and_backward
from models.training.tokenizer import train_tokenizer

XNLI_EN = Path(__file__).resolve().parents[1] / "sample" / "xnli" / "dev-en.tsv"
DIM = 32


def _rows() -> list[list[str]]:
    return [line.split("\t") for line in XNLI_EN.read_text(encoding="utf-8").splitlines() if line]


def _pairs(n: int) -> tuple[list[str], list[str]]:
    """n (premise, entailed hypothesis) pairs of the English XNLI sample."""
    pairs = [(r[0], r[1]) for r in _rows() if r[2] == "entailment"][:n]
    assert len(pairs) == n and len({a for a, _ in pairs}) == n
    return [a for a, _ in pairs], [b for _, b in pairs]


def _encoder(tok_dir: Path, dropout: float, seed: int = 0) -> SentenceEncoder:
    torch.manual_seed(seed)
    enc = SentenceEncoder.from_settings(EncoderSettings(hidden_size=DIM, num_layers=2, num_heads=2,
                                                        intermediate_size=64, dropout=dropout), tok_dir)
    return enc.train()


def _projection(seed: int = 1) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(DIM, 16)


def _chunks(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i:i + size] for i in range(0, len(texts), size)]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gradcache_tok")
    pq.write_table(pa.table({"text": [r[0] for r in _rows()]}), root / "t.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=300), {"t": root / "t.parquet"}, root)
    return root / "tokenizer"


# ---------------------------------------------------------------------------------------------- GradCache
@pytest.mark.parametrize("with_projection", [False, True], ids=["encoder", "encoder+loss_parameter"])
def test_gradcache_gradients_equal_the_plain_full_batch_backward(tok_dir: Path, with_projection: bool) -> None:
    enc, proj = _encoder(tok_dir, dropout=0.0), _projection()
    anchors, positives = _pairs(16)

    def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
        a, b = embs
        if with_projection:
            a, b = proj(a), proj(b)
        return info_nce(a, b, 0.05, True)

    def named() -> Iterator[tuple[str, nn.Parameter]]:
        yield from enc.named_parameters()
        if with_projection:
            yield from (("proj." + k, p) for k, p in proj.named_parameters())

    params = [p for _, p in named()]
    runs = {}
    for mini_batch in (None, 3):  # 16 = 5·3 + 1: uneven chunks
        _zero(params)
        loss = embed_and_backward(enc, [anchors, positives], loss_fn, mini_batch=mini_batch, scale=0.5)
        runs[mini_batch] = (float(loss), _grads(named()))
    (plain_loss, plain), (cached_loss, cached) = runs[None], runs[3]

    # the independent reference: one forward with graph of the whole batch
    _zero(params)
    ref_loss = loss_fn([enc(anchors), enc(positives)])
    (0.5 * ref_loss).backward()
    reference = _grads(named())
    assert plain_loss == pytest.approx(float(ref_loss.detach()), abs=1e-6)
    assert _max_diff(plain, reference) <= 1e-6

    assert cached_loss == pytest.approx(plain_loss, abs=1e-6)
    assert 1.0 < plain_loss < 10.0
    assert max(float(g.abs().max()) for g in plain.values()) > 1e-2  # the tolerance below is meaningful
    assert _max_diff(cached, plain) <= 1e-5
    if with_projection:
        assert float(cached["proj.weight"].abs().max()) > 1e-3


def test_gradcache_accumulates_and_skips_unused_columns(tok_dir: Path) -> None:
    enc = _encoder(tok_dir, dropout=0.0)
    anchors, positives = _pairs(6)
    params = list(enc.parameters())

    def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:  # third column unused → its embeddings get no grad
        return info_nce(embs[0], embs[1])

    _zero(params)
    embed_and_backward(enc, [anchors, positives, anchors], loss_fn, mini_batch=4)
    once = _grads(enc.named_parameters())
    embed_and_backward(enc, [anchors, positives, anchors], loss_fn, mini_batch=4)  # grads accumulate
    twice = _grads(enc.named_parameters())
    assert _max_diff(twice, {k: 2 * v for k, v in once.items()}) <= 1e-5
    _zero(params)
    embed_and_backward(enc, [anchors, positives], loss_fn, mini_batch=None)
    assert _max_diff(once, _grads(enc.named_parameters())) <= 1e-5

    with pytest.raises(ValueError, match="column 1 is empty"):
        embed_and_backward(enc, [anchors, []], loss_fn, mini_batch=2)
    with pytest.raises(ValueError, match="mini_batch must be ≥ 1"):
        embed_and_backward(enc, [anchors, positives], loss_fn, mini_batch=0)


def test_rand_context_replays_dropout_masks(tok_dir: Path) -> None:
    enc = _encoder(tok_dir, dropout=0.1)
    texts = _pairs(4)[0]
    torch.manual_seed(3)
    ctx = RandContext()
    with torch.no_grad():
        first = enc(texts)
    after_first = torch.get_rng_state()
    with ctx:
        replay = enc(texts)  # with graph, as GradCache's third pass
    assert torch.equal(torch.get_rng_state(), after_first)  # the block leaves the outer RNG where it was
    assert replay.requires_grad and torch.equal(replay.detach(), first)
    with ctx:  # re-enterable
        assert torch.equal(enc(texts).detach(), first)
    assert not torch.allclose(enc(texts).detach(), first, atol=1e-4)  # dropout is really active


class _NoReplay:
    """A RandContext that does nothing: what GradCache without RNG snapshots would do."""

    def __enter__(self) -> _NoReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_gradcache_with_dropout_equals_the_same_chunks_embedded_with_grad(tok_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    enc = _encoder(tok_dir, dropout=0.1)
    anchors, positives = _pairs(10)  # chunks of 4, 4, 2
    params = list(enc.parameters())

    def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
        return info_nce(embs[0], embs[1], 0.05, True)

    # reference: the chunks GradCache's first pass embeds, in the same order, from the same seed, with graph
    _zero(params)
    torch.manual_seed(11)
    embs = [torch.cat([enc(chunk) for chunk in _chunks(column, 4)]) for column in (anchors, positives)]
    ref_loss = loss_fn(embs)
    ref_loss.backward()
    reference = _grads(enc.named_parameters())

    _zero(params)
    torch.manual_seed(11)
    loss = embed_and_backward(enc, [anchors, positives], loss_fn, mini_batch=4)
    cached = _grads(enc.named_parameters())
    assert float(loss) == pytest.approx(float(ref_loss.detach()), abs=1e-6)
    assert _max_diff(cached, reference) <= 1e-5

    # without the replay the third pass draws new dropout masks: the gradient is taken at other embeddings
    monkeypatch.setattr(gradcache, "RandContext", _NoReplay)
    _zero(params)
    torch.manual_seed(11)
    broken_loss = embed_and_backward(enc, [anchors, positives], loss_fn, mini_batch=4)
    broken = _grads(enc.named_parameters())
    assert float(broken_loss) == pytest.approx(float(ref_loss.detach()), abs=1e-6)  # the first pass is unchanged
    assert _max_diff(broken, reference) > 1e-3


# ---------------------------------------------------------------------------------------------- distributed
WORLD = 2


def _global_batch() -> tuple[list[str], list[str], list[str], torch.Tensor]:
    """8 groups × 2 members. ``texts`` lists all first members then all second members, so every group spans both
    ranks' shards and the group ids must really be gathered."""
    anchors, positives = _pairs(8)
    return anchors, positives, anchors + positives, torch.arange(8).repeat(2)


def _mpcl() -> Callable[..., torch.Tensor] | None:
    try:
        return importlib.import_module("models.objectives.mpcl").mpcl_loss
    except (ImportError, AttributeError):
        return None


def _distributed_cases(enc: SentenceEncoder, enc64: SentenceEncoder, proj: nn.Linear) -> dict[str, dict]:
    """Run on every rank: each case embeds this rank's shard, gathers, computes the full-batch loss, backward,
    all-reduces the gradients; returns loss and gradients (or the error of a case)."""
    r, w = distributed.rank(), distributed.world_size()
    anchors, positives, texts, groups = _global_batch()
    out: dict[str, dict] = {}

    def run(name: str, columns: list[list[str]], loss_fn: Callable, mini_batch: int | None,
            replicated: list[nn.Parameter] | None = None, model: SentenceEncoder = enc) -> None:
        params = [*model.parameters(), *proj.parameters()]
        _zero(params)
        try:
            loss = embed_and_backward(model, columns, loss_fn, mini_batch=mini_batch)
            if replicated is None:
                all_reduce_gradients(model.parameters())
            else:
                all_reduce_gradients(params, replicated=replicated)
        except Exception as exc:  # reported by the test of that case; deterministic, so every rank fails alike
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            return
        named = [*model.named_parameters(), *(("proj." + k, p) for k, p in proj.named_parameters())]
        out[name] = {"loss": float(loss), "grads": {k: p.grad.clone() for k, p in named if p.grad is not None}}

    pairs = [shard(anchors, r, w), shard(positives, r, w)]
    run("info_nce", pairs, lambda e: info_nce(gather(e[0]), gather(e[1])), None)
    run("info_nce_gradcache", pairs, lambda e: info_nce(gather(e[0]), gather(e[1])), 3)
    projected = lambda e: info_nce(proj(gather(e[0])), proj(gather(e[1])))  # noqa: E731
    run("projection_averaged", pairs, projected, None, replicated=list(proj.parameters()))
    run("projection_summed", pairs, projected, None, replicated=[])

    local_groups = torch.as_tensor(shard(groups.tolist(), r, w))
    out["gathered_groups"] = {"value": gather(local_groups)}
    x = torch.full((2, 3), float(r), requires_grad=True)
    gathered = gather(x)
    gathered.sum().backward()
    out["gathered_float"] = {"value": gathered.detach(), "local_grad": x.grad}

    mpcl_loss = _mpcl()
    if mpcl_loss is not None:
        column = [shard(texts, r, w)]
        run("mpcl", column, lambda e: mpcl_loss(gather(e[0]), gather(local_groups), scaling="row"), None, model=enc64)
        run("mpcl_no_minmax", column, lambda e: mpcl_loss(gather(e[0]), gather(local_groups), scaling="none"), 5)
    return out


def _worker(rank: int, world: int, port: int, tok_dir: str, out_dir: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    assert distributed.init_process_group_from_env("gloo")
    try:
        assert distributed.is_distributed() and distributed.rank() == rank and distributed.world_size() == world
        enc, enc64 = _encoder(Path(tok_dir), dropout=0.0), _encoder(Path(tok_dir), dropout=0.0).double()
        results = _distributed_cases(enc, enc64, _projection())
        if rank == 0:
            torch.save(results, Path(out_dir) / "rank0.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def distributed_results(tok_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("gradcache_dist")
    ctx = mp.spawn(_worker, args=(WORLD, _free_port(), str(tok_dir), str(out)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            pytest.fail("the 2-process gloo run did not finish within 120 s")
    return torch.load(out / "rank0.pt", weights_only=False)


def _single_process(loss_of: Callable[[SentenceEncoder, nn.Linear], torch.Tensor], tok_dir: Path,
                    dtype: torch.dtype = torch.float32) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of the whole batch in one process, one forward per column: the reference."""
    enc, proj = _encoder(tok_dir, dropout=0.0).to(dtype), _projection()
    loss = loss_of(enc, proj)
    loss.backward()
    named = [*enc.named_parameters(), *(("proj." + k, p) for k, p in proj.named_parameters())]
    return float(loss.detach()), {k: p.grad for k, p in named if p.grad is not None}


def _check(result: dict, ref_loss: float, ref_grads: dict[str, torch.Tensor]) -> None:
    assert "error" not in result, result.get("error")
    assert result["loss"] == pytest.approx(ref_loss, abs=1e-5)
    assert max(float(g.abs().max()) for g in ref_grads.values()) > 1e-2
    assert result["grads"].keys() == ref_grads.keys()
    for k, g in ref_grads.items():
        # float32 sums in another order (gloo, padding, the CPU's vector width): an element that sums many terms (the
        # token-type row sums every token's gradient) moves with the size of its terms, not its own, so the absolute
        # tolerance scales with the tensor's largest gradient: |Δ| ≤ 1e-5·max(1, 4·max|g|) + 1e-5·|g|
        atol = 1e-5 * max(1.0, 4 * float(g.abs().max()))
        torch.testing.assert_close(result["grads"][k], g, atol=atol, rtol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


def test_gather_concatenates_in_rank_order_and_keeps_the_local_gradient(
        distributed_results: dict[str, dict]) -> None:
    assert torch.equal(distributed_results["gathered_groups"]["value"], _global_batch()[3])
    floats = distributed_results["gathered_float"]
    assert torch.equal(floats["value"], torch.tensor([[0.0] * 3] * 2 + [[1.0] * 3] * 2))
    assert torch.equal(floats["local_grad"], torch.ones(2, 3))


@pytest.mark.parametrize("case", ["info_nce", "info_nce_gradcache"])
def test_two_gloo_ranks_give_the_single_process_gradients_info_nce(
        distributed_results: dict[str, dict], tok_dir: Path, case: str) -> None:
    anchors, positives, _, _ = _global_batch()
    ref_loss, ref_grads = _single_process(lambda enc, _: info_nce(enc(anchors), enc(positives)), tok_dir)
    _check(distributed_results[case], ref_loss, ref_grads)
    assert not any(k.startswith("proj.") for k in distributed_results[case]["grads"])


def test_parameters_after_the_gather_must_be_averaged_not_summed(
        distributed_results: dict[str, dict], tok_dir: Path) -> None:
    anchors, positives, _, _ = _global_batch()
    ref_loss, ref_grads = _single_process(lambda enc, proj: info_nce(proj(enc(anchors)), proj(enc(positives))),
                                          tok_dir)
    _check(distributed_results["projection_averaged"], ref_loss, ref_grads)
    summed = distributed_results["projection_summed"]["grads"]  # every rank holds the full ∂L/∂W: SUM doubles it
    for k in ("proj.weight", "proj.bias"):
        torch.testing.assert_close(summed[k], WORLD * ref_grads[k], atol=1e-5, rtol=1e-5)
    enc_only = {k: v for k, v in ref_grads.items() if not k.startswith("proj.")}
    assert _max_diff({k: summed[k] for k in enc_only}, enc_only) <= 1e-5


@pytest.mark.parametrize("minmax", [True, False])
def test_two_gloo_ranks_give_the_single_process_gradients_mpcl(
        distributed_results: dict[str, dict], tok_dir: Path, minmax: bool) -> None:
    mpcl_loss = _mpcl()
    if mpcl_loss is None:
        pytest.skip("models.objectives.mpcl.mpcl_loss is not available yet")
    _, _, texts, groups = _global_batch()
    if minmax:
        # Min–max scaling divides by each row's cosine range (≈ 0.13 on this untrained model) and by τ, amplifying
        # float32 rounding ~300×: other padding or summation order alone moves gradients of size ~12 by up to 2e-4.
        # This case therefore runs in float64 (ranks and reference), where any error of the scheme still shows.
        ref_loss, ref_grads = _single_process(lambda enc, _: mpcl_loss(enc(texts), groups, scaling="row"), tok_dir,
                                              torch.float64)
    else:
        ref_loss, ref_grads = _single_process(lambda enc, _: mpcl_loss(enc(texts), groups, scaling="none"), tok_dir)
    assert math.isfinite(ref_loss)
    _check(distributed_results["mpcl" if minmax else "mpcl_no_minmax"], ref_loss, ref_grads)


# ---------------------------------------------------------------------------------------------- without a group
def test_shard_splits_contiguously_and_rejects_unequal_shards() -> None:
    items = list(range(12))
    assert [shard(items, r, 3) for r in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert shard("abcd", 1, 2) == ["c", "d"]
    with pytest.raises(ValueError, match=r"10 items cannot be split into 4 equal shards"):
        shard(list(range(10)), 0, 4)
    with pytest.raises(ValueError, match=r"rank 2 is not in 0\.\.1"):
        shard(items, 2, 2)


def test_without_a_process_group_everything_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not distributed.is_distributed()
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    t = torch.randn(3, 4, requires_grad=True)
    assert gather(t) is t
    ids = torch.arange(5)
    assert gather(ids) is ids
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.full((2,), 3.0)
    all_reduce_gradients([p])
    assert torch.equal(p.grad, torch.full((2,), 3.0))
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed.init_process_group_from_env() is False
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        distributed.init_process_group_from_env()
    assert not distributed.is_distributed()
