"""The small typed messages workers post back to the UI thread, one class per result kind.

Workers never touch widgets: they run a query on their own cursor and post one of these to
the screen (or the app) that asked; its ``@on(...)`` handler updates the widgets on the UI
thread. A failed query posts :class:`QueryFailed`, naming the result class it would have
posted. None of them bubble: each is for the node that started the query.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from tui.core import Catalog, Database, Row

CurveKey = tuple[str, tuple[str, ...]]  # (metric, run ids): every variant's curves
ProfileKey = tuple[str, str, int | None]  # (run id, variant, head or None for the mean)


class QueryResult(Message, bubble=False):
    """A background query finished; ``elapsed_s`` is set by the worker that ran it."""

    elapsed_s: float = 0.0


class CatalogLoaded(QueryResult, bubble=False):
    """The database's runs, metrics and variants were (re)read."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__()
        self.catalog = catalog


class CatalogPreviewed(Message, bubble=False):
    """The catalog as the ``tui.preview`` child read it (and the file's fingerprint then),
    before the app has its own connection: the app shows it, then opens the file."""

    def __init__(
        self, generation: int, stamp: tuple[int, int, int] | None, catalog: Catalog
    ) -> None:
        super().__init__()
        self.generation = generation
        self.stamp = stamp
        self.catalog = catalog


class DbOpened(Message, bubble=False):
    """The app's open worker finished: ``db`` (open, or with the error to show), and the
    catalog read through it (``catalog`` None and ``error`` set when reading failed).
    ``generation`` tells a superseded open (an older reload) from the latest."""

    def __init__(
        self, generation: int, db: Database, catalog: Catalog | None, error: str | None
    ) -> None:
        super().__init__()
        self.generation = generation
        self.db = db
        self.catalog = catalog
        self.error = error


class CurvesLoaded(QueryResult, bubble=False):
    """Layer curves for ``key`` = (metric, run ids), all variants (the screen shows those
    chosen), and the per-layer contrasts against the original (differences, floors of p)."""

    def __init__(
        self,
        key: CurveKey,
        rows: list[Row],
        generation: int = 0,
        contrasts: list[Row] | None = None,
    ) -> None:
        super().__init__()
        self.key = key
        self.rows = rows
        self.generation = generation  # the screen's reload count when the query started
        self.contrasts = contrasts or []


class ProfileLoaded(QueryResult, bubble=False):
    """The attention position profile for ``choice`` = (run id, variant, head or None)."""

    def __init__(self, choice: ProfileKey, rows: list[Row]) -> None:
        super().__init__()
        self.choice = choice
        self.rows = rows


class AttnFirstLoaded(QueryResult, bubble=False):
    """The ``attn_first`` (attention sink) curves of one run, per variant."""

    def __init__(self, run_id: str, rows: list[Row]) -> None:
        super().__init__()
        self.run_id = run_id
        self.rows = rows


class PosencLoaded(QueryResult, bubble=False):
    """Every row of ``posenc_results``."""

    def __init__(self, rows: list[Row]) -> None:
        super().__init__()
        self.rows = rows


class AblationLoaded(QueryResult, bubble=False):
    """The layer x head ablation grid of one encoding and task."""

    def __init__(self, pe: str, task: str, rows: list[Row]) -> None:
        super().__init__()
        self.pe = pe
        self.task = task
        self.rows = rows


class SqlDone(QueryResult, bubble=False):
    """A console query's result: at most the console's row limit, ``truncated`` past it."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]], truncated: bool) -> None:
        super().__init__()
        self.columns = columns
        self.rows = rows
        self.truncated = truncated


class QueryFailed(Message, bubble=False):
    """A background query raised. ``result`` is the QueryResult class it would have posted,
    ``error`` the database's own message; ``cancelled`` when the user interrupted it."""

    def __init__(self, result: type[QueryResult], error: str, cancelled: bool = False) -> None:
        super().__init__()
        self.result = result
        self.error = error
        self.cancelled = cancelled
