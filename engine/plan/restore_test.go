package plan

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
)

// TestRestoreIsCompile restores a compiled graph from its configuration and Compiled(), and
// requires the same plan; a restore from parts that do not fit is refused.
func TestRestoreIsCompile(t *testing.T) {
	cfg := graphtest.LoadSparse(t, rand.New(rand.NewSource(3)), 300, 3, 4)
	g, diags := graph.Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	jsonOf := func(g *graph.Graph) string {
		p, err := Make(g, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := p.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	want := jsonOf(g)
	nodes, order := g.Compiled()
	r, err := graph.Restore(cfg, nodes, order)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(r); got != want {
		t.Fatalf("the restored graph plans differently")
	}
	if _, err := graph.Restore(cfg, nodes[1:], order); err == nil {
		t.Errorf("a restore with a node missing was accepted")
	}
	reversed := append([]string(nil), order...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	if _, err := graph.Restore(cfg, nodes, reversed); err == nil {
		t.Errorf("a restore with an order against the edges was accepted")
	}
}
