# Shared by study/run.sh and study/sentences/run.sh (sourced, with P the params file): one
# study, one database (`homog load` keeps the runs of earlier loads, and the pages must
# describe this study's runs alone), the params' model keys in $models, and `stage CMD...`,
# which names and times each stage.
rm -f data/homog.duckdb
models=$(python -c "import sys; from homog.config import load_config; print(' '.join(load_config(sys.argv[1]).models))" "$P")
TIMEFORMAT="  -> %R s wall, %U + %S s CPU"
stage() { echo "== $*" >&2; time "$@"; }
