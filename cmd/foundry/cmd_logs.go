package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/foundry-build/foundry/digest"
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
				ctx := context.Background()
				addr := args[0]
				n, found, err := ws.State.LastNodeResult(ctx, addr)
				if err != nil || !found {
					fmt.Fprintf(env.stderr, "foundry logs: %s has not run in this project%s\n", addr, errSuffix(err))
					return exitError
				}
				var out, errl digest.Digest
				// An executed or cached node's logs are in its action cache record; a failed
				// node's are named by its last attempt.
				if rec, _, err := ws.Cache.Lookup(ctx, n.Action); err == nil && rec != nil {
					out, errl = rec.Stdout.Digest, rec.Stderr.Digest
				}
				if out == "" && errl == "" {
					atts, err := ws.State.Attempts(ctx, n.RunID, addr)
					if err == nil && len(atts) > 0 {
						out, errl = parseLogDetail(atts[len(atts)-1].Detail)
					}
				}
				if out == "" && errl == "" {
					fmt.Fprintf(env.stderr, "foundry logs: no log was captured for %s (its last status: %s %s)\n", addr, n.Status, n.Error)
					return exitError
				}
				show := func(name string, d digest.Digest) {
					if d == "" {
						return
					}
					b, err := ws.Store.Get(d)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry logs: %s of %s: %v (was it garbage-collected?)\n", name, addr, err)
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
					show("stdout", out)
				}
				if *stream != "stdout" {
					show("stderr", errl)
				}
				return exitOK
			}
		},
	})
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
