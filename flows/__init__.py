"""Prefect wiring only: the typed pipeline config, the DAG of nodes, cache keys, the flow, and the CLI."""
