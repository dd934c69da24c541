package graph

import (
	"fmt"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/lang"
)

// CompiledNode is what Compile adds to a node made from a configuration block: its edges
// and its digest. With the configuration it came from, it is the whole node.
type CompiledNode struct {
	Address    string
	Deps       []string
	Providers  []string
	Digest     digest.Digest
	Definition []byte
}

// Compiled returns what Compile computed of g: every node's edges and digest, in address
// order, and the order. Restore(g.Config, Compiled()) is g again.
func (g *Graph) Compiled() (nodes []CompiledNode, order []string) {
	nodes = make([]CompiledNode, len(g.ix.Nodes))
	for i, n := range g.ix.Nodes {
		nodes[i] = CompiledNode{Address: n.Address, Deps: n.Deps, Providers: n.Providers, Digest: n.Digest, Definition: n.Definition}
	}
	return nodes, g.Order
}

// Restore rebuilds the graph that Compile made of cfg from what Compiled returned, without
// compiling again: a cache of compiled graphs stores those and the configuration. It fails
// when they do not fit together (a node of one that is not a node of the other, an order
// that is not one of the nodes), never guessing.
func Restore(cfg *lang.Config, nodes []CompiledNode, order []string) (*Graph, error) {
	g := &Graph{Config: cfg}
	made := g.addNodes()
	ix := newIndex(made)
	g.ix = ix
	if len(nodes) != len(ix.Nodes) || len(order) != len(ix.Nodes) || len(g.Nodes) != len(ix.Nodes) {
		return nil, fmt.Errorf("engine: restore: %d compiled nodes and %d in order for %d nodes", len(nodes), len(order), len(ix.Nodes))
	}
	for _, c := range nodes {
		n, ok := g.Nodes[c.Address]
		if !ok {
			return nil, fmt.Errorf("engine: restore: %s is not a node of the configuration", c.Address)
		}
		deps := make([]int32, len(c.Deps))
		for k, d := range c.Deps {
			dn, ok := g.Nodes[d]
			if !ok {
				return nil, fmt.Errorf("engine: restore: %s needs %s, which is not a node", c.Address, d)
			}
			deps[k] = dn.num
		}
		n.Deps, n.Providers, n.Digest, n.Definition = c.Deps, c.Providers, c.Digest, c.Definition
		ix.Deps[n.num] = deps
	}
	ix.Order = make([]int32, len(order))
	ix.wave = make([]int32, len(order))
	placed := make([]bool, len(ix.Nodes))
	for i, a := range order {
		n, ok := g.Nodes[a]
		if !ok || placed[n.num] {
			return nil, fmt.Errorf("engine: restore: the order lists %s, not a node or twice", a)
		}
		for _, d := range ix.Deps[n.num] {
			if !placed[d] {
				return nil, fmt.Errorf("engine: restore: the order lists %s before %s, which it needs", a, ix.Addrs[d])
			}
			ix.wave[n.num] = max(ix.wave[n.num], ix.wave[d]+1)
		}
		placed[n.num] = true
		ix.Order[i] = n.num
	}
	g.Order = order
	return g, nil
}
