package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/agext/levenshtein"
	"strings"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

func init() {
	register(&command{
		name:    "explain",
		summary: "Say why a step will run or is cached: what changed since its last result",
		usage:   "foundry explain [options] NODE",
		help: `
Explain compares a node's action definition now with the one it last completed with, and
lists every field that changed — an input's digest, an argument, an environment variable,
a limit — with the old and new values. A changed input that another node produces names
that node, so you can follow a change up the graph to its cause.

Examples:
  foundry explain step.report
  foundry explain -C examples/hello -var top=5 step.top
  foundry explain -json step.top

Exit codes: 0 success, 1 configuration errors or unknown node, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			dirFlag := fs.String("C", ".", "the project `DIR`")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				if len(args) != 1 {
					fmt.Fprintln(env.stderr, "foundry explain: want exactly one NODE address, for example step.build")
					return exitUsage
				}
				addr := args[0]
				g, _ := loadGraph(env, *dirFlag, &v, false)
				if g == nil {
					return exitError
				}
				n, ok := g.Nodes[addr]
				if !ok {
					var names []string
					for a := range g.Nodes {
						names = append(names, a)
					}
					fmt.Fprintf(env.stderr, "foundry explain: no node %s in this project%s\n", addr, suggestFrom(addr, names))
					return exitError
				}
				ws, err := workspace.Open(*dirFlag)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry explain: %v\n", err)
					return exitError
				}
				defer ws.Close()
				ctx := context.Background()
				_, hit, err := ws.Cache.Lookup(ctx, n.Digest)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry explain: %v\n", err)
					return exitError
				}
				prev, found, err := ws.State.LastDefinition(ctx, addr)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry explain: %v\n", err)
					return exitError
				}
				var changes []state.Change
				if found && prev.Action != n.Digest {
					changes, err = state.DiffJSON(prev.JSON, n.Definition)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry explain: %v\n", err)
						return exitError
					}
				}
				byDigest := map[string]string{}
				for a, m := range g.Nodes {
					byDigest[`"`+string(m.Digest)+`"`] = a
				}
				if changes == nil {
					changes = []state.Change{}
				}
				if *jsonOut {
					writeJSON(env.stdout, map[string]any{"node": addr, "action": n.Digest, "cached": hit,
						"previous_action": prev.Action, "has_previous": found, "changes": changes})
					return exitOK
				}
				fmt.Fprintf(env.stdout, "%s\n  action %s\n", addr, n.Digest)
				switch {
				case hit:
					fmt.Fprintln(env.stdout, "  cached: this exact action has a successful result; apply will not run it.")
				case !found:
					fmt.Fprintln(env.stdout, "  will run: it has never completed in this project.")
				case prev.Action == n.Digest:
					fmt.Fprintln(env.stdout, "  will run: its definition is unchanged, but its cached result is gone or incomplete (garbage-collected, or the last run failed).")
				default:
					fmt.Fprintf(env.stdout, "  will run: it last completed as %.19s; since then %d field(s) changed:\n", prev.Action, len(changes))
					for _, c := range changes {
						line := fmt.Sprintf("    %-8s %s", c.Kind, c.Path)
						if c.Old != nil {
							line += "  " + abbreviate(string(c.Old))
						}
						if c.New != nil {
							line += "  →  " + abbreviate(string(c.New))
						}
						if a := byDigest[string(c.New)]; a != "" {
							line += fmt.Sprintf("   (the new digest of %s)", a)
						}
						fmt.Fprintln(env.stdout, line)
					}
				}
				return exitOK
			}
		},
	})
}

func abbreviate(s string) string {
	if len(s) > 72 {
		return s[:69] + "..."
	}
	return s
}

func suggestFrom(name string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := levenshtein.Distance(name, n, nil); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

var _ = strings.TrimSpace
