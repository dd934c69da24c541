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
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				opt := quarantineOptions{Project: *project, JSON: *jsonOut}
				// parse reads the DIGEST of add and remove: malformed is a usage error.
				parse := func(args []string, then func(digest.Digest) int) int {
					d, err := digest.Parse(args[0])
					if err != nil {
						return usage("%v", err)
					}
					return then(d)
				}
				return runAction(usage, args, "",
					action{"add", 1, "add wants exactly one DIGEST", func(args []string) int {
						return parse(args, func(d digest.Digest) int {
							if strings.TrimSpace(*reason) == "" {
								return usage("add needs -reason TEXT: say why, for whoever is refused later")
							}
							return quarantineAdd(env, opt, d, *reason)
						})
					}},
					action{"list", 0, "list takes no arguments", func([]string) int {
						return quarantineList(env, opt)
					}},
					action{"remove", 1, "remove wants exactly one DIGEST", func(args []string) int {
						return parse(args, func(d digest.Digest) int { return quarantineRemove(env, opt, d) })
					}})
			}
		},
	})
}

// quarantineOptions are what `foundry quarantine` and its actions read from their flags.
type quarantineOptions struct {
	Project string // the project directory (-C)
	JSON    bool   // print JSON
}

// quarantineFailed prints a failure of `foundry quarantine` and returns its exit code.
func quarantineFailed(env *cliEnv, err error) int {
	fmt.Fprintf(env.stderr, "foundry quarantine: %v\n", err)
	return exitError
}

// openQuarantineState opens the project's state database for list and remove, which only
// read or change a state that exists: it is nil, with no error, when there is none.
func openQuarantineState(project string) (*state.DB, error) {
	p := filepath.Join(project, workspace.StateDir, "state.db")
	if !fileExists(p) {
		return nil, nil
	}
	return state.OpenState(p)
}

// quarantineAdd is `foundry quarantine add`: d is refused from now on, for reason. It
// creates the project's state when there is none.
func quarantineAdd(env *cliEnv, opt quarantineOptions, d digest.Digest, reason string) int {
	ws, err := workspace.Open(opt.Project)
	if err != nil {
		return quarantineFailed(env, err)
	}
	defer ws.Close()
	if err := ws.State.QuarantineAdd(context.Background(), d, reason); err != nil {
		return quarantineFailed(env, err)
	}
	if opt.JSON {
		writeJSON(env.stdout, map[string]any{"digest": d, "reason": reason, "quarantined": true})
	} else {
		fmt.Fprintf(env.stdout, "quarantined %s: %s\n", d, reason)
	}
	return exitOK
}

// quarantineRemove is `foundry quarantine remove`: d's quarantine is lifted; a digest that
// was not quarantined is a note, not a failure.
func quarantineRemove(env *cliEnv, opt quarantineOptions, d digest.Digest) int {
	db, err := openQuarantineState(opt.Project)
	if err != nil {
		return quarantineFailed(env, err)
	}
	if db == nil {
		fmt.Fprintf(env.stderr, "note: %s was not quarantined (no project state in %s)\n", d, opt.Project)
		return exitOK
	}
	defer db.Close()
	removed, err := db.QuarantineRemove(context.Background(), d)
	if err != nil {
		return quarantineFailed(env, err)
	}
	if opt.JSON {
		writeJSON(env.stdout, map[string]any{"digest": d, "removed": removed})
	} else if removed {
		fmt.Fprintf(env.stdout, "lifted the quarantine of %s\n", d)
	} else {
		fmt.Fprintf(env.stderr, "note: %s was not quarantined\n", d)
	}
	return exitOK
}

// quarantineList is `foundry quarantine list`: every quarantined digest, when and why.
func quarantineList(env *cliEnv, opt quarantineOptions) int {
	db, err := openQuarantineState(opt.Project)
	if err != nil {
		return quarantineFailed(env, err)
	}
	if db == nil {
		if opt.JSON {
			writeJSON(env.stdout, []any{})
		} else {
			fmt.Fprintln(env.stdout, "nothing is quarantined (no project state in "+opt.Project+")")
		}
		return exitOK
	}
	defer db.Close()
	qs, err := db.QuarantineList(context.Background())
	if err != nil {
		return quarantineFailed(env, err)
	}
	if opt.JSON {
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
	return exitOK
}
