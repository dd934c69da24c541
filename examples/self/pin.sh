#!/bin/sh
# Re-pins examples/self's module fetch to the repository's go.mod and go.sum as they are:
# writes their SHA-256 into main.hcl's modules_pin, runs product.foundry.step.modules through
# the module proxy go env GOPROXY names, and writes the output digest it made (the one its
# failure names: "pin them: output_digest = ..."). `make example-self-pin` runs it; check
# the diff, then commit main.hcl.
set -eu
cd "$(dirname "$0")"
foundry=${FOUNDRY:-../../bin/foundry}
repo=$(cd ../.. && pwd)
sh ../fetch/operator/from-environment.sh .foundry/operator
set_pin() { sed -i "s|^\(    $1 *= \)\"[^\"]*\"|\1\"$2\"|" main.hcl; }
set_pin go_mod "$(sha256sum "$repo/go.mod" | cut -d' ' -f1)"
set_pin go_sum "$(sha256sum "$repo/go.sum" | cut -d' ' -f1)"
modules() {
	"$foundry" apply -auto-approve -progress plain -target product.foundry.step.modules \
		-var repo="$repo" -var-file .foundry/operator/proxy.vars -grants .foundry/operator/grants.hcl 2>&1
}
if out=$(modules); then
	echo "examples/self: the module pin is what go.mod and go.sum yield; main.hcl's modules_pin records them"
	exit 0
fi
got=$(printf '%s\n' "$out" | sed -n 's/.*pin them: output_digest = "\(sha256:[0-9a-f]\{64\}\)".*/\1/p' | head -n 1)
if [ -z "$got" ]; then
	printf '%s\n' "$out" >&2
	echo "pin.sh: product.foundry.step.modules failed for another reason than its digest; main.hcl is not pinned" >&2
	exit 1
fi
set_pin output_digest "$got"
modules >/dev/null
echo "examples/self: pinned the modules of go.sum to output_digest = \"$got\" in main.hcl; check the diff and commit it"
