package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

func init() {
	register(&command{
		name:    "quarantine",
		summary: "Withdraw a digest: plan, apply and pull refuse it",
		usage:   "foundry quarantine add DIGEST -reason TEXT [-C DIR] | list [-C DIR] [-json] | remove DIGEST [-C DIR]",
		help: `
Quarantine withdraws a digest in the project at -C (default: the current directory):

  add DIGEST -reason TEXT   quarantine DIGEST; the reason is required and shown wherever
                            the digest is refused (adding it again updates the reason)
  list                      show every quarantined digest, when it was added and why
  remove DIGEST             lift the quarantine

DIGEST is sha256:<64 lowercase hex>: a capability manifest, its contract, its tree of files
or one of its layers, or any input digest. A quarantined digest is refused by 'foundry
pull' (which checks the manifest, contract, tree and layer digests before fetching any
layer), and by plan and apply, including an apply of a plan saved before the quarantine;
anything built from it is reported as affected.

Examples:
  foundry quarantine add sha256:4f2a... -reason "CVE-2026-1234 in the bundled parser"
  foundry quarantine list -json
  foundry quarantine remove sha256:4f2a... -C ~/projects/scores

Exit codes: 0 done (remove of a digest that was not quarantined prints a note and is 0),
1 the state could not be read or written, 2 usage error (unknown action, malformed
digest, missing -reason).`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			reason := fs.String("reason", "", "why the digest is withdrawn (required for add)")
			project := fs.String("C", ".", "project `DIR`")
			jsonOut := fs.Bool("json", false, "print as JSON (list; add and remove print the entry)")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "quarantine", format, a...) }
				failed := func(format string, a ...any) int {
					fmt.Fprintf(env.stderr, "foundry quarantine: "+format+"\n", a...)
					return exitError
				}
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				if len(args) == 0 {
					return usage("no action: want add, list or remove")
				}
				action, rest := args[0], args[1:]
				var d digest.Digest
				switch action {
				case "add", "remove":
					if len(rest) != 1 {
						return usage("%s wants exactly one DIGEST", action)
					}
					if d, err = digest.Parse(rest[0]); err != nil {
						return usage("%v", err)
					}
					if action == "add" && strings.TrimSpace(*reason) == "" {
						return usage("add needs -reason TEXT: say why, for whoever is refused later")
					}
				case "list":
					if len(rest) != 0 {
						return usage("list takes no arguments")
					}
				default:
					return usage("unknown action %q: want add, list or remove", action)
				}
				// add creates the project's state if needed; list and remove only read or
				// change a state that exists.
				ctx := context.Background()
				var db *state.DB
				if action == "add" {
					ws, err := workspace.Open(*project)
					if err != nil {
						return failed("%v", err)
					}
					defer ws.Close()
					db = ws.State
				} else {
					p := filepath.Join(*project, workspace.StateDir, "state.db")
					if !fileExists(p) {
						if action == "list" {
							if *jsonOut {
								writeJSON(env.stdout, []any{})
							} else {
								fmt.Fprintln(env.stdout, "nothing is quarantined (no project state in "+*project+")")
							}
							return exitOK
						}
						fmt.Fprintf(env.stderr, "note: %s was not quarantined (no project state in %s)\n", d, *project)
						return exitOK
					}
					if db, err = state.OpenState(p); err != nil {
						return failed("%v", err)
					}
					defer db.Close()
				}
				switch action {
				case "add":
					if err := db.QuarantineAdd(ctx, d, *reason); err != nil {
						return failed("%v", err)
					}
					if *jsonOut {
						writeJSON(env.stdout, map[string]any{"digest": d, "reason": *reason, "quarantined": true})
					} else {
						fmt.Fprintf(env.stdout, "quarantined %s: %s\n", d, *reason)
					}
				case "remove":
					removed, err := db.QuarantineRemove(ctx, d)
					if err != nil {
						return failed("%v", err)
					}
					if *jsonOut {
						writeJSON(env.stdout, map[string]any{"digest": d, "removed": removed})
					} else if removed {
						fmt.Fprintf(env.stdout, "lifted the quarantine of %s\n", d)
					} else {
						fmt.Fprintf(env.stderr, "note: %s was not quarantined\n", d)
					}
				case "list":
					qs, err := db.QuarantineList(ctx)
					if err != nil {
						return failed("%v", err)
					}
					if *jsonOut {
						type entry struct {
							Digest digest.Digest `json:"digest"`
							Reason string        `json:"reason"`
							Added  time.Time     `json:"added"`
						}
						out := make([]entry, 0, len(qs))
						for _, q := range qs {
							out = append(out, entry{q.Digest, q.Reason, q.Added.UTC()})
						}
						writeJSON(env.stdout, out)
						return exitOK
					}
					if len(qs) == 0 {
						fmt.Fprintln(env.stdout, "nothing is quarantined")
						return exitOK
					}
					tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "DIGEST\tADDED\tREASON")
					for _, q := range qs {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", q.Digest, q.Added.UTC().Format(time.RFC3339), q.Reason)
					}
					tw.Flush()
				}
				return exitOK
			}
		},
	})
}
