# Sourced by study/run.sh (with P the params file): the params' model keys in $models, and
# `stage NAME CMD...`, which names and times each stage and makes the study resumable.
#
# A stage that finished writes data/.stages/NAME with its key (study/stage_key.py): a hash
# of what the stage reads, as dvc.yaml lists it (its code under homog/, its input data) and
# of the study's resolved params. Run again with the same key, a finished stage is skipped,
# so a study stopped midway goes on where it stopped, also after commits that leave the
# stage's code alone (an extraction stopped inside a model resumes at its next shard of
# texts, and keeps the interventions it finished, by itself). Any change to what a stage
# reads runs it again.
models=$(python -c "import sys; from homog.config import load_config; print(' '.join(load_config(sys.argv[1]).models))" "$P")
TIMEFORMAT="  -> %R s wall, %U + %S s CPU"
STAGES=data/.stages
STAGE_KEY="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/stage_key.py"
mkdir -p "$STAGES"
stage() {
  local name=$1 key
  shift
  key=$(python "$STAGE_KEY" "$name" "$P")
  if [ "$(cat "$STAGES/$name" 2>/dev/null)" = "$key" ]; then
    echo "== $name: done with what it reads now (params, code, inputs), skipped" >&2
    return 0
  fi
  echo "== $name: $*" >&2
  local rc=0
  time "$@" || rc=$?  # (set -e does not reach inside a function called in a condition)
  [ "$rc" -eq 0 ] || return "$rc"
  echo "$key" > "$STAGES/$name"
}
