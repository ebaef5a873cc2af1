"""The one exception type users see: ``HomogError``, a problem the user can fix."""

from __future__ import annotations


class HomogError(Exception):
    """An error the user can fix; the CLI prints its message and exits non-zero."""
