#!/usr/bin/env bash
# The sentence study (issue 40), stage by stage in this directory, each stage timed:
# corpus, synth, then extract of the position family only (original, key_first, key_mid,
# key_last, key_control) for each model, stats, load, the HTML report, docs/sentences.md's
# results block and figures, and the README's answer line.
# Usage (from the repository root): make sentences
set -euo pipefail
cd "$(dirname "$0")"
P=params.yaml
. ../stages.sh
stage homog corpus --params "$P"
stage homog synth --params "$P"
# the family's texts (the paper's variants are the main study's)
python - <<'PY'
import pandas as pd
t = pd.read_parquet("data/synth/texts.parquet")
fam = t[t["variant"].isin(["original", "key_first", "key_mid", "key_last", "key_control"])]
fam = fam[fam["sample_id"].isin(t.loc[t["variant"] == "key_first", "sample_id"])]
fam.to_parquet("data/synth/family.parquet", index=False)
print(f"family: {fam['sample_id'].nunique()} reviews, {len(fam)} texts")
PY
for m in $models; do
  stage homog extract --model "$m" --params "$P" --texts data/synth/family.parquet --no-progress
done
stage homog stats --params "$P"
stage homog load --params "$P"
stage homog report --params "$P"   # data/report/report.html, its section "Where position acts"
# docs/sentences.md's results block and its figures, from this database
stage python -m homog.report.sentences_page --db data/homog.duckdb --params "$P" \
  --page ../../docs/sentences.md --figures ../../docs/sentences \
  --source "On the study's reviews with both embedded models (\`make sentences\`), by \`python -m homog.report.sentences_page\`:"
# the README's answer: the main study's lines and this one's (when the main study has run)
if [ -f ../data/homog.duckdb ]; then
  stage python -m homog.report.readme --db ../data/homog.duckdb --params ../params.yaml \
    --sentences-db data/homog.duckdb --readme ../../README.md
fi
