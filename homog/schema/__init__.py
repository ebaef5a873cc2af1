"""The tables of the DuckDB store and of the stages' parquet files: names, columns, types (the
public contract of docs/database.md). Below every stage, which writes these columns, and the
store, which loads them."""
