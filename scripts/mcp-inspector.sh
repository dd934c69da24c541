#!/usr/bin/env bash
# Installs the MCP Inspector that Foundry's MCP interop test (TestMCPInspector) drives as an
# independent client from another ecosystem, unless that exact version is already installed,
# and prints the path of its command.
#
# It goes into .test-tools/mcp-inspector in the repository (ignored by git), from the npm
# registry, with npm's lock of what it resolved kept beside it. CI runs this before `go test`
# (make test-tools); with CI=true the test fails instead of skipping when it is missing.
# Version 2.12.0 runs on Node 20 (it warns that it wants 22).
#
# Usage: scripts/mcp-inspector.sh
set -euo pipefail
version=2.12.0
pkg=@modelcontextprotocol/inspector
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.test-tools/mcp-inspector
bin=$dir/node_modules/.bin/mcp-inspector

installed() {
  [ -x "$bin" ] && [ "$(node -p "require('$dir/node_modules/$pkg/package.json').version" 2>/dev/null)" = "$version" ]
}
if installed; then
  echo "$bin"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "mcp-inspector.sh: npm is missing (apt-get install npm)" >&2
  exit 1
fi
echo "mcp-inspector.sh: installing ${pkg}@${version} into ${dir}" >&2
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkg}@${version}" >&2
installed || { echo "mcp-inspector.sh: ${pkg}@${version} did not install as expected" >&2; exit 1; }
echo "$bin"
