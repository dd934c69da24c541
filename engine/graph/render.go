package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteDOT renders the graph in Graphviz DOT: an edge points from a dependency to its user.
// Like a plan's WriteText, it writes through a buffer: a line per node and per edge.
//
// style, when not nil, gives a node's extra DOT attributes ("style=filled, fillcolor=…"):
// foundry graph -format svg colours nodes by their plan status with it.
func (g *Graph) WriteDOT(out io.Writer, keep func(addr string) bool, style func(addr string) string) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	fmt.Fprintln(w, "digraph foundry {")
	fmt.Fprintln(w, "  rankdir=LR;")
	fmt.Fprintln(w, "  node [shape=box, fontname=\"monospace\"];")
	shapes := map[NodeKind]string{KindSeed: "cylinder", KindSource: "note", KindCapability: "hexagon", KindRecipe: "folder", KindPackage: "box3d", KindStep: "box", KindCheck: "diamond", KindProduct: "doubleoctagon"}
	nodes, modules, order := g.drawn(keep)
	for _, a := range modules[""] {
		n := g.Nodes[a]
		fmt.Fprintf(w, "  %q [shape=%s, label=%q%s];\n", a, shapes[n.Kind], a+"\n"+n.Digest.Short(), extra(style, a))
	}
	for i, m := range order {
		fmt.Fprintf(w, "  subgraph cluster_%d {\n    label=%q;\n    style=rounded;\n", i, m)
		for _, a := range modules[m] {
			n := g.Nodes[a]
			fmt.Fprintf(w, "    %q [shape=%s, label=%q%s];\n", a, shapes[n.Kind], strings.TrimPrefix(a, m+".")+"\n"+n.Digest.Short(), extra(style, a))
		}
		fmt.Fprintln(w, "  }")
	}
	for _, a := range nodes {
		n := g.Nodes[a]
		for _, d := range n.Deps {
			if keep == nil || keep(d) {
				fmt.Fprintf(w, "  %q -> %q;\n", d, a)
			}
		}
		for _, r := range n.Providers {
			if keep == nil || keep(r) {
				fmt.Fprintf(w, "  %q -> %q [style=dashed, label=\"provides\"];\n", r, a)
			}
		}
	}
	fmt.Fprintln(w, "}")
}

// extra is style's attributes of node a, after a comma; "" when there are none.
func extra(style func(string) string, a string) string {
	if style == nil {
		return ""
	}
	if s := style(a); s != "" {
		return ", " + s
	}
	return ""
}

// drawn are the nodes to draw (keep's, or all) in graph order, by the cluster they are
// drawn in ("" for none: Cluster), and the clusters in the order first met.
func (g *Graph) drawn(keep func(string) bool) (nodes []string, modules map[string][]string, order []string) {
	modules = map[string][]string{}
	for _, a := range g.Order {
		if keep != nil && !keep(a) {
			continue
		}
		nodes = append(nodes, a)
		m := Cluster(a, g.Nodes[a])
		if m != "" && modules[m] == nil {
			order = append(order, m)
		}
		modules[m] = append(modules[m], a)
	}
	return nodes, modules, order
}

// Cluster is the group node a is drawn in: its module instance ("module.m" or
// "module.m[\"k\"]"), else the recipe or product it belongs to ("recipe.r" for the recipe and
// its steps and package, "product.p" for the product and its steps and checks), else "".
func Cluster(a string, n *Node) string {
	if m := n.Module(); m != "" {
		return m
	}
	for _, kind := range []string{"recipe.", "product."} {
		rest, ok := strings.CutPrefix(a, kind)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		return kind + name
	}
	return ""
}

// WriteMermaid renders the graph as a Mermaid flowchart, through a buffer (see WriteDOT).
func (g *Graph) WriteMermaid(out io.Writer, keep func(addr string) bool) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	fmt.Fprintln(w, "flowchart LR")
	nodes, modules, order := g.drawn(keep)
	id := map[string]string{}
	for i, a := range nodes {
		id[a] = fmt.Sprintf("n%d", i)
	}
	shape := func(indent, a, label string) {
		open, close := "[", "]"
		switch g.Nodes[a].Kind {
		case KindSeed:
			open, close = "[(", ")]"
		case KindSource:
			open, close = "[/", "/]"
		case KindCapability:
			open, close = "{{", "}}"
		case KindCheck:
			open, close = "{", "}"
		}
		fmt.Fprintf(w, "%s%s%s\"%s\"%s\n", indent, id[a], open, strings.ReplaceAll(label, `"`, "#quot;"), close)
	}
	for _, a := range modules[""] {
		shape("  ", a, a)
	}
	for i, m := range order {
		fmt.Fprintf(w, "  subgraph m%d[\"%s\"]\n", i, strings.ReplaceAll(m, `"`, "#quot;"))
		for _, a := range modules[m] {
			shape("    ", a, strings.TrimPrefix(a, m+"."))
		}
		fmt.Fprintln(w, "  end")
	}
	for _, a := range nodes {
		n := g.Nodes[a]
		for _, d := range n.Deps {
			if id[d] != "" {
				fmt.Fprintf(w, "  %s --> %s\n", id[d], id[a])
			}
		}
		for _, r := range n.Providers {
			if id[r] != "" {
				fmt.Fprintf(w, "  %s -. provides .-> %s\n", id[r], id[a])
			}
		}
	}
}
