#!/usr/bin/env bash
# Benchmarks. `make bench` runs deps (which starts the private containerd) and build first.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- executors -------------------------------------------------------------------------------
# Per-step overhead of the runc and containerd executors for a trivial step, each as a ratio to
# a raw `runc run` of an equivalent prepared bundle measured in the same run (interleaved step
# by step), and parallel efficiency for 100 `sleep 0.2` steps at parallelism 8.
# Knobs: EXECBENCH_N (trivial steps per executor), EXECBENCH_EXECUTORS.
# Needs root, runc, /bin/busybox and containerd at $FOUNDRY_CONTAINERD_ADDRESS.
echo "== executors"
go run ./executors/executortest/execbench \
  -n "${EXECBENCH_N:-60}" \
  -steps 100 -parallel 8 -sleep 200ms \
  -executors "${EXECBENCH_EXECUTORS:-runc,containerd}" \
  -containerd-address "${FOUNDRY_CONTAINERD_ADDRESS:-/run/foundry-containerd/containerd.sock}"
