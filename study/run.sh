#!/usr/bin/env bash
# The study, stage by stage, in this directory (outputs under study/data/), each stage timed.
# Usage (from the repository root): make study [STUDY_PARAMS=quick.yaml]
# Then docs/results.md and docs/results/*.png are written by `homog report --format md` from
# the study database, and study/data/report/report.html is the full HTML report.
set -euo pipefail
cd "$(dirname "$0")"
P="${1:-params.yaml}"
[ -f "$P" ] || { echo "study/run.sh: no params file study/$P" >&2; exit 2; }
. ./stages.sh
stage homog corpus --params "$P"
stage homog synth --params "$P"
for m in $models; do
  stage homog extract --model "$m" --params "$P"
  stage homog mauve --model "$m" --params "$P"
  # does homogenization cost anything? (docs/probe.md): pooled vectors, zero-shot answers, probes
  stage homog probe --model "$m" --params "$P"
done
stage homog stats --params "$P"
stage homog load --params "$P"
stage homog report --params "$P"
# --force: docs/results.md and docs/results/ are this script's own outputs (pages written
# before homog marked its outputs carry no mark)
stage homog report --params "$P" --format md -o ../docs/results.md --figures-dir ../docs/results --force
# the README's "answer so far": the same lines as the results page's answer, from this database
# (with the sentence study's line when `make sentences` has run: docs/sentences.md)
stage python -m homog.report.readme --db data/homog.duckdb --params "$P" --readme ../README.md \
  --sentences-db sentences/data/homog.duckdb
