"""The corpus stage: reviews from a source, sampled and cut to the models' context
(docs/design.md)."""
