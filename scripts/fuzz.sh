#!/usr/bin/env bash
# Runs every go fuzz target in the module for the given duration each (default 10s).
set -euo pipefail
dur=${1:-10s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -l '^func Fuzz' "$dir"/*_test.go 2>/dev/null); do
    for t in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
      echo "fuzz $pkg $t ($dur)"
      # Minimizing a new interesting input may take up to a minute by default, during which
      # the fuzz time can run out and go test fails with "context deadline exceeded":
      # bound it well inside the fuzz time.
      go test -run='^$' -fuzz="^${t}\$" -fuzztime="$dur" -fuzzminimizetime=2s "$pkg"
    done
  done
done
