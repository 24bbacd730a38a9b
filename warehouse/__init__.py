"""Storage layer: where artifacts live, their manifests, locks, the DuckDB views over them and the SQL shell.

Nothing here imports Prefect or torch.
"""
