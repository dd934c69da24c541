package graph

import (
	"bufio"
	"fmt"
	"io"
)

// WriteDOT renders the graph in Graphviz DOT: an edge points from a dependency to its user.
// Like a plan's WriteText, it writes through a buffer: a line per node and per edge.
func (g *Graph) WriteDOT(out io.Writer) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	fmt.Fprintln(w, "digraph foundry {")
	fmt.Fprintln(w, "  rankdir=LR;")
	fmt.Fprintln(w, "  node [shape=box, fontname=\"monospace\"];")
	shapes := map[NodeKind]string{KindSeed: "cylinder", KindCapability: "hexagon", KindRecipe: "folder", KindPackage: "box3d", KindStep: "box", KindCheck: "diamond", KindProduct: "doubleoctagon"}
	for _, a := range g.Order {
		n := g.Nodes[a]
		fmt.Fprintf(w, "  %q [shape=%s, label=%q];\n", a, shapes[n.Kind], a+"\n"+n.Digest.Short())
	}
	for _, a := range g.Order {
		n := g.Nodes[a]
		for _, d := range n.Deps {
			fmt.Fprintf(w, "  %q -> %q;\n", d, a)
		}
		for _, r := range n.Providers {
			fmt.Fprintf(w, "  %q -> %q [style=dashed, label=\"provides\"];\n", r, a)
		}
	}
	fmt.Fprintln(w, "}")
}

// WriteMermaid renders the graph as a Mermaid flowchart, through a buffer (see WriteDOT).
func (g *Graph) WriteMermaid(out io.Writer) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	fmt.Fprintln(w, "flowchart LR")
	id := map[string]string{}
	for i, a := range g.Order {
		id[a] = fmt.Sprintf("n%d", i)
		open, close := "[", "]"
		switch g.Nodes[a].Kind {
		case KindSeed:
			open, close = "[(", ")]"
		case KindCapability:
			open, close = "{{", "}}"
		case KindCheck:
			open, close = "{", "}"
		}
		fmt.Fprintf(w, "  %s%s\"%s\"%s\n", id[a], open, a, close)
	}
	for _, a := range g.Order {
		n := g.Nodes[a]
		for _, d := range n.Deps {
			fmt.Fprintf(w, "  %s --> %s\n", id[d], id[a])
		}
		for _, r := range n.Providers {
			fmt.Fprintf(w, "  %s -. provides .-> %s\n", id[r], id[a])
		}
	}
}
