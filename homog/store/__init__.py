"""The DuckDB store: its schema, the atomic ``load`` stage, and the read-only query API.

Everything the pipeline produces ends up in one DuckDB file (``homog.layout.default_db``;
schema and contract in docs/design.md). The package splits into

- :mod:`homog.schema.tables`: table definitions (no I/O; ``layer_summary`` in
  :mod:`homog.schema.summary`);
- :mod:`homog.store.loader`: finding stage outputs and the atomic, idempotent, locked load;
- :mod:`homog.store.fill`: the rows each table of a load gets (new, kept, dropped);
- :mod:`homog.store.guard`: the guards of every reader connection (DuckDB's sandbox, the
  statement allow-list, lock errors told from damage);
- :mod:`homog.store.query`: read-only queries shared by the CLI and the terminal UI;
- :mod:`homog.store.sql`: internal queries with damage-aware errors, the user's SQL and
  ``export``;
- :mod:`homog.store.demo`: a synthetic database for tests and benchmarks (a fixture, not
  re-exported here: ``from homog.store.demo import make_demo_db``).

``from homog.store import load, connect, layer_curves, ...`` gives the public names. They are
imported on first use (module ``__getattr__``): ``from homog.store import connect`` loads the
guard and the query API (and DuckDB) but not the loader, which pulls in ``homog.config`` and
YAML; the terminal UI's first paint waits on these imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from homog.lazy import lazy_names

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("READ_ONLY_FUNCTIONS", "READER_CONFIG", "DatabaseLocked", "check_read_only"), "guard"
    ),
    **dict.fromkeys(
        (
            "LOCK_TIMEOUT_S",
            "Sources",
            "atomic_database",
            "collect_sources",
            "load",
            "load_database",
        ),
        "loader",
    ),
    **dict.fromkeys(
        (
            "CREATE_HINT",
            "VARIANT_ORDER",
            "attention_profile",
            "attn_first_curves",
            "connect",
            "contrasts",
            "difference_curves",
            "has_summary",
            "head_ablation",
            "layer_curves",
            "list_runs",
            "metrics",
            "models",
            "posenc_results",
            "run_ids",
            "summary_names",
            "variants",
        ),
        "query",
    ),
    **dict.fromkeys(
        (
            "check_export_target",
            "check_names",
            "export",
            "fetch_batches",
            "relation",
            "run_sql",
            "sql_cursor",
        ),
        "sql",
    ),
    **dict.fromkeys(
        (
            "SCHEMA_VERSION",
            "TABLES",
            "Table",
            "create_schema",
            "table_names",
        ),
        "homog.schema.tables",  # below the stages (the contract they write)
    ),
    **dict.fromkeys(
        ("LAYER_SUMMARY", "materialize_layer_summary", "summary_kind"), "homog.schema.summary"
    ),
}

__all__ = [
    "CREATE_HINT",
    "READER_CONFIG",
    "READ_ONLY_FUNCTIONS",
    "DatabaseLocked",
    "LAYER_SUMMARY",
    "LOCK_TIMEOUT_S",
    "SCHEMA_VERSION",
    "TABLES",
    "VARIANT_ORDER",
    "Sources",
    "Table",
    "atomic_database",
    "attention_profile",
    "attn_first_curves",
    "check_export_target",
    "check_names",
    "check_read_only",
    "collect_sources",
    "connect",
    "contrasts",
    "create_schema",
    "difference_curves",
    "export",
    "fetch_batches",
    "has_summary",
    "head_ablation",
    "layer_curves",
    "list_runs",
    "load",
    "load_database",
    "materialize_layer_summary",
    "metrics",
    "models",
    "posenc_results",
    "relation",
    "run_ids",
    "run_sql",
    "sql_cursor",
    "summary_kind",
    "summary_names",
    "table_names",
    "variants",
]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see: the eager imports
    from homog.schema.summary import LAYER_SUMMARY, materialize_layer_summary, summary_kind
    from homog.schema.tables import (
        SCHEMA_VERSION,
        TABLES,
        Table,
        create_schema,
        table_names,
    )
    from homog.store.guard import (
        READ_ONLY_FUNCTIONS,
        READER_CONFIG,
        DatabaseLocked,
        check_read_only,
    )
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
        connect,
        contrasts,
        difference_curves,
        has_summary,
        head_ablation,
        layer_curves,
        list_runs,
        metrics,
        models,
        posenc_results,
        run_ids,
        summary_names,
        variants,
    )
    from homog.store.sql import (
        check_export_target,
        check_names,
        export,
        fetch_batches,
        relation,
        run_sql,
        sql_cursor,
    )
