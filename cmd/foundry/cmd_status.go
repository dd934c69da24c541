package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

// openExistingWorkspace opens the workspace of the project in dir, failing clearly when the
// project has never been applied.
func openExistingWorkspace(env *cliEnv, cmd, dir string) (*workspace.Workspace, bool) {
	if !fileExists(filepath.Join(dir, workspace.StateDir, "state.db")) {
		fmt.Fprintf(env.stderr, "foundry %s: %s has no %s/state.db: nothing has been applied here yet (run 'foundry apply').\n", cmd, dir, workspace.StateDir)
		return nil, false
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry %s: %v\n", cmd, err)
		return nil, false
	}
	return ws, true
}

func init() {
	register(&command{
		name:    "status",
		summary: "Show recent runs and the nodes of one run",
		usage:   "foundry status [options] [DIR]",
		help: `
Status lists the most recent applies of the project in DIR and, for the latest one (or
-run ID), every step with how it ended: done (executed), cached, failed or skipped.
A run whose process died shows as interrupted; the next apply resumes it.

When the run settled capabilities, status then lists, per capability and in order, what
happened to it: each suite evaluated on a candidate recipe (passed or failed, cases
passed), each candidate rejected and why, the recipe admitted and the reference it was
published as, or the admitted version it was pinned to.

Examples:
  foundry status
  foundry status -run 20261129T182501-3f2a -json

Exit codes: 0 success, 1 no state or unknown run, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			runID := fs.String("run", "", "show the nodes of run `ID` instead of the latest")
			limit := fs.Int("n", 10, "how many recent runs to list")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				dir, ok := projectDir(env, "status", args)
				if !ok {
					return exitUsage
				}
				ws, ok := openExistingWorkspace(env, "status", dir)
				if !ok {
					return exitError
				}
				defer ws.Close()
				rep, err := statusOf(context.Background(), ws, *runID, *limit)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry status: %v\n", err)
					return exitError
				}
				runs, id, nodes, events := rep.Runs, rep.Run, rep.Nodes, rep.CapabilityEvents
				if *jsonOut {
					writeJSON(env.stdout, rep)
					return exitOK
				}
				if len(runs) == 0 {
					fmt.Fprintln(env.stdout, "No runs yet.")
					return exitOK
				}
				fmt.Fprintln(env.stdout, "Runs (newest first):")
				for _, r := range runs {
					dur := "running"
					if !r.Finished.IsZero() {
						dur = r.Finished.Sub(r.Started).Round(time.Millisecond).String()
					}
					fmt.Fprintf(env.stdout, "  %-28s %-12s %s  %-10s plan %.19s\n", r.ID, r.Status, r.Started.Local().Format("2006-01-02 15:04:05"), dur, r.Plan)
				}
				fmt.Fprintf(env.stdout, "\nNodes of run %s:\n", id)
				counts := state.CountNodes(nodes)
				for _, n := range nodes {
					line := fmt.Sprintf("  %-8s %-44s", n.Status, n.Address)
					if !n.Finished.IsZero() && !n.Started.IsZero() {
						line += " " + n.Finished.Sub(n.Started).Round(time.Millisecond).String()
					}
					if n.Error != "" {
						line += "  " + n.Error
					}
					fmt.Fprintln(env.stdout, line)
				}
				fmt.Fprintf(env.stdout, "\n%d done, %d cached, %d failed, %d skipped, %d pending or running.\n",
					counts[state.NodeDone], counts[state.NodeCached], counts[state.NodeFailed], counts[state.NodeSkipped], counts[state.NodePending]+counts[state.NodeRunning])
				if len(events) > 0 {
					fmt.Fprintf(env.stdout, "\nCapabilities of run %s:\n", id)
					writeCapabilityEvents(env.stdout, events)
				}
				return exitOK
			}
		},
	})
}

// statusReport is what `foundry status -json` prints: the recent runs, newest first, and
// the nodes and capability events of one of them.
type statusReport struct {
	Runs             []state.Run             `json:"runs"`
	Run              string                  `json:"run"` // "" when there are no runs
	Nodes            []state.Node            `json:"nodes"`
	CapabilityEvents []state.CapabilityEvent `json:"capability_events"`
}

// statusOf reads the limit most recent runs of workspace ws and the nodes and capability
// events of run runID, or of the latest run when runID is "". An unknown runID is an error
// that says where to find the known ones.
func statusOf(ctx context.Context, ws *workspace.Workspace, runID string, limit int) (*statusReport, error) {
	runs, err := ws.State.Runs(ctx, limit)
	if err != nil {
		return nil, err
	}
	id := runID
	if id == "" && len(runs) > 0 {
		id = runs[0].ID
	} else if id != "" {
		if _, err := ws.State.GetRun(ctx, id); err != nil {
			if errors.Is(err, state.ErrNotFound) {
				err = fmt.Errorf("no run %s in this project (see 'foundry status' for the recent ones)", id)
			}
			return nil, err
		}
	}
	rep := &statusReport{Runs: runs, Run: id, CapabilityEvents: []state.CapabilityEvent{}}
	if id != "" {
		if rep.Nodes, err = ws.State.Nodes(ctx, id); err != nil {
			return nil, err
		}
		events, err := ws.State.CapabilityEvents(ctx, id)
		if err != nil {
			return nil, err
		}
		if events != nil {
			rep.CapabilityEvents = events
		}
	}
	return rep, nil
}

// writeCapabilityEvents prints a run's capability events grouped by capability, in the order
// the capabilities first appear, each group in the order of its events.
func writeCapabilityEvents(w io.Writer, events []state.CapabilityEvent) {
	var order []string
	byCap := map[string][]state.CapabilityEvent{}
	for _, e := range events {
		if _, seen := byCap[e.Capability]; !seen {
			order = append(order, e.Capability)
		}
		byCap[e.Capability] = append(byCap[e.Capability], e)
	}
	for _, c := range order {
		fmt.Fprintf(w, "  %s\n", c)
		for _, e := range byCap[c] {
			var what, detail string
			switch e.Type {
			case "suite_evaluated":
				what, detail = "eval", e.Message
				switch _, why, reused := strings.Cut(strings.TrimSuffix(e.Message, ")"), "("); {
				case e.Passed != nil && e.Cases != nil && e.CasesPassed != nil:
					detail = fmt.Sprintf("%s suite %s: %d of %d cases", e.Suite, map[bool]string{true: "passed", false: "failed"}[*e.Passed], *e.CasesPassed, *e.Cases)
				case e.Passed != nil && *e.Passed && reused:
					detail = fmt.Sprintf("%s suite passed: %s", e.Suite, why) // "recorded evaluation sha256:…"
				}
			case "candidate_rejected":
				what = "rejected"
				// The message is the rejection as apply printed it: "  RECIPE: why", then
				// the counterexample on indented lines.
				first, rest, _ := strings.Cut(strings.TrimSpace(e.Message), "\n")
				detail = strings.TrimPrefix(first, e.Recipe+": ")
				if rest != "" {
					detail += "\n" + indentLines(rest, "      ")
				}
			case "capability_admitted":
				what, detail = "admitted", "as "+e.Ref
			case "capability_pinned":
				what, detail = "pinned", "to "+e.Ref
			case "pin_refused":
				what, detail = "unpinned", e.Message
			case "effect_reconciled":
				what, detail = "reconciled", e.Message
			case "capability_failed":
				what, detail = "failed", e.Message
			default:
				what, detail = e.Type, e.Message
			}
			recipe := e.Recipe
			if recipe == "" {
				recipe = "-"
			}
			fmt.Fprintf(w, "    %-10s %-32s %s\n", what, recipe, detail)
		}
	}
}

func indentLines(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = prefix + strings.TrimPrefix(l, "    ")
	}
	return strings.Join(lines, "\n")
}
