"""The metrics' input errors, below every module that raises them (spectra, eigensolver)."""

from __future__ import annotations


class MetricInputError(ValueError):
    """Inputs that cannot give a meaningful metric (shape mismatch, empty text)."""


class NonFiniteError(MetricInputError):
    """NaN or inf in the hidden states at valid (unmasked) positions.

    ``indices`` lists the leading-dimension index tuples (e.g. (text, layer)) that hold them.
    """

    def __init__(self, message: str, indices: list[tuple[int, ...]]):
        super().__init__(message)
        self.indices = indices
