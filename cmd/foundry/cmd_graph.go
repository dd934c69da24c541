package main

import (
	"bytes"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
)

// planColors fill the nodes of a drawn graph by plan status, in the colours the report
// gives the outcomes they lead to.
var planColors = map[string]string{
	plan.StatusRun:         outcomeColors["executed"],
	plan.StatusCached:      outcomeColors["cached"],
	plan.StatusBuild:       outcomeColors["built"],
	plan.StatusFetch:       outcomeColors["fetched"],
	plan.StatusRegistry:    outcomeColors["settled"],
	plan.StatusReconstruct: "#ffd54f",
	plan.StatusMissing:     outcomeColors["failed"],
	plan.StatusNeedsGrant:  outcomeColors["skipped"],
}

// drawGraph draws g with Graphviz's dot at dotPath as format (svg or png), its nodes
// coloured by the plan's statuses. A project that cannot be planned is drawn uncoloured,
// with why on stderr.
func drawGraph(env *cliEnv, dir string, g *graph.Graph, keep func(string) bool, sel plan.Selection, dotPath, format string) error {
	status := map[string]string{}
	if p, err := planWithCache(dir, g, nil, sel); err != nil {
		fmt.Fprintf(env.stderr, "foundry graph: drawn without plan statuses: %v\n", err)
	} else {
		for _, n := range p.Nodes {
			status[n.Address] = n.Status
		}
	}
	style := func(a string) string {
		st := status[a]
		if st == plan.StatusAlternative {
			return `style=dashed, tooltip="alternative"`
		}
		if c := planColors[st]; c != "" {
			return fmt.Sprintf("style=filled, fillcolor=%q, tooltip=%q", c, st)
		}
		return ""
	}
	var src bytes.Buffer
	g.WriteDOT(&src, keep, style)
	cmd := exec.Command(dotPath, "-T"+format)
	cmd.Stdin, cmd.Stdout = &src, env.stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dot -T%s: %v: %s", format, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func init() {
	register(&command{
		name:    "graph",
		summary: "Print the build graph as Graphviz DOT or Mermaid",
		usage:   "foundry graph [options] [DIR]",
		help: `
Graph prints the compiled graph of the project in DIR (-format dot or mermaid), or draws
it (-format svg or png) with Graphviz's dot, each node filled with the colour of its plan
status (run, cached, build, fetch, registry, reconstruct, missing, needs-grant; an
alternative recipe is dashed). Solid edges point from what a node
needs to the node; dashed "provides" edges link a capability to the recipes that can build
it (alternatives, of which one is used). The nodes of each module instance, recipe and
product are drawn together in a cluster labelled with its address. With -target, only the targets and what
they need are drawn.

Examples:
  foundry graph | dot -Tsvg > graph.svg
  foundry graph -format mermaid > graph.mmd
  foundry graph -format svg > graph.svg
  foundry graph -target 'module.sum["linux/arm64"]'

Exit codes: 0 success, 1 configuration errors or no Graphviz for svg and png, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			format := fs.String("format", "dot", "output `FORMAT`: dot, mermaid, svg or png (svg and png need Graphviz)")
			var sel selectFlags
			sel.register(fs, false)
			return func(env *cliEnv, args []string) int {
				if !slices.Contains([]string{"dot", "mermaid", "svg", "png"}, *format) {
					fmt.Fprintf(env.stderr, "foundry graph: -format must be dot, mermaid, svg or png, not %q\n", *format)
					return exitUsage
				}
				dotPath := ""
				if *format == "svg" || *format == "png" {
					var err error
					if dotPath, err = exec.LookPath("dot"); err != nil {
						fmt.Fprintf(env.stderr, "foundry graph: -format %s draws the graph with Graphviz's dot, which is not installed here (Debian: apt-get install graphviz). 'foundry graph' prints the DOT to draw elsewhere.\n", *format)
						return exitError
					}
				}
				dir, ok := projectDir(env, "graph", args)
				if !ok {
					return exitUsage
				}
				g, _ := loadGraph(env, dir, &v, false)
				if g == nil {
					return exitError
				}
				var keep func(string) bool
				if len(sel.targets) > 0 {
					need, err := plan.Needed(g, sel.targets)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry graph: %v\n", err)
						return exitError
					}
					keep = func(a string) bool { return need[a] }
				}
				switch *format {
				case "dot":
					g.WriteDOT(env.stdout, keep, nil)
				case "mermaid":
					g.WriteMermaid(env.stdout, keep)
				default:
					if err := drawGraph(env, dir, g, keep, sel.selection(), dotPath, *format); err != nil {
						fmt.Fprintf(env.stderr, "foundry graph: %v\n", err)
						return exitError
					}
				}
				return exitOK
			}
		},
	})
}
