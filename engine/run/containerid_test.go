package run

import (
	"regexp"
	"testing"

	"github.com/foundry-build/foundry/engine/workspace"
)

// containerdID is the pattern containerd validates container IDs against.
var containerdID = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`)

// Every address, an instance's or a module's too, makes a container ID containerd takes.
func TestContainerIDsOfEveryAddressAreValid(t *testing.T) {
	for _, a := range []string{"step.build", `step.build["linux/arm64"]`, "step.shard[3]",
		`module.sum["linux/amd64"].step.build`, `recipe.r.step.x`, `step.a["--//--"]`, `step.é`} {
		id := ContainerPrefixOf("r20261201t222115-06848b2b") + shortAddr(a) + "-" + workspace.NewID()
		if !containerdID.MatchString(id) {
			t.Errorf("%s: container ID %q is not one containerd takes", a, id)
		}
	}
}
