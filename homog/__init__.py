"""homog: token homogenization under positional bias in transformer language models.

The package is the headless core: metrics, pipeline stages, the DuckDB store and the
``homog`` CLI. It never imports ``tui`` or ``textual``.
"""

__version__ = "0.1.0"
