package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/foundry-build/foundry/engine"
	"github.com/foundry-build/foundry/engine/state"
)

// openExistingWorkspace opens the workspace of the project in dir, failing clearly when the
// project has never been applied.
func openExistingWorkspace(env *cliEnv, cmd, dir string) (*engine.Workspace, bool) {
	if !fileExists(filepath.Join(dir, engine.StateDir, "state.db")) {
		fmt.Fprintf(env.stderr, "foundry %s: %s has no %s/state.db: nothing has been applied here yet (run 'foundry apply').\n", cmd, dir, engine.StateDir)
		return nil, false
	}
	ws, err := engine.OpenWorkspace(dir)
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
				ctx := context.Background()
				runs, err := ws.State.Runs(ctx, *limit)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry status: %v\n", err)
					return exitError
				}
				id := *runID
				if id == "" && len(runs) > 0 {
					id = runs[0].ID
				}
				var nodes []state.Node
				if id != "" {
					if nodes, err = ws.State.Nodes(ctx, id); err != nil {
						fmt.Fprintf(env.stderr, "foundry status: %v\n", err)
						return exitError
					}
				}
				if *jsonOut {
					writeJSON(env.stdout, map[string]any{"runs": runs, "run": id, "nodes": nodes})
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
				counts := map[state.NodeStatus]int{}
				for _, n := range nodes {
					counts[n.Status]++
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
				return exitOK
			}
		},
	})
}
