#!/usr/bin/env bash
# Installs the cosign that Foundry's interop test (cmd/foundry: TestCosignVerifiesFoundryAttestation)
# is pinned to, unless that exact version is already installed, and prints its path.
#
# CI runs this before `go test`; with CI=true the interop test fails instead of skipping when
# cosign is missing. cosign v3.1.3 is the newest that builds with the Go in go.mod's toolchain
# (1.26); building it takes a few minutes and about 2 GB of memory.
#
# Usage: scripts/cosign.sh            # installs into $GOBIN or $(go env GOPATH)/bin
set -euo pipefail
version=v3.1.3
module=github.com/sigstore/cosign/v3
gobin=${GOBIN:-$(go env GOPATH)/bin}
bin=$gobin/cosign

# `go version -m` reads the module version that go install embedded: it is exact, and needs
# neither network nor cosign's own version command.
if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+${module}[[:space:]]+${version}([[:space:]]|$)"; then
  echo "$bin"
  exit 0
fi
echo "cosign.sh: installing cosign ${version} into ${gobin} (a few minutes, ~2 GB RAM)" >&2
mkdir -p "$gobin"
# `go install pkg@version` builds in module-aware mode from cosign's own go.mod: Foundry's
# go.mod is neither read nor changed.
GOBIN=$gobin GOFLAGS=-buildvcs=false go install "${module}/cmd/cosign@${version}"
echo "$bin"
