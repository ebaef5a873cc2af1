"""``homog report``: the paper's claims checked on the database, in one readable document.

- ``claims``: the claims table (pure pandas over the store's tables) and the verdict rules;
- ``claims_view``: the summary (one paragraph per claim, generated from its rows) and the
  detailed claims tables;
- ``answer``, ``answer_line``: the answer's lines as data, and their one rendering (the
  report's first section and the README's answer);
- ``glossary``: variants, interventions, token sets, metrics, bands, verdict words, units;
- ``manipulation``: the manipulation strength from the texts table and the synth report.json;
- ``position``, ``figures_position``: each contrast beside its layer-0 control, dose-response;
- ``posenc_view``: the positional-encoding lab beside the paper, with spread and setup;
- ``provenance``: corpus, params, git commit, dvc.lock hashes, and what was not found;
- ``figures``: the report's own figures (MAUVE, head ablation); the rest come from homog.plot;
- ``document``: sections rendered to self-contained HTML or Markdown;
- ``inputs``: the frames read from the database (one run per model and intervention) and
  the claims computed from them (the report, ``homog claims`` and the README's answer);
- ``build``: ``build_report(db, out, fmt=...)``: read-only database in, one file out.

The package names nothing itself: import from the module that defines a name
(``from homog.report.build import build_report``), so that reading one module loads only
what it imports.
"""
