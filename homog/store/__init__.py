"""The DuckDB store: its schema, the atomic ``load`` stage, and the read-only query API.

Everything the pipeline produces ends up in one DuckDB file (``homog.layout.default_db``;
schema and contract in docs/design.md). The package splits into

- :mod:`homog.store.schema`: table definitions (no I/O);
- :mod:`homog.store.loader`: finding stage outputs and the atomic, idempotent, locked load;
- :mod:`homog.store.query`: read-only queries shared by the CLI and the terminal UI;
- :mod:`homog.store.demo`: a synthetic database for tests and benchmarks (a fixture, not
  re-exported here: ``from homog.store.demo import make_demo_db``).

``from homog.store import load, connect, layer_curves, ...`` gives the public names.
"""

from __future__ import annotations

from homog.store.loader import (
    LOCK_TIMEOUT_S,
    Sources,
    atomic_database,
    collect_sources,
    load,
    load_database,
)
from homog.store.query import (
    CREATE_HINT,
    VARIANT_ORDER,
    attention_profile,
    attn_first_curves,
    check_names,
    check_read_only,
    connect,
    contrasts,
    export,
    head_ablation,
    layer_curves,
    list_runs,
    metrics,
    models,
    posenc_results,
    relation,
    run_ids,
    run_sql,
    variants,
)
from homog.store.schema import SCHEMA_VERSION, TABLES, Table, create_schema, table_names

__all__ = [
    "CREATE_HINT",
    "LOCK_TIMEOUT_S",
    "SCHEMA_VERSION",
    "TABLES",
    "VARIANT_ORDER",
    "Sources",
    "Table",
    "atomic_database",
    "attention_profile",
    "attn_first_curves",
    "check_names",
    "check_read_only",
    "collect_sources",
    "connect",
    "contrasts",
    "create_schema",
    "export",
    "head_ablation",
    "layer_curves",
    "list_runs",
    "load",
    "load_database",
    "metrics",
    "models",
    "posenc_results",
    "relation",
    "run_ids",
    "run_sql",
    "table_names",
    "variants",
]
