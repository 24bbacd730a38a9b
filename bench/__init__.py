"""Benchmarks: each prints one line per figure (anchor, polysent, ratio) and appends to ``bench_results``."""
