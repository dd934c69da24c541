package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/internal/suggest"
)

// -target and -replace. A target names a node, or a block whose instances or nodes are
// under it (step.build for step.build["a"] and step.build["b"]; module.sum for every node of
// that module): the plan then holds those nodes and what they need, and says it is
// partial. A replaced step runs again even when a result is cached; what uses it follows
// the usual cache rules.

// selectionError is a -target or -replace that names nothing to plan.
type selectionError struct{ error }

// IsSelectionError reports whether err is a -target or -replace that names nothing.
func IsSelectionError(err error) bool {
	_, ok := err.(selectionError)
	return ok
}

// Resolve returns the nodes addr names: the node itself, or every node of the block or
// module it names. An address that names nothing is an error, with a suggestion.
func Resolve(g *graph.Graph, addr string) ([]string, error) {
	if g.Nodes[addr] != nil {
		return []string{addr}, nil
	}
	var out []string
	for _, a := range g.Order {
		if strings.HasPrefix(a, addr+"[") || strings.HasPrefix(a, addr+".") {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		// The nearest address, of a node or of a repeated block (step.build of
		// step.build["a"]).
		var names []string
		for a := range g.Nodes {
			names = append(names, a, blockOf(a))
		}
		hint := ""
		if best := suggest.Closest(addr, names); best != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", best)
		}
		return nil, fmt.Errorf("no node or block %s in this project%s", addr, hint)
	}
	return out, nil
}

// blockOf is an instance's address without its last key (step.build of step.build["a"]).
func blockOf(a string) string {
	if strings.HasSuffix(a, "]") {
		if i := strings.LastIndexByte(a, '['); i > 0 {
			return a[:i]
		}
	}
	return a
}

// Needed is the targets and every node they need: their dependencies, and for a
// capability the recipes that may provide it with everything under them.
func Needed(g *graph.Graph, targets []string) (map[string]bool, error) {
	keep := map[string]bool{}
	var queue []string
	add := func(a string) {
		if !keep[a] && g.Nodes[a] != nil {
			keep[a] = true
			queue = append(queue, a)
		}
	}
	for _, t := range targets {
		as, err := Resolve(g, t)
		if err != nil {
			return nil, selectionError{fmt.Errorf("-target %s: %w", t, err)}
		}
		for _, a := range as {
			add(a)
		}
	}
	for len(queue) > 0 {
		n := g.Nodes[queue[0]]
		queue = queue[1:]
		for _, d := range n.Deps {
			add(d)
		}
		for _, r := range n.Providers {
			add(r)
			for _, a := range g.Order {
				if strings.HasPrefix(a, r+".") {
					add(a)
				}
			}
		}
	}
	return keep, nil
}

// replaced resolves -replace addresses to the steps and checks they name.
func replaced(g *graph.Graph, addrs []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, r := range addrs {
		as, err := Resolve(g, r)
		if err != nil {
			return nil, selectionError{fmt.Errorf("-replace %s: %w", r, err)}
		}
		n := 0
		for _, a := range as {
			if k := g.Nodes[a].Kind; k == graph.KindStep || k == graph.KindCheck {
				out[a] = true
				n++
			}
		}
		if n == 0 {
			return nil, selectionError{fmt.Errorf("-replace %s: names no step or check; only steps run again", r)}
		}
	}
	return out, nil
}

// Replaced reports whether -replace names step addr.
func (p *Plan) Replaced(addr string) bool { return p.replaced[addr] }

// Partial says, for people, which part of the graph a plan with targets holds.
func (p *Plan) Partial() string {
	if len(p.Targets) == 0 {
		return ""
	}
	return fmt.Sprintf("Partial plan: only %s and what %s; the rest of the project is left as it is.",
		strings.Join(p.Targets, ", "), map[bool]string{true: "it needs", false: "they need"}[len(p.Targets) == 1])
}

// sortedUnique is xs sorted, each once.
func sortedUnique(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
