#!/usr/bin/env bash
# Installs the system packages Foundry needs and starts a private containerd.
# Idempotent: safe to run on every `make test` / `make example`.
set -euo pipefail
need=()
# graphviz draws `foundry graph -format svg`; chromium opens the report and the SVG in tests;
# e2fsprogs' mkfs.ext4 makes each cache volume's filesystem.
for p in containerd runc busybox-static docker-registry graphviz chromium e2fsprogs; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# npm: the MCP Inspector, the independent MCP client the tests drive. A machine whose Node
# comes from elsewhere (NodeSource bundles npm) keeps it.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "deps: run as root to install: ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -f "$(dirname "$0")/containerd.sh" ]; then
  bash "$(dirname "$0")/containerd.sh" start
fi
