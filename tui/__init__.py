"""homog's terminal UI: a Textual app over the read-only DuckDB results file.

``tui`` imports ``homog``; ``homog`` never imports ``tui`` or ``textual``. The pure,
UI-free helpers live in :mod:`tui.core`; screens (one per file) in :mod:`tui.screens`,
widgets (one per file) in :mod:`tui.components`, styles in ``app.tcss``.
"""
