"""The trainer and its parts: one wing of ``models/``.

* :mod:`models.training.train` — stage ``train``: the training loop, export, and ``python -m models.training.train``
  for a job file on a bare GPU machine;
* :mod:`models.training.tokenizer` — stage ``tokenizer``: the subword vocabulary a run from scratch trains with;
* :mod:`models.training.components` — the ``Component`` base every objective's component derives from, and the batch
  helpers they share; :mod:`models.training.sampling` — seeded batch plans (a batch is a pure function of seed and
  step); :mod:`models.training.corpus_tables` — the training corpora read from their Parquet artifacts;
* :mod:`models.training.gradcache` (full-batch gradients in mini-batch memory), :mod:`models.training.distributed`
  (``torch.distributed`` with gathered negatives), :mod:`models.training.checkpoints` (atomic, resumable),
  :mod:`models.training.dev_eval` (best-checkpoint selection), :mod:`models.training.teacher` (a frozen encoder
  that labels batches for distillation) and :mod:`models.training.interpolation` (the trained weights interpolated
  with the start's, WiSE-FT, at export).

The objectives (``models/objectives/``) build on the components, sampling and corpus tables; the trainer reaches them
only through the objective registry (``models.objective_registry``), so no module here imports an objective.
"""
