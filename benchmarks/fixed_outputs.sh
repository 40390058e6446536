#!/usr/bin/env bash
# Writes what `gpu-test-lint check --fix` makes of each input tree, under several option sets,
# into OUT/<tree>/<variant>/, so two checkouts' fixes can be compared with `diff -r`.
# Usage: benchmarks/fixed_outputs.sh GPU_TEST_LINT OUT TREE...   (TREE: name=path)
# Example (a refactor must leave every fixed byte as it was):
#   benchmarks/fixed_outputs.sh .venv/bin/gpu-test-lint /tmp/before examples=examples \
#       corpus=tests/e2e/suites gaudi=/tmp/gaudi/tests spyre=/tmp/spyre/tests
#   (change the code, run again into /tmp/after)  diff -r /tmp/before /tmp/after
set -u
tool=$1; out=$2; shift 2
variants=(
  "safe|"
  "unsafe|--unsafe-fixes"
  "vllm|--unsafe-fixes --target vllm"
  "isolate|--unsafe-fixes --fix-strategy isolate"
)
for spec in "$@"; do
  name=${spec%%=*}; src=${spec#*=}
  for v in "${variants[@]}"; do
    vname=${v%%|*}; flags=${v#*|}
    dest=$out/$name/$vname
    rm -rf "$dest"; mkdir -p "$dest"
    cp -r "$src/." "$dest/"
    # shellcheck disable=SC2086
    (cd "$dest" && "$tool" check --no-cache --fix --exit-zero $flags . \
        > "$out/$name/$vname.report" 2>&1)
    sed -i "s#$dest#<tree>#g" "$out/$name/$vname.report"
  done
done
