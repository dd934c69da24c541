#!/usr/bin/env bash
# Runs every go fuzz target in the module for about the given number of seconds each
# (default 10; a trailing "s" is accepted), or with a pattern (an extended regular
# expression, matched against "PACKAGE.FuzzTarget") only the targets it matches.
#
# Usage: scripts/fuzz.sh [SECONDS] [PATTERN]    e.g. scripts/fuzz.sh 30 'cmd/foundry\.FuzzMCP'
#
# Why execution counts and not -fuzztime=10s: with a duration, Go 1.26's fuzz coordinator
# can report its own deadline as a failure ("context deadline exceeded", no crasher written;
# golang/go#75804, fixed in Go 1.27). A count (-fuzztime=Nx) stops through a path without
# that race. So each target runs in rounds of N executions, N sized from the rate of the
# previous rounds to fill the remaining time; any failure is then a real one.
set -euo pipefail
budget=${1:-10}
budget=${budget%s}
pattern=${2:-}
cd "$(dirname "$0")/.."

now_ms() { date +%s%3N; }

# run_count PKG TARGET N: fuzz for N executions, which include replaying the corpus first.
# Prints go test's output and sets $elapsed (ms) and $corpus (entries replayed).
run_count() {
  local start out
  start=$(now_ms)
  out=$(go test -run='^$' -fuzz="^${2}\$" -fuzztime="${3}x" -fuzzminimizetime=2s "$1" 2>&1) || {
    echo "$out"
    return 1
  }
  echo "$out"
  elapsed=$(($(now_ms) - start))
  corpus=$(echo "$out" | sed -n 's/.*gathering baseline coverage: 0\/\([0-9]*\) completed.*/\1/p' | head -1)
  corpus=${corpus:-0}
}

fuzz_target() { # package, target
  local pkg=$1 t=$2 end over fixed rate n left prev share
  echo "fuzz $pkg $t (${budget}s)"
  end=$(($(now_ms) + budget * 1000))
  # One execution: the cost of building and starting, and the corpus size.
  run_count "$pkg" "$t" 1
  over=$elapsed
  # Replaying the corpus: the fixed cost of every later round, and a first rate estimate
  # (rates differ 1000-fold between targets: a tar unpacker vs a JSON scanner).
  run_count "$pkg" "$t" $((corpus + 1))
  fixed=$elapsed
  rate=$((corpus * 1000 / ((fixed - over) > 50 ? (fixed - over) : 50) + 1))
  # A round's rate can be far below the last one's (new coverage is minimized), so each
  # round takes a share of the time left and at most 8 times the previous count.
  prev=$((corpus + 1))
  for share in 4 2 1 1; do
    left=$((end - $(now_ms) - fixed))
    ((left > 500)) || break
    n=$((rate * left / 1000 / share))
    n=$((n < 8 * prev ? n : 8 * prev))
    ((n >= 20)) || break
    run_count "$pkg" "$t" $((corpus + n))
    rate=$((n * 1000 / ((elapsed - fixed) > 100 ? (elapsed - fixed) : 100) + 1))
    prev=$n
  done
}

ran=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -l '^func Fuzz' "$dir"/*_test.go 2>/dev/null); do
    for t in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
      if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" <<<"$pkg.$t"; then
        continue
      fi
      fuzz_target "$pkg" "$t"
      ran=$((ran + 1))
    done
  done
done
if [ -n "$pattern" ] && ((ran == 0)); then
  echo "fuzz.sh: no fuzz target matches $pattern" >&2
  exit 1
fi
