"""Fault suite: faults injected into real pipeline runs (``make test-faults``; marker ``faults``).

Every test starts from a small copy of ``configs/default.yaml`` (all corpora, one tiny training run, evaluation,
report; ~20 s a run on 2 cores) under a temporary data root, injects one kind of fault, and compares the end state with
one uninterrupted reference run per session (artifact content hashes and every warehouse view). The session ends with
``faults injected N / survived N / rows lost 0``.
"""
