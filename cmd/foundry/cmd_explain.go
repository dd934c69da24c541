package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/internal/suggest"
)

func init() {
	register(&command{
		name:    "explain",
		summary: "Say why a step will run or is cached: what changed since its last result",
		usage:   "foundry explain [options] NODE",
		help: `
Explain says whether a step is cached, will run, or runs unless its inputs come out
unchanged, and why. A step's result is cached under its cache key: its definition with
every step output and capability it mounts named by the content mounted. So a step whose
producer ran again but made the same bytes stays cached, and explain names that input.

Explain compares the step's definition now with the one it last completed with, and lists
every field that changed — an input, an argument, an environment variable, a limit — with
the old and new values. A changed input that another node produces names that node, so
you can follow a change up the graph to its cause.

Examples:
  foundry explain step.report
  foundry explain -C examples/hello -var top=5 step.top
  foundry explain -json step.top

Exit codes: 0 success, 1 configuration errors, unknown node or not a step, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			dirFlag := fs.String("C", ".", "the project `DIR`")
			jsonOut := fs.Bool("json", false, "print JSON")
			var sel selectFlags
			sel.register(fs, false)
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
				e, err := explainNode(context.Background(), *dirFlag, g, addr, nil, sel.selection())
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry explain: %v\n", err)
					return exitError
				}
				if *jsonOut {
					writeJSON(env.stdout, e)
					return exitOK
				}
				writeExplanation(env.stdout, g, e)
				return exitOK
			}
		},
	})
}

// explainNode explains step or check addr of g, planned in dir with the trusted keys (the
// project's own and trust) and the selection: an address that names no node, or a node
// that is not a step or check, is an error that says so. It opens the project's workspace
// (creating its state directory if it has none, as plan.Explain reads what it recorded).
func explainNode(ctx context.Context, dir string, g *graph.Graph, addr string, trust []string, sel plan.Selection) (*plan.Explanation, error) {
	n, ok := g.Nodes[addr]
	if !ok {
		var names []string
		for a := range g.Nodes {
			names = append(names, a)
		}
		return nil, fmt.Errorf("no node %s in this project%s", addr, suggestFrom(addr, names))
	}
	if n.Kind != graph.KindStep && n.Kind != graph.KindCheck {
		return nil, fmt.Errorf("%s is a %s; explain says why a step or check runs or is cached", addr, n.Kind)
	}
	p, err := planWithCache(dir, g, trust, sel)
	if err != nil {
		return nil, err
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return plan.Explain(ctx, ws, g, p, addr)
}

// writeExplanation writes e for people.
func writeExplanation(w io.Writer, g *graph.Graph, e *plan.Explanation) {
	fmt.Fprintf(w, "%s\n  action    %s\n", e.Node, e.Action)
	if e.CacheKey != "" {
		fmt.Fprintf(w, "  cache key %s\n", e.CacheKey)
	}
	switch {
	case e.Cached:
		fmt.Fprintln(w, "  cached: a successful result has this cache key (its definition, with what it mounts named by content); apply will not run it.")
	case e.Status != plan.StatusRun:
		fmt.Fprintf(w, "  %s: %s\n", e.Status, e.Reason)
	case e.CacheKey == "" && e.Reason != "":
		fmt.Fprintf(w, "  %s.\n", e.Reason)
	case !e.HasPrevious:
		fmt.Fprintln(w, "  will run: it has never completed in this project.")
	case e.PreviousAction == e.Action:
		fmt.Fprintln(w, "  will run: its definition is unchanged, but what it mounts changed, or its cached result is gone (garbage-collected, or the last run failed).")
	default:
		fmt.Fprintf(w, "  will run: it last completed as %.19s\n", e.PreviousAction)
	}
	if len(e.Changes) > 0 {
		fmt.Fprintf(w, "  since it last completed, %d field(s) of its definition changed:\n", len(e.Changes))
		byDigest := map[string]string{}
		for a, m := range g.Nodes {
			byDigest[`"`+string(m.Digest)+`"`] = a
		}
		for _, c := range e.Changes {
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
			fmt.Fprintln(w, line)
		}
	}
	for _, u := range e.Unchanged {
		fmt.Fprintf(w, "  %s: %s ran again in run %s, and its output %s came out unchanged (%.19s): this step stayed cached\n",
			u.Path, u.Producer, u.Run, u.Output, u.Digest)
	}
	for _, wt := range e.Waits {
		job := "a job apply opens"
		if j := wt.Job; j != nil {
			switch j.Status {
			case "new":
				job = fmt.Sprintf("job %s, which apply opens", j.ID)
			default:
				job = fmt.Sprintf("job %s (%s: %d of %d candidates, %d of %d probes spent; foundry jobs show %s)", j.ID, j.Status, j.Rounds, wt.Budget.Candidates, j.Probes, wt.Budget.Probes, j.ID)
			}
		}
		if j := wt.Job; j != nil && j.Next != "" {
			fmt.Fprintf(w, "  waits for %s, which no admitted version or recipe provides; its job %s is %s: this step cannot run until then\n", wt.Capability, j.ID, j.Next)
			continue
		}
		fmt.Fprintf(w, "  waits for %s, which no admitted version or recipe provides: it is reconstructed by %s, and this step runs once it is admitted\n", wt.Capability, job)
	}
}

func abbreviate(s string) string {
	if len(s) > 72 {
		return s[:69] + "..."
	}
	return s
}

// suggestFrom is " (did you mean NAME?)" for the one of names closest to name, or "".
func suggestFrom(name string, names []string) string {
	if best := suggest.Closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}
