#!/usr/bin/env bash
# Installs the crane that Foundry's registry interop tests and `make bench` (bench/registry) are
# pinned to, unless that exact version is already installed, and prints its path.
#
# CI runs this before `go test`; with CI=true the interop tests fail instead of skipping when
# crane is missing. crane v0.22.1 is the same go-containerregistry version Foundry builds on, so a
# difference between the two is a difference in how they are used, not in the library.
#
# Usage: scripts/crane.sh            # installs into $GOBIN or $(go env GOPATH)/bin
set -euo pipefail
version=v0.22.1
module=github.com/google/go-containerregistry
gobin=${GOBIN:-$(go env GOPATH)/bin}
bin=$gobin/crane

# `go version -m` reads the module version that go install embedded: exact, and needs no network.
if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+${module}[[:space:]]+${version}([[:space:]]|$)"; then
  echo "$bin"
  exit 0
fi
echo "crane.sh: installing crane ${version} into ${gobin}" >&2
mkdir -p "$gobin"
# `go install pkg@version` builds from crane's own go.mod: Foundry's go.mod is neither read nor changed.
GOBIN=$gobin GOFLAGS=-buildvcs=false go install "${module}/cmd/crane@${version}"
echo "$bin"
