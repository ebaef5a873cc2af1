#!/usr/bin/env bash
# Regenerate the figures of docs/benchmarks.md: run each benchmark and write what it prints,
# with the command, the date and the machine, to docs/benchmarks/<name>.txt (the page
# includes these files as they are; nothing on it is copied by hand).
#   bash docs/benchmarks/run.sh            # every benchmark below
#   bash docs/benchmarks/run.sh gram_vs_svd
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
# One thread for every library: comparable on any machine, and no spinning BLAS threads on a
# busy one. THREADS=2 bash docs/benchmarks/run.sh measures with two.
export OMP_NUM_THREADS=${THREADS:-1} OPENBLAS_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
declare -A BENCH=(
  [gram_vs_svd]="bench/metrics_gram_vs_svd.py --texts 16 --layers 13 --tokens 128"
  [peers]="bench/peers.py --tools homog-min,homog,hf-fast,hf --n-texts 4 --tokens 512 --repeats 2 --out bench/out/peers"
)
machine() {
  local cpu
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  echo "machine: ${cpu:-unknown CPU}, $(nproc --all) cores, $(free -g | awk '/Mem:/{print $2}') GiB," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $OMP_NUM_THREADS thread(s);" \
    "torch $($PY -c 'import torch; print(torch.__version__)')"
}
for name in "${@:-${!BENCH[@]}}"; do
  cmd=${BENCH[$name]:?unknown benchmark $name}
  out=docs/benchmarks/$name.txt
  { echo "\$ python $cmd"; echo "date: $(date -u +%Y-%m-%d)"; machine; echo
    $PY $cmd; } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "$out"
done
