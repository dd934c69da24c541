#!/usr/bin/env bash
# Installs the MCP TypeScript SDK, whose client TestMCPTypeScriptClient drives (testdata/
# mcp-ts-client.mjs) against foundry mcp over stdio and Streamable HTTP as a second host,
# unless that exact version is already installed, and prints the path of its package.json.
#
# It goes into .test-tools/mcp-sdk in the repository (ignored by git), from the npm registry,
# with npm's lock of what it resolved kept beside it. CI runs this before `go test` (make
# test-tools); with CI=true the test fails instead of skipping when it is missing.
#
# Usage: scripts/mcp-sdk.sh
set -euo pipefail
version=1.32.2
pkg=@modelcontextprotocol/sdk
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.test-tools/mcp-sdk
bin=$dir/node_modules/$pkg/package.json

installed() {
  [ -f "$bin" ] && [ "$(node -p "require('$dir/node_modules/$pkg/package.json').version" 2>/dev/null)" = "$version" ]
}
if installed; then
  echo "$bin"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "mcp-sdk.sh: npm is missing (apt-get install npm)" >&2
  exit 1
fi
echo "mcp-sdk.sh: installing ${pkg}@${version} into ${dir}" >&2
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkg}@${version}" >&2
installed || { echo "mcp-sdk.sh: ${pkg}@${version} did not install as expected" >&2; exit 1; }
echo "$bin"
