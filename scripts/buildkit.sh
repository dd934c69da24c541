#!/usr/bin/env bash
# Builds the buildkitd and buildctl that `make bench` (bench/apply, part buildkit) compares
# Foundry's 41-step chain against, unless that exact version is already built, and prints the
# directory that holds them.
#
# BuildKit v0.34.2 is built from its module source (the Go module proxy's zip): `go install
# pkg@version` refuses it because its go.mod has exclude directives, so the source is copied out
# of the read-only module cache and built in place, from BuildKit's own go.mod (Foundry's go.mod
# is neither read nor changed). The version is stamped as BuildKit's own build does, and
# `buildctl --version` checks it. The first build takes a few minutes and ~2 GB of memory.
#
# Usage: scripts/buildkit.sh        # builds into ${XDG_CACHE_HOME:-~/.cache}/foundry/buildkit-v0.34.2
set -euo pipefail
version=v0.34.2
module=github.com/moby/buildkit
dir=${XDG_CACHE_HOME:-$HOME/.cache}/foundry/buildkit-$version

if [ -x "$dir/buildkitd" ] && [ -x "$dir/buildctl" ] && "$dir/buildctl" --version 2>/dev/null | grep -Eq " ${version}( |$)"; then
  echo "$dir"
  exit 0
fi
echo "buildkit.sh: building buildkitd and buildctl ${version} into ${dir} (a few minutes, ~2 GB RAM)" >&2
src=$(go mod download -json "${module}@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -d "$src" ]; then
  echo "buildkit.sh: go mod download of ${module}@${version} gave no source directory" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
mkdir -p "$dir"
ldflags="-X ${module}/version.Version=${version} -X ${module}/version.Package=${module}"
# CGO off: static binaries that need no C toolchain; the OCI worker runs the host's runc.
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice go build -ldflags "$ldflags" -o "$dir/" ./cmd/buildkitd ./cmd/buildctl)
"$dir/buildctl" --version >&2
echo "$dir"
