"""Encoders, objectives, the trainer and evaluation maths.

Imports only torch, transformers, tokenizers, numpy and pyarrow (plus tqdm, which transformers brings), so a training
node runs on a bare GPU machine. Stage functions (``train``, ``train_tokenizer``, ``evaluate_model``) return a
``contract.StageResult``, the same dependency-free type as the data stages in ``pipelines/``.
"""
