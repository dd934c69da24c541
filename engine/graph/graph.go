package graph

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/foundry-build/foundry/lang"
)

// NodeKind is what a graph node stands for.
type NodeKind string

const (
	KindSeed       NodeKind = "seed"
	KindSource     NodeKind = "source"
	KindCapability NodeKind = "capability"
	KindRecipe     NodeKind = "recipe"
	KindPackage    NodeKind = "package"
	KindStep       NodeKind = "step"
	KindCheck      NodeKind = "check"
	KindProduct    NodeKind = "product"
)

// Node is one vertex of the graph.
//
// Digest covers Definition and nothing else; Definition holds every field that determines
// the node's result, with each dependency by its own digest. Deliberately excluded, because
// they do not change what a node produces: block names, descriptions, summaries, source
// positions and the order of blocks and files.
type Node struct {
	Address    string
	Kind       NodeKind
	Deps       []string // addresses of nodes this node needs (AND), sorted
	Providers  []string // capability nodes only: recipes that can provide it (OR), sorted
	Digest     digest.Digest
	Definition json.RawMessage // the RFC 8785 canonical JSON that Digest is the SHA-256 of
	Range      hcl.Range

	Seed       *lang.Seed
	Source     *lang.Source
	Capability *lang.Capability
	Recipe     *lang.Recipe
	Package    *lang.Package
	Step       *lang.Step
	Product    *lang.Product

	num int32 // the node's number in address order (see Index)
	// A step's definition as addEdges writes it, until it is digested: template awaits its
	// producers' digests where holes say (see stepTemplate), or defErr says why it could
	// not be written.
	template []byte
	holes    []hole
	defErr   error
}

// Parts are the nodes of recipe node n's block, its package and its steps (nil for any
// other node): a recipe depends on them and on nothing else (addNodeEdges), so they are
// its Deps.
func (n *Node) Parts() []string {
	if n.Kind != KindRecipe {
		return nil
	}
	return n.Deps
}

// Module is the address of the module instance the node belongs to, "" for none.
func (n *Node) Module() string {
	scope := ""
	switch {
	case n.Step != nil:
		scope = n.Step.Scope
	case n.Seed != nil:
		scope = n.Seed.Scope
	case n.Source != nil:
		scope = n.Source.Scope
	}
	if strings.HasPrefix(scope, "module.") {
		return scope
	}
	return ""
}

// Graph is a compiled configuration.
type Graph struct {
	Config *lang.Config
	Nodes  map[string]*Node
	// Order lists every address so that each node comes after all its Deps; ties are broken
	// by address, so the order is deterministic.
	Order []string

	ix *Index // the nodes by number, for planning
}

// Compile builds the graph of cfg. It runs, in order: add nodes (every block becomes a node),
// add edges (every reference becomes an edge), reject cycles (a cycle has no order, so it must
// be found before ordering), order, then digest in that order (a digest needs the digests of
// its dependencies).
func Compile(cfg *lang.Config) (*Graph, hcl.Diagnostics) {
	g := &Graph{Config: cfg}
	made := g.addNodes()
	ix := newIndex(made)
	g.ix = ix
	diags := g.addEdges(ix)
	if diags.HasErrors() {
		return g, diags
	}
	if d := g.checkCycles(ix); d != nil {
		return g, hcl.Diagnostics{d}
	}
	g.order(ix)
	if err := g.digest(ix); err != nil {
		return g, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot compute digests", Detail: err.Error()}}
	}
	return g, nil
}

// addNodes makes every block a node, and returns the nodes in the order made: steps, the
// bulk of a large graph, last and in declaration order.
//
// That is the order lang decoded them in, so the passes that go through every node for its
// own data (edges, plan views) do so in that order (Index.Made), reading memory nearly in
// sequence: in address order, or in the order of the configuration's maps, each node's
// step and artifacts would be a cache miss or more.
func (g *Graph) addNodes() []*Node {
	c := g.Config
	var made []*Node
	for _, s := range c.Seeds {
		made = append(made, &Node{Address: s.Address(), Kind: KindSeed, Seed: s, Range: s.DeclRange})
	}
	for _, s := range c.Sources {
		made = append(made, &Node{Address: s.Address(), Kind: KindSource, Source: s, Range: s.DeclRange})
	}
	for name, cp := range c.Capabilities {
		made = append(made, &Node{Address: "capability." + name, Kind: KindCapability, Capability: cp, Range: cp.DeclRange})
	}
	for name, r := range c.Recipes {
		made = append(made, &Node{Address: "recipe." + name, Kind: KindRecipe, Recipe: r, Range: r.DeclRange})
		if r.Package != nil {
			made = append(made, &Node{Address: "recipe." + name + ".package", Kind: KindPackage, Package: r.Package, Recipe: r, Range: r.Package.Range})
		}
	}
	for name, p := range c.Products {
		made = append(made, &Node{Address: "product." + name, Kind: KindProduct, Product: p, Range: p.DeclRange})
	}
	// Steps, the bulk of a large graph, in declaration order (see lang.Config.EachStep).
	c.EachStep(func(st *lang.Step) {
		kind := KindStep
		if st.Kind == "check" {
			kind = KindCheck
		}
		made = append(made, &Node{Address: st.Address(), Kind: kind, Step: st, Range: st.DeclRange})
	})
	g.Nodes = make(map[string]*Node, len(made))
	for _, n := range made {
		g.Nodes[n.Address] = n
	}
	return made
}

// mount is one of a step's mounts.
type mount struct {
	path string
	art  *lang.Artifact
}

// sortedMounts lists m by path, in the order of a definition's keys (digest.CompareKeys).
func sortedMounts(m map[string]*lang.Artifact) []mount {
	out := make([]mount, 0, len(m))
	for p, a := range m {
		out = append(out, mount{p, a})
	}
	slices.SortFunc(out, func(a, b mount) int { return digest.CompareKeys(a.path, b.path) })
	return out
}

// artifacts lists the artifacts a node refers to: in a deterministic order when ordered
// is set, else those of a map in the map's order.
func (n *Node) Artifacts(ordered bool) []*lang.Artifact {
	var out []*lang.Artifact
	addMap := func(m map[string]*lang.Artifact) {
		if !ordered {
			for _, a := range m {
				out = append(out, a)
			}
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	}
	switch n.Kind {
	case KindSeed:
		for _, l := range n.Seed.Layers {
			if l.From != nil {
				out = append(out, l.From)
			}
			if l.Dir != nil && l.Dir.Kind == lang.ArtifactSource {
				out = append(out, l.Dir) // a source's tree is settled before the image is built
			}
		}
	case KindStep, KindCheck:
		if n.Step.Image != nil {
			out = append(out, n.Step.Image)
		}
		addMap(n.Step.Mounts)
	case KindPackage:
		if n.Package.Base != nil {
			out = append(out, n.Package.Base)
		}
		addMap(n.Package.Files)
	case KindProduct:
		out = append(out, n.Product.Requires...)
		if n.Product.Deliver != nil {
			addMap(n.Product.Deliver.Files)
		}
		if ac := n.Product.Accept; ac != nil {
			if ac.Image != nil {
				out = append(out, ac.Image)
			}
			addMap(ac.Files)
		}
	case KindCapability:
		// What a reconstruction reads: the builder's and the build's images and mounts, and
		// the package's base. Its package's files name the builder's (or the build's) runs
		// of its rounds, which are not nodes.
		if rc := n.Capability.Reconstruct; rc != nil {
			for _, b := range []*lang.Step{rc.Builder, rc.Build} {
				if b == nil {
					continue
				}
				if b.Image != nil {
					out = append(out, b.Image)
				}
				addMap(b.Mounts)
			}
			if rc.Package != nil && rc.Package.Base != nil {
				out = append(out, rc.Package.Base)
			}
			// The references' images: the evaluator runs a reference, each in its own
			// sandbox, for a differential suite's expected outputs.
			for _, name := range slices.Sorted(maps.Keys(rc.References)) {
				if img := rc.References[name].Image; img != nil {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// Index numbers the nodes in address order, so that the graph algorithms below (and
// planning) work on slices instead of maps keyed by address, and comparing two numbers
// compares addresses (the order's tie-break): hashing and comparing addresses would be most
// of their work. It is read-only outside this package.
type Index struct {
	Addrs []string  // by number
	Nodes []*Node   // by number
	Made  []int32   // the numbers in the order the nodes were made (see addNodes)
	Deps  [][]int32 // by number: the numbers of the node's Deps, in Deps order
	Order []int32   // the numbers of Graph.Order
	wave  []int32   // by number: 0 without dependencies, else 1 + the latest of theirs (see digest)
}

// Index is the graph's nodes by number (see Index).
func (g *Graph) Index() *Index { return g.ix }

// Num is the node's number in address order (see Index).
func (n *Node) Num() int32 { return n.num }

// newIndex numbers the nodes made in address order. An address made twice (which lang
// does not allow) is the last node made with it, as in Graph.Nodes.
func newIndex(made []*Node) *Index {
	type entry struct {
		addr string
		made int32
	}
	sorted := make([]entry, len(made))
	for i, n := range made {
		sorted[i] = entry{n.Address, int32(i)}
	}
	// Stable, so that of two nodes with one address the last made comes last.
	slices.SortStableFunc(sorted, func(a, b entry) int { return strings.Compare(a.addr, b.addr) })
	ix := &Index{Addrs: make([]string, 0, len(made)), Nodes: make([]*Node, 0, len(made))}
	for i, e := range sorted {
		if i+1 < len(sorted) && sorted[i+1].addr == e.addr {
			continue
		}
		n := made[e.made]
		n.num = int32(len(ix.Addrs))
		ix.Addrs = append(ix.Addrs, e.addr)
		ix.Nodes = append(ix.Nodes, n)
	}
	ix.Made = make([]int32, 0, len(ix.Nodes))
	for _, n := range made {
		if ix.Nodes[n.num] == n {
			ix.Made = append(ix.Made, n.num)
		}
	}
	ix.Deps = make([][]int32, len(ix.Addrs))
	return ix
}

// num returns the number of an address, which must be a node's.
func (g *Graph) num(a string) int32 {
	n, ok := g.Nodes[a]
	if !ok {
		panic("engine: a dependency that is not a node: " + a) // addEdges checks artifacts; the rest are built by addNodes
	}
	return n.num
}

// addEdges sets every node's Deps (and a capability's Providers). Nodes are independent
// here, so a large graph's are done on every core; diagnostics keep address order.
func (g *Graph) addEdges(ix *Index) hcl.Diagnostics {
	nodeDiags := make([]hcl.Diagnostics, len(ix.Addrs))
	parallel.Parts(len(ix.Made), ParallelMin/2, func(lo, hi int) {
		for _, k := range ix.Made[lo:hi] {
			nodeDiags[k] = g.addNodeEdges(ix, int(k))
		}
	})
	var diags hcl.Diagnostics
	for _, d := range nodeDiags {
		diags = append(diags, d...)
	}
	return diags
}

func (g *Graph) addNodeEdges(ix *Index, i int) hcl.Diagnostics {
	var diags hcl.Diagnostics
	addr, n := ix.Addrs[i], ix.Nodes[i]
	// Dependencies are gathered as node numbers: sorting and deduplicating those sorts and
	// deduplicates the addresses (numbers follow address order) without a map per node.
	// Other nodes' artifacts are taken in their maps' order: deps are sorted below, so only
	// diagnostics need an order, and a node with a bad reference goes through its artifacts
	// again, sorted.
	var arts []*lang.Artifact
	var mounts []mount
	step := n.Kind == KindStep || n.Kind == KindCheck
	if step {
		// A step's in the order its definition lists them (see stepTemplate).
		mounts = sortedMounts(n.Step.Mounts)
		arts = make([]*lang.Artifact, 0, len(mounts)+1)
		if n.Step.Image != nil {
			arts = append(arts, n.Step.Image)
		}
		for _, m := range mounts {
			arts = append(arts, m.art)
		}
	} else {
		arts = n.Artifacts(false)
	}
	deps := make([]int32, 0, len(arts))
	from := make([]*Node, len(arts)) // the producer of each artifact
	unknown := false
	for k, a := range arts {
		if a.Node == "" {
			continue // content read at evaluation time: no producing node
		}
		dn, ok := g.Nodes[a.Node]
		if !ok {
			unknown = true
			continue
		}
		deps = append(deps, dn.num)
		from[k] = dn
	}
	if step && !unknown {
		stepTemplate(n, mounts, from)
	}
	if unknown {
		for _, a := range n.Artifacts(true) {
			if _, ok := g.Nodes[a.Node]; a.Node != "" && !ok {
				rng := a.Range
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to unknown node",
					Detail: fmt.Sprintf("%s refers to %s, which does not exist.", addr, a.Node), Subject: &rng})
			}
		}
	}
	switch n.Kind {
	case KindRecipe:
		// A recipe is built when its package is assembled and all its steps have run
		// (a step the package does not use is still part of the recipe and its digest).
		if n.Recipe.Package != nil {
			deps = append(deps, g.num(addr+".package"))
		}
		for name := range n.Recipe.Steps {
			deps = append(deps, g.num(addr+".step."+name))
		}
	case KindProduct:
		for name := range n.Product.Steps {
			deps = append(deps, g.num(addr+".step."+name))
		}
		for name := range n.Product.Checks {
			deps = append(deps, g.num(addr+".check."+name))
		}
	case KindCapability:
		// Providers are alternatives (OR), not requirements: a cycle through one recipe
		// may be avoided by another, which only resolution can tell.
		for _, rn := range slices.Sorted(maps.Keys(g.Config.Recipes)) {
			r := g.Config.Recipes[rn]
			if r.Provides != nil && r.Provides.Node == addr {
				n.Providers = append(n.Providers, "recipe."+rn)
			}
		}
	}
	// Every dependency is a node: artifacts were checked above, and a recipe's or
	// product's steps, checks and package are nodes of their own (addNodes).
	slices.Sort(deps)
	deps = slices.Compact(deps)
	ix.Deps[i] = deps
	if len(deps) > 0 {
		n.Deps = make([]string, len(deps))
		for k, d := range deps {
			n.Deps[k] = ix.Addrs[d]
		}
	}
	return diags
}

// ParallelMin is the least number of nodes for which a graph pass (and a plan's) is split
// over the processors: below it, goroutines cost more than they save.
const ParallelMin = 2048

// checkCycles reports the first cycle found, naming every node on it.
func (g *Graph) checkCycles(ix *Index) *hcl.Diagnostic {
	const (
		unseen = iota
		onStack
		done
	)
	state := make([]uint8, len(ix.Addrs))
	var stack []int32
	var cycle []int32
	var visit func(int32) bool
	visit = func(a int32) bool {
		state[a] = onStack
		stack = append(stack, a)
		for _, d := range ix.Deps[a] {
			switch state[d] {
			case onStack:
				for i := range stack {
					if stack[i] == d {
						cycle = append(append([]int32{}, stack[i:]...), d)
						return true
					}
				}
			case unseen:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[a] = done
		return false
	}
	for a := range ix.Addrs {
		if state[a] == unseen && visit(int32(a)) {
			break
		}
	}
	if cycle == nil {
		return nil
	}
	// The cycle was found following "needs" edges; print it in the direction of data flow.
	var lines []string
	for i := len(cycle) - 1; i > 0; i-- {
		n := ix.Nodes[cycle[i]]
		lines = append(lines, fmt.Sprintf("  %s (%s:%d) is needed by %s", n.Address, n.Range.Filename, n.Range.Start.Line, ix.Addrs[cycle[i-1]]))
	}
	first := ix.Nodes[cycle[0]]
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Dependency cycle",
		Detail:   fmt.Sprintf("These blocks need each other, so none can run first:\n%s", strings.Join(lines, "\n")),
		Subject:  first.Range.Ptr(),
	}
}

// order sets g.Order with Kahn's algorithm, taking ready nodes in address order (the
// smallest number first), and each node's wave (Index.wave).
//
// Each node's users are one slice cut from a single array, and the ready set is a heap of
// plain numbers, not a slice per node and container/heap's boxing of every number pushed
// and popped: two allocations per node.
func (g *Graph) order(ix *Index) {
	n := len(ix.Addrs)
	indeg := make([]int32, n)
	from := make([]int32, n+1) // node a's users are users[from[a]:from[a+1]]
	// The lists of dependencies are read in the order they were made (see addNodes), in
	// which they lie in memory: in number order, each would be a cache miss.
	// A node's users may be in any order: every one is pushed on the heap.
	for _, a := range ix.Made {
		deps := ix.Deps[a]
		indeg[a] = int32(len(deps))
		for _, d := range deps {
			from[d+1]++
		}
	}
	for a := 0; a < n; a++ {
		from[a+1] += from[a]
	}
	users := make([]int32, from[n])
	next := slices.Clone(from[:n])
	for _, a := range ix.Made {
		for _, d := range ix.Deps[a] {
			users[next[d]] = a
			next[d]++
		}
	}
	var ready numHeap
	for a, k := range indeg {
		if k == 0 {
			ready = append(ready, int32(a)) // ascending: already a heap
		}
	}
	ix.Order = make([]int32, 0, n)
	ix.wave = make([]int32, n)
	for len(ready) > 0 {
		a := ready.pop()
		ix.Order = append(ix.Order, a)
		for _, u := range users[from[a]:from[a+1]] {
			ix.wave[u] = max(ix.wave[u], ix.wave[a]+1) // final when u is taken
			indeg[u]--
			if indeg[u] == 0 {
				ready.push(u)
			}
		}
	}
	g.Order = make([]string, len(ix.Order))
	for i, a := range ix.Order {
		g.Order[i] = ix.Addrs[a]
	}
}

// numHeap is a min-heap of node numbers.
type numHeap []int32

func (h *numHeap) push(x int32) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent] <= s[i] {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

func (h *numHeap) pop() int32 {
	s := *h
	top, last := s[0], len(s)-1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		min, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && s[l] < s[min] {
			min = l
		}
		if r < len(s) && s[r] < s[min] {
			min = r
		}
		if min == i {
			break
		}
		s[i], s[min] = s[min], s[i]
		i = min
	}
	*h = s
	return top
}
