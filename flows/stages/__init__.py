"""The pipeline's stages as node builders, one module per part of the DAG drawing (``flows/dag.py``).

Each builder ``*_nodes(cfg, upstream) -> list[Node]`` gets the nodes of the stages before it (``upstream``, read-only)
and returns its stage's nodes: it assembles their cache-key material (config section, external files, upstream
names), refuses a configuration that cannot build (``ValueError`` naming the key), and binds a top-level run function
with ``functools.partial``, so every node pickles for a worker process. The modules import ``flows.graph`` and each
other, never ``flows.dag`` (which lists them): ``tests/test_flows_structure.py`` fails on an import cycle.

- ``wiki``: wikidata, wiki_shard.<lang>.<i>, wiki_extract.<lang>, entities, hard_negatives, entity_vectors (EASE)
- ``corpora``: xnli_groups, nli_triples, bitext_pairs, each behind the leakage guard
- ``train``: tokenizer, train.<run>
- ``evaluate``: eval_sets, evaluate.<run | model | start:model>
- ``report``: report
"""
