package suggest

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"valdate", []string{"apply", "plan", "validate"}, "validate"},
		{"plna", []string{"apply", "plan", "validate"}, "plan"},           // a transposition is 2
		{"abc", []string{"dev", "repair", "sealed"}, ""},                  // 3 edits is too far
		{"step.sahrd", []string{"step.shard", "step.sort"}, "step.shard"}, // nearest, not first
		{"bb", []string{"b", "c"}, "b"},
		{"x", nil, ""},
		{"plan", []string{"plan", "plans"}, "plan"}, // an exact spelling is nearest
		// Ties: "cat" is 1 from both; the one that sorts first wins, in any order given.
		{"cat", []string{"cut", "bat"}, "bat"},
		{"cat", []string{"bat", "cut"}, "bat"},
	} {
		if got := Closest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}

// The tie-break holds over every order of the candidates, as it must when they come from
// ranging over a map.
func TestClosestTieBreakIsOrderFree(t *testing.T) {
	cands := []string{"plan", "flan", "clan", "plant", "apply"}
	want := Closest("xlan", cands)
	if want != "clan" {
		t.Fatalf("Closest(xlan) = %q, want clan", want)
	}
	for i := range 50 {
		perm := slices.Clone(cands)
		for j := range perm {
			k := (i*7 + j*3) % len(perm)
			perm[j], perm[k] = perm[k], perm[j]
		}
		if got := Closest("xlan", perm); got != want {
			t.Fatalf("order %q: %q, want %q", perm, got, want)
		}
	}
}
