"""The stats stage: paired contrasts, their tests, the dose-response, separability and the moved
sentence's contrasts (docs/statistics.md)."""
