"""What every layer below ``flows/`` agrees on, and nothing else: the stage contract (``contract.stage``) and the one
rule for cache keys (``contract.cache_keys``: fields added later stay out of a key while at their default).

A top-level package of its own, beside ``pipelines/``, ``models/`` and ``warehouse/``, because each of those layers
needs the type and none may reach into another for it: ``pipelines`` and ``models`` return a ``StageResult``,
``warehouse`` stores one (``ArtifactStore.materialize``), ``flows`` passes it along. Putting it in ``warehouse`` made
every data stage import the storage layer (filelock, pyarrow, the catalog) for a two-field record; putting it in
``models`` or ``pipelines`` would make the other import a sibling layer. Hence the rule this package keeps: it imports
the standard library only (``tests/test_stage_contract.py`` checks it), so importing it costs nothing on a bare GPU
machine and can never pull a layer's dependencies into another.
"""

from contract.stage import StageResult

__all__ = ["StageResult"]
