"""Pure data stages: typed settings + input paths in, an artifact folder of Parquet out. No Prefect, no torch."""
