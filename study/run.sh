#!/usr/bin/env bash
# The study, stage by stage in this directory (outputs under study/data/), each stage timed and
# skipped when a run with the same params and code finished it (study/stages.sh): stop it
# and run it again to go on. One database serves every page: docs/results.md and its
# figures, docs/sentences.md's results block, the README's answer, and the published bundle
# study/results/ (homog publish) that any reader opens with --db study/results.
# Usage (from the repository root): make study [STUDY_PARAMS=quick.yaml]
set -euo pipefail
cd "$(dirname "$0")"
P="${1:-params.yaml}"
[ -f "$P" ] || { echo "study/run.sh: no params file study/$P" >&2; exit 2; }
. ./stages.sh
# PAGES_ONLY=1 (make study-pages): only the pages, from the committed study/results/ (after a
# change to how the report words or draws them), without the study's data
if [ -z "${PAGES_ONLY:-}" ]; then
  stage corpus homog corpus --params "$P"
  stage synth homog synth --params "$P"
  for m in $models; do
    stage "extract@$m" homog extract --model "$m" --params "$P"
    stage "mauve@$m" homog mauve --model "$m" --params "$P"
    # does homogenization cost anything? (docs/probe.md): pooled vectors, zero-shot answers, probes
    stage "probe@$m" homog probe --model "$m" --params "$P"
  done
  stage stats homog stats --params "$P"
  # one study, one database: the runs of an earlier study are not kept beside this one's
  stage load bash -c 'rm -f data/homog.duckdb && homog load --params "$1"' load "$P"
  stage report homog report --params "$P"
  # the published bundle first: the pages below are written from it, so that anyone rebuilds them
  # from the committed study/results/ and finds them unchanged (tests/test_published_study.py)
  stage publish homog publish --db data/homog.duckdb -o results
fi
# --force: docs/results.md and docs/results/ are this script's own outputs
stage results homog report --db results --params "$P" --format md -o ../docs/results.md \
  --figures-dir ../docs/results --force
stage sentences python -m homog.report.sentences_page --db results --params "$P" \
  --page ../docs/sentences.md --figures ../docs/sentences \
  --source "From the study's published tables (\`make study\`, \`study/results/\`), by \`python -m homog.report.sentences_page\`:"
# the README's "answer so far": the same lines as the results page's answer, the same tables
stage readme python -m homog.report.readme --db results --params "$P" --readme ../README.md
