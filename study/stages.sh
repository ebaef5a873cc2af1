# Sourced by study/run.sh (with P the params file): the params' model keys in $models, and
# `stage NAME CMD...`, which names and times each stage and makes the study resumable.
#
# A stage that finished writes data/.stages/NAME with the study's key: the params file's hash,
# homog's commit and any uncommitted change under homog/. Run again with the same key, a
# finished stage is skipped, so a study stopped midway goes on where it stopped (an extraction
# stopped inside a model resumes at its next shard of texts by itself). A new key (other
# params, other code) runs every stage again.
models=$(python -c "import sys; from homog.config import load_config; print(' '.join(load_config(sys.argv[1]).models))" "$P")
TIMEFORMAT="  -> %R s wall, %U + %S s CPU"
STAGES=data/.stages
key=$( { sha256sum "$P"; git -C .. rev-parse HEAD 2>/dev/null || true; git -C .. diff HEAD -- homog 2>/dev/null || true; } | sha256sum | cut -c1-16)
mkdir -p "$STAGES"
stage() {
  local name=$1
  shift
  if [ "$(cat "$STAGES/$name" 2>/dev/null)" = "$key" ]; then
    echo "== $name: done with this study's params and code, skipped" >&2
    return 0
  fi
  echo "== $name: $*" >&2
  local rc=0
  time "$@" || rc=$?  # (set -e does not reach inside a function called in a condition)
  [ "$rc" -eq 0 ] || return "$rc"
  echo "$key" > "$STAGES/$name"
}
