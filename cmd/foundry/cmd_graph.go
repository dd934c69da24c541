package main

import (
	"flag"
	"fmt"

	"github.com/foundry-build/foundry/engine/plan"
)

func init() {
	register(&command{
		name:    "graph",
		summary: "Print the build graph as Graphviz DOT or Mermaid",
		usage:   "foundry graph [options] [DIR]",
		help: `
Graph prints the compiled graph of the project in DIR. Solid edges point from what a node
needs to the node; dashed "provides" edges link a capability to the recipes that can build
it (alternatives, of which one is used). The nodes of each module instance are drawn
together in a cluster labelled with its address. With -target, only the targets and what
they need are drawn.

Examples:
  foundry graph | dot -Tsvg > graph.svg
  foundry graph -format mermaid > graph.mmd
  foundry graph -target 'module.sum["linux/arm64"]'

Exit codes: 0 success, 1 configuration errors, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			format := fs.String("format", "dot", "output `FORMAT`: dot or mermaid")
			var sel selectFlags
			sel.register(fs, false)
			return func(env *cliEnv, args []string) int {
				if *format != "dot" && *format != "mermaid" {
					fmt.Fprintf(env.stderr, "foundry graph: -format must be dot or mermaid, not %q\n", *format)
					return exitUsage
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
				if *format == "dot" {
					g.WriteDOT(env.stdout, keep)
				} else {
					g.WriteMermaid(env.stdout, keep)
				}
				return exitOK
			}
		},
	})
}
