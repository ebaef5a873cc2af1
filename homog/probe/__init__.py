"""The ``probe@<model>`` stage: does homogenization cost the model anything?

Importing this package imports neither torch nor scikit-learn. The modules:

- ``pooled``: the mean hidden state over each text's metric tokens at every layer (the
  extraction's tokens, layers and interventions), stored in ``probe.vector_dtype``;
- ``lm``: the model's zero-shot sentiment log-odds from ``probe.prompt``;
- ``fit``: linear probes per layer with folds grouped by review (pure scikit-learn);
- ``summary``: accuracy and margin per layer and variant with bootstrap CIs, paired
  differences against the original and against ``none`` (the ``probe_metrics`` rows);
- ``cost``: the within-text slope of probe and zero-shot margins on erank;
- ``view``: the report's data from ``probe_metrics`` (``report_data``) and the headline;
- ``stage``: files in and out (``run_probe``). docs/probe.md describes the whole.
"""
