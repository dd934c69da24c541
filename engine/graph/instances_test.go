package graph

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
)

// instanceProject writes a step with for_each over values (key → value), written in the
// order given, and a consumer of every instance, and returns each node's digest.
func instanceProject(t *testing.T, keys, values []string) map[string]digest.Digest {
	t.Helper()
	var m []string
	for i, k := range keys {
		m = append(m, fmt.Sprintf("%q = %q", k, values[i]))
	}
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`
seed "base" {
  layer {
    files = { "/etc/x" = "x" }
  }
}
step "build" {
  for_each = { `+strings.Join(m, ", ")+` }
  image    = seed.base
  run      = ["sh", "-c", "echo ${each.value} > /out/o"]
  outputs  = ["/out/o"]
}
`), 0o644))
	return compileDir(t, dir)
}

// instanceDigests are the digests of step.build's instances, sorted (keys left out).
func instanceDigests(ds map[string]digest.Digest) []digest.Digest {
	var out []digest.Digest
	for a, d := range ds {
		if strings.HasPrefix(a, "step.build[") {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// An instance's digest is that of its definition: it does not depend on its key, on the
// other keys, or on the order for_each's elements are written in; two instances with the
// same definition have one digest; changing one instance's definition changes its digest
// and no other.
func TestInstanceDigestsIgnoreKeysAndOrder(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	for trial := 0; trial < 20; trial++ {
		n := 1 + r.Intn(6)
		keys, values := make([]string, n), make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d-%d", trial, i)
			values[i] = fmt.Sprintf("v%d", r.Intn(3)) // repeats: instances that share a definition
		}
		base := instanceProject(t, keys, values)

		// Other key names, in another order.
		perm := r.Perm(n)
		keys2, values2 := make([]string, n), make([]string, n)
		for i, j := range perm {
			keys2[i], values2[i] = fmt.Sprintf("other/%d", r.Int63()), values[j]
		}
		if a, b := instanceDigests(base), instanceDigests(instanceProject(t, keys2, values2)); !slices.Equal(a, b) {
			t.Fatalf("trial %d: renamed and reordered keys changed the instance digests:\n%v\n%v", trial, a, b)
		}
		for i := range keys {
			for j := range keys {
				same := base[fmt.Sprintf("step.build[%q]", keys[i])] == base[fmt.Sprintf("step.build[%q]", keys[j])]
				if same != (values[i] == values[j]) {
					t.Fatalf("trial %d: instances %s and %s (values %s, %s): same digest %v", trial, keys[i], keys[j], values[i], values[j], same)
				}
			}
		}

		// One instance's definition changes: its digest changes, and only its.
		k := r.Intn(n)
		changed := slices.Clone(values)
		changed[k] = "changed"
		after := instanceProject(t, keys, changed)
		for a, d := range base {
			if moved := after[a] != d; moved != (a == fmt.Sprintf("step.build[%q]", keys[k])) {
				t.Fatalf("trial %d: changing %s's value: %s changed %v", trial, keys[k], a, moved)
			}
		}
	}
}
