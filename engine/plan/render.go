package plan

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

var statusMark = map[string]string{
	StatusRun: "+", StatusCached: "=", StatusBuild: "+", StatusRegistry: "@", StatusMissing: "!", StatusAlternative: "?",
	StatusReconstruct: "~", StatusNeedsGrant: "#", StatusFetch: "<",
}

// WriteText renders the plan for people, grouped by capability, recipe and step. It
// writes through a buffer of its own: a plan has a line per node, and each would otherwise
// be a write to the terminal or pipe.
func (p *Plan) WriteText(out io.Writer) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	byAddr := make(map[string]*Node, len(p.Nodes))
	addrs := make([]string, 0, len(p.Nodes)) // sorted, to find a recipe's steps by prefix
	for _, n := range p.Nodes {
		byAddr[n.Address] = n
		addrs = append(addrs, n.Address)
	}
	slices.Sort(addrs)
	shown := map[string]bool{}
	fmt.Fprintf(w, "Project %q · plan %s\n", p.Project.Name, p.Digest.Short())

	line := func(indent string, n *Node, extra string) {
		shown[n.Address] = true
		fmt.Fprintf(w, "%s%s %-*s %-11s %s%s\n", indent, statusMark[n.Status], 40-len(indent), n.Address, n.Status, n.Digest.Short(), extra)
		if n.Reason != "" && n.Status != StatusAlternative {
			fmt.Fprintf(w, "%s    %s\n", indent, n.Reason)
		}
	}
	stepLine := func(indent string, n *Node) {
		extra := ""
		if n.Step != nil {
			extra = "  " + describeArgv(n.Step.Argv)
			for _, target := range slices.Sorted(maps.Keys(n.Step.Caches)) {
				c := n.Step.Caches[target]
				extra += "  cache " + c.Name + " at " + target
				if c.Sharing != lang.CacheShared {
					extra += " (" + c.Sharing + ")"
				}
				if c.MaxSize != 0 {
					extra += " max " + lang.FormatSize(c.MaxSize)
				}
			}
		}
		if e := n.Egress; e != nil {
			for _, h := range e.Hosts {
				extra += "  egress " + h.Host
				if h.Granted {
					extra += " (granted)"
				}
			}
		}
		line(indent, n, extra)
	}

	// grouped writes nodes with each line, the instances of a block with for_each or count
	// together under a line for the block.
	grouped := func(indent string, nodes []*Node, each func(indent string, n *Node)) {
		byBlock := map[string][]*Node{}
		for _, n := range nodes {
			if n.Block != "" {
				byBlock[n.Block] = append(byBlock[n.Block], n)
			}
		}
		for _, n := range nodes {
			insts := byBlock[n.Block]
			switch {
			case n.Block == "":
				each(indent, n)
			case insts != nil:
				what := "for_each"
				if n.Index != nil {
					what = "count"
				}
				plural := "s"
				if len(insts) == 1 {
					plural = ""
				}
				fmt.Fprintf(w, "%s  %s (%s, %d instance%s)\n", indent, n.Block, what, len(insts), plural)
				for _, m := range insts {
					each(indent+"  ", m)
				}
				delete(byBlock, n.Block)
			}
		}
	}
	var seeds, sources, steps, products []*Node
	modules := map[string][]*Node{}
	var moduleOrder []string
	for _, n := range p.Nodes {
		switch {
		case n.Module != "":
			if modules[n.Module] == nil {
				moduleOrder = append(moduleOrder, n.Module)
			}
			modules[n.Module] = append(modules[n.Module], n)
		case n.Kind == graph.KindSeed:
			seeds = append(seeds, n)
		case n.Kind == graph.KindSource:
			sources = append(sources, n)
		case (n.Kind == graph.KindStep) && !strings.Contains(n.Address, "."+string(graph.KindStep)+"."):
			steps = append(steps, n)
		case n.Kind == graph.KindProduct:
			products = append(products, n)
		}
	}
	if len(seeds) > 0 {
		fmt.Fprintln(w, "\nSeeds")
		grouped("  ", seeds, func(indent string, n *Node) { line(indent, n, "") })
	}
	if len(sources) > 0 {
		fmt.Fprintln(w, "\nSources")
		for _, n := range sources {
			line("  ", n, "  "+describeFetch(n.Fetch))
		}
	}
	if len(p.Capabilities) > 0 {
		fmt.Fprintln(w, "\nCapabilities")
		for _, c := range p.Capabilities {
			n := byAddr[c.Address]
			shown[c.Address] = true
			fmt.Fprintf(w, "  %s %-38s %-11s contract %s\n", statusMark[c.Status], c.Address, c.Status, c.ContractDigest.Short())
			if c.Reason != "" {
				fmt.Fprintf(w, "      %s\n", c.Reason)
			}
			if c.Registry != "" {
				fmt.Fprintf(w, "      registry: %s\n", c.Registry)
			}
			for _, note := range c.Notes {
				fmt.Fprintf(w, "      note: %s\n", note)
			}
			switch {
			case c.Status == StatusReconstruct:
				rc := c.Reconstruct
				if rc.Source == "proposals" {
					fmt.Fprintf(w, "      reachable, not ready: each round waits for a proposal sent from outside (foundry jobs propose, or the MCP propose tool), at most %d candidates\n", rc.Candidates)
				} else {
					fmt.Fprintf(w, "      reachable, not ready: %s runs %s on %s, at most %d candidates\n", rc.Builder, describeArgv(rc.Argv), rc.Image, rc.Candidates)
				}
				if b := rc.Build; b != nil {
					fmt.Fprintf(w, "      each proposal is built: %s runs %s on %s over %s, and the candidate is packaged from %s\n", b.Address, describeArgv(b.Argv), b.Image, lang.ProposalDir, strings.Join(b.Outputs, ", "))
				}
				b := rc.Budget
				if j := rc.Job; j == nil || j.Status == "new" {
					id := "a job"
					if j != nil {
						id = "job " + j.ID
					}
					fmt.Fprintf(w, "      %s, new: budget %d candidates, %d probes, %s wall, %s scratch, %g spend\n", id, b.Candidates, b.Probes, b.Wall, lang.FormatSize(b.ScratchBytes), b.Spend)
				} else {
					fmt.Fprintf(w, "      job %s (%s): %d of %d candidates, %d of %d probes, %dms of %s wall spent\n", j.ID, j.Status, j.Rounds, b.Candidates, j.Probes, b.Probes, j.WallMillis, b.Wall)
					if j.Next != "" {
						fmt.Fprintf(w, "      %s\n", j.Next)
					}
				}
			case !c.Ready && c.Reachable:
				fmt.Fprintln(w, "      reachable, not ready: a prerequisite is not at hand yet")
			}
			_ = n
			for _, r := range c.Recipes {
				rn := byAddr[r.Address]
				extra := fmt.Sprintf("  cost %d", r.Cost)
				if len(r.Missing) > 0 {
					extra += "  missing: " + strings.Join(r.Missing, ", ")
				}
				if r.Cycle != nil {
					extra += "  cycle: " + strings.Join(r.Cycle, " → ")
				}
				line("    ", rn, extra)
				// The recipe's package and steps: the addresses after its own that start
				// with it (a scan of every address per recipe grew with their product).
				lo, hi := under(addrs, r.Address+".")
				for _, a := range addrs[lo:hi] {
					stepLine("      ", byAddr[a])
				}
			}
		}
	}
	if len(steps) > 0 {
		fmt.Fprintln(w, "\nSteps")
		grouped("  ", steps, stepLine)
	}
	if len(moduleOrder) > 0 {
		fmt.Fprintln(w, "\nModules")
		for _, m := range moduleOrder {
			fmt.Fprintf(w, "  %s\n", m)
			grouped("    ", modules[m], stepLine)
			for _, n := range modules[m] {
				shown[n.Address] = true
			}
		}
	}
	if len(products) > 0 {
		fmt.Fprintln(w, "\nProducts")
		for _, n := range products {
			extra := ""
			if d := n.Deliver; d != nil {
				extra = "  deliver to " + d.To
				if d.Granted {
					extra += " (granted)"
				}
			}
			line("  ", n, extra)
			for _, a := range n.Deps {
				if strings.HasPrefix(a, n.Address+".") {
					stepLine("    ", byAddr[a])
				}
			}
		}
	}
	// Recipes that provide nothing known, or anything else not yet shown.
	var rest []*Node
	for _, n := range p.Nodes {
		if !shown[n.Address] {
			rest = append(rest, n)
		}
	}
	if len(rest) > 0 {
		fmt.Fprintln(w, "\nOther")
		for _, n := range rest {
			stepLine("  ", n)
		}
	}
	var host []string
	for _, in := range p.Inputs {
		if strings.HasPrefix(in.Kind, "host_") {
			host = append(host, fmt.Sprintf("  %-9s %s  %s", in.Kind, in.Digest.Short(), in.Path))
		}
	}
	if len(host) > 0 {
		fmt.Fprintln(w, "\nHost inputs (read from this machine, outside the project)")
		for _, h := range host {
			fmt.Fprintln(w, h)
		}
	}
	s := p.Summary
	if s := p.Partial(); s != "" {
		fmt.Fprintf(w, "\n%s", s)
	}
	more := "" // the counts shown only when not zero
	if n := s.Reconstruct - s.Exhausted; n > 0 {
		more = fmt.Sprintf(", %d to reconstruct", n)
	}
	if s.Exhausted > 0 {
		more += fmt.Sprintf(", %d exhausted (budget spent, raise it to go on)", s.Exhausted)
	}
	if s.Fetch > 0 {
		more += fmt.Sprintf(", %d to fetch", s.Fetch)
	}
	if s.NeedsGrant > 0 {
		more += fmt.Sprintf(", %d needs grant", s.NeedsGrant)
	}
	fmt.Fprintf(w, "\nPlan: %d to run, %d cached, %d to build, %d from registry%s, %d missing.\n", s.Run, s.Cached, s.Build, s.Registry, more, s.Missing)
}

// describeFetch says on one line what a source is and where it comes from: its first URL
// (and how many mirrors), its pin, and the tree it made when stored.
func describeFetch(f *Fetch) string {
	if f == nil || len(f.URLs) == 0 {
		return ""
	}
	s := f.URLs[0]
	if len(f.URLs) > 1 {
		s += fmt.Sprintf(" (+%d mirrors)", len(f.URLs)-1)
	}
	pin := f.Pin
	if d := digest.Digest(pin); d.Validate() == nil {
		pin = d.Short()
	} else if len(pin) > 12 {
		pin = pin[:12]
	}
	switch f.Type {
	case lang.SourceGit:
		s += " commit " + pin
	case lang.SourceHTTP:
		s += " sha256 " + strings.TrimPrefix(pin, "sha256:") + ", " + f.Archive
	}
	if f.Tree != "" {
		s += ", tree " + f.Tree.Short()
	}
	return s
}

// describeArgv abbreviates a command line for one line of output.
func describeArgv(argv []string) string {
	s := strings.Join(argv, " ")
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
