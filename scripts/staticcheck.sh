#!/usr/bin/env bash
# Installs the staticcheck that `make vet` is pinned to, unless that exact version is already
# installed, and prints its path (as scripts/crane.sh does for crane).
#
# 2026.2.2 (module v0.8.2) is the release built with, and for, the Go that Foundry builds with;
# pinning it keeps `make vet` from changing its findings when a new release adds a check.
#
# Usage: scripts/staticcheck.sh      # installs into $GOBIN or $(go env GOPATH)/bin
set -euo pipefail
version=v0.8.2
module=honnef.co/go/tools
gobin=${GOBIN:-$(go env GOPATH)/bin}
bin=$gobin/staticcheck

# `go version -m` reads the module version that go install embedded: exact, and needs no network.
if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+${module}[[:space:]]+${version}([[:space:]]|$)"; then
  echo "$bin"
  exit 0
fi
echo "staticcheck.sh: installing staticcheck ${version} into ${gobin}" >&2
mkdir -p "$gobin"
# `go install pkg@version` builds from staticcheck's own go.mod: Foundry's go.mod is neither read nor changed.
GOBIN=$gobin GOFLAGS=-buildvcs=false go install "${module}/cmd/staticcheck@${version}"
echo "$bin"
