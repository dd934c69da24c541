package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

func init() {
	register(&command{
		name:    "logs",
		summary: "Print the captured output of a step's last execution",
		usage:   "foundry logs [options] NODE",
		help: `
Logs prints what a step wrote to stdout and stderr the last time it ran, failed or
succeeded, from the content store. NODE is an address as shown by plan and status, for
example step.words or recipe.int-sort-go.step.build. Output past the step's limits.output
was dropped and the log ends with a truncation marker.

Examples:
  foundry logs step.words
  foundry logs -stream stderr -C examples/hello step.report

Exit codes: 0 success, 1 no such node or no log, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			stream := fs.String("stream", "both", "which `STREAM`: stdout, stderr or both")
			dirFlag := fs.String("C", ".", "the project `DIR`")
			return func(env *cliEnv, args []string) int {
				if len(args) != 1 {
					fmt.Fprintln(env.stderr, "foundry logs: want exactly one NODE address, for example step.build")
					return exitUsage
				}
				if *stream != "both" && *stream != "stdout" && *stream != "stderr" {
					fmt.Fprintf(env.stderr, "foundry logs: -stream must be stdout, stderr or both\n")
					return exitUsage
				}
				ws, ok := openExistingWorkspace(env, "logs", *dirFlag)
				if !ok {
					return exitError
				}
				defer ws.Close()
				addr := args[0]
				logs, err := nodeLogs(context.Background(), ws, addr)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry logs: %v\n", err)
					return exitError
				}
				show := func(name string, d digest.Digest) {
					if d == "" {
						return
					}
					b, err := logBytes(ws, addr, name, d)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry logs: %v\n", err)
						return
					}
					if *stream == "both" {
						fmt.Fprintf(env.stdout, "==> %s <==\n", name)
					}
					env.stdout.Write(b)
					if len(b) > 0 && b[len(b)-1] != '\n' {
						fmt.Fprintln(env.stdout)
					}
				}
				if *stream != "stderr" {
					show("stdout", logs.Stdout)
				}
				if *stream != "stdout" {
					show("stderr", logs.Stderr)
				}
				return exitOK
			}
		},
	})
}

// stepLogs names the captured output of a node's last execution by content digest: at
// least one of the two is set.
type stepLogs struct {
	Node   state.Node
	Stdout digest.Digest
	Stderr digest.Digest
}

// nodeLogs finds the logs of node addr's last execution in workspace ws. Only what a node
// recorded is found: addr is looked up as a node address in the state database, never as a
// path, and the logs are named by the digests its result or last attempt recorded.
func nodeLogs(ctx context.Context, ws *workspace.Workspace, addr string) (*stepLogs, error) {
	n, found, err := ws.State.LastNodeResult(ctx, addr)
	if err != nil || !found {
		return nil, fmt.Errorf("%s has not run in this project%s", addr, errSuffix(err))
	}
	l := &stepLogs{Node: n}
	// An executed or cached node's logs are in its action cache record; a failed node's
	// are named by its last attempt.
	if rec, _, err := ws.Cache.Lookup(ctx, n.Action); err == nil && rec != nil {
		l.Stdout, l.Stderr = rec.Stdout.Digest, rec.Stderr.Digest
	}
	if l.Stdout == "" && l.Stderr == "" {
		atts, err := ws.State.Attempts(ctx, n.RunID, addr)
		if err == nil && len(atts) > 0 {
			l.Stdout, l.Stderr = parseLogDetail(atts[len(atts)-1].Detail)
		}
	}
	if l.Stdout == "" && l.Stderr == "" {
		return nil, fmt.Errorf("no log was captured for %s (its last status: %s %s)", addr, n.Status, n.Error)
	}
	return l, nil
}

// logBytes reads stream name (stdout or stderr) of node addr's log d from ws's store.
func logBytes(ws *workspace.Workspace, addr, name string, d digest.Digest) ([]byte, error) {
	b, err := ws.Store.Get(d)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %v (was it garbage-collected?)", name, addr, err)
	}
	return b, nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// parseLogDetail reads the "stdout=D stderr=D" detail apply records on attempts.
func parseLogDetail(s string) (out, errl digest.Digest) {
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		d, err := digest.Parse(v)
		if err != nil {
			continue
		}
		switch k {
		case "stdout":
			out = d
		case "stderr":
			errl = d
		}
	}
	return out, errl
}
