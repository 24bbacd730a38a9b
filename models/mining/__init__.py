"""Mining parallel sentences at corpus scale (LASER ``source/mine_bitexts.py`` on faiss; docs methods §7.2–7.3).

* :mod:`models.mining.index` — cosine k-NN over a target corpus with faiss: ``exact`` (flat inner product, in target
  shards), ``ivf`` and ``hnsw``; shards searched in parallel by any executor (a Dask client included);
* :mod:`models.mining.embedding_file` — sentence embeddings streamed to a memory-mapped ``.npy`` with a sidecar that
  names the model, so a saved file is reused only with the model that wrote it;
* :mod:`models.mining.mine` — deduplication, k-NN both ways, margin scores and pair selection (the same selection code
  as the BUCC evaluation, :func:`models.evaluation.bucc.select_pairs`).

faiss (``faiss-cpu``, the extra ``mining``) is imported only where an index is built.
"""
