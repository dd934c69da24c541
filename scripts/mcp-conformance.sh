#!/usr/bin/env bash
# Installs the MCP project's own conformance suite, which TestMCPConformance runs against
# `foundry mcp -http` (the suite tests servers over Streamable HTTP only), unless that exact
# version is already installed, and prints the path of its command.
#
# It goes into .test-tools/mcp-conformance in the repository (ignored by git), from the npm
# registry, with npm's lock of what it resolved kept beside it. CI runs this before `go test`
# (make test-tools); with CI=true the test fails instead of skipping when it is missing.
#
# 0.1.13 is the newest that runs on Node 20 (0.1.14 on calls fs.globSync, Node 22).
#
# Usage: scripts/mcp-conformance.sh
set -euo pipefail
version=0.1.13
pkg=@modelcontextprotocol/conformance
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.test-tools/mcp-conformance
bin=$dir/node_modules/.bin/conformance

installed() {
  [ -x "$bin" ] && [ "$(node -p "require('$dir/node_modules/$pkg/package.json').version" 2>/dev/null)" = "$version" ]
}
if installed; then
  echo "$bin"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "mcp-conformance.sh: npm is missing (apt-get install npm)" >&2
  exit 1
fi
echo "mcp-conformance.sh: installing ${pkg}@${version} into ${dir}" >&2
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkg}@${version}" >&2
installed || { echo "mcp-conformance.sh: ${pkg}@${version} did not install as expected" >&2; exit 1; }
echo "$bin"
