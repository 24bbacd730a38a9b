"""The pipeline DAG: the stages in DAG order, each a node builder in ``flows/stages/``.

```
wiki_shard.<lang>.<i> ─► wiki_extract.<lang> ─┬─► entities ─┬─► hard_negatives ─┐   stages/wiki.py
wikidata ─────────────────────────────────────┘             └─► entity_vectors ─┤
wiki_extract.<lang>, model or train.<run> ─► mine.<name> ─► (source of bitext_pairs) ┤   stages/mining.py
xnli_groups ────────────────────────────────────────────────────────────────────┤   stages/corpora.py
nli_triples ────────────────────────────────────────────────────────────────────┤
bitext_pairs ───────────────────────────────────────────────────────────────────┤
                        ┌──────────────────── corpora ──────────────────────────┤
                        ▼             (each objective reads its own tables)     ▼
                    tokenizer ───────────────────────────────────────────► train.<run>     stages/train.py
                                                                    (dev) ▲     │
eval_sets ────────────────────────────────────────────────────────────────┤     ▼          stages/evaluate.py
                                                                          └─► evaluate.<run | peer | start:model>
                                                                                │
                                           corpora, train.<run> (curves) ──► report        stages/report.py
```
``build_dag`` calls the stage builders in this order; each sees the nodes of the stages before it (a training run
finds the corpus nodes of its objectives' tables there) and returns its own. A node knows its stage name and code
version, its canonical config section (what enters the cache key besides input hashes), its external input files,
its upstream nodes, and a picklable ``run`` (``flows/graph.py``). Torch code is imported inside ``run`` so that
planning and SQL never pay for it.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

from flows.config import PipelineConfig
from flows.graph import Node, canonical, portable, topological
from flows.stages.corpora import corpora_nodes
from flows.stages.evaluate import eval_sets_nodes, evaluate_nodes
from flows.stages.mining import mining_nodes
from flows.stages.report import report_nodes
from flows.stages.train import tokenizer_nodes, train_nodes
from flows.stages.wiki import wiki_nodes

# Node, canonical, portable and topological live in flows/graph.py (stage modules import them without a cycle);
# re-exported here for the callers that take the DAG and its node type from one place
__all__ = ["STAGES", "Node", "build_dag", "canonical", "portable", "topological"]

StageBuilder = Callable[[PipelineConfig, Mapping[str, Node]], list[Node]]

# the stages in DAG order: a builder may depend on the nodes of any builder above it
STAGES: tuple[StageBuilder, ...] = (
    wiki_nodes,       # wikidata, wiki_shard.<lang>.<i>, wiki_extract.<lang>, entities, hard_negatives, entity_vectors
    mining_nodes,     # mine.<name> (its model may be a train.<run> node, built by a later stage)
    corpora_nodes,    # xnli_groups, nli_triples, bitext_pairs
    eval_sets_nodes,  # eval_sets
    tokenizer_nodes,  # tokenizer (when a run trains from scratch)
    train_nodes,      # train.<run>
    evaluate_nodes,   # evaluate.<run | evaluation.models peer | start:<model>>
    report_nodes,     # report
)


def build_dag(cfg: PipelineConfig) -> dict[str, Node]:
    """Every node of ``cfg``'s pipeline by name, in DAG order. Raises ``ValueError`` (naming the config key) for a
    configuration no DAG can satisfy, e.g. an objective whose corpus no source produces."""
    nodes: dict[str, Node] = {}
    for stage in STAGES:
        for node in stage(cfg, MappingProxyType(nodes)):
            if node.name in nodes:
                raise ValueError(f"two nodes are named {node.name!r} ({stage.__name__} and an earlier stage)")
            nodes[node.name] = node
    check_edges(nodes)
    return nodes


def check_edges(nodes: Mapping[str, Node]) -> None:
    """Every input names a node, and no node depends on itself through others. A ``mine`` node may take a training
    run's model, built by a later stage, so this is checked on the whole DAG; a ``ValueError`` names the path."""
    for node in nodes.values():
        for name, dep in node.deps.items():
            if dep not in nodes:
                raise ValueError(f"node {node.name}: input {name} names {dep!r}, which this config does not build")
    try:
        topological(nodes)
    except graphlib.CycleError as exc:
        path = " → ".join(reversed(exc.args[1]))
        raise ValueError(f"the configuration makes a cycle: {path} (each needs the next; e.g. mining with a run "
                         "trained from scratch whose tokenizer, or whose own corpus, reads the mined pairs)") from None
