package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
)

func init() {
	register(&command{
		name:    "verdicts",
		summary: "List recorded sealed verdicts, or withdraw one",
		usage:   "foundry verdicts [list] [-C DIR] [-json] | withdraw DIGEST -reason TEXT [-C DIR] [-json]",
		help: `
Verdicts shows the sealed evaluations recorded in the project at -C (default: the current
directory): each candidate that met a capability's sealed suite, with the contract and suite
digests it was judged under, the result, and the case it disclosed as its counterexample.

  list (the default)   every verdict, newest first
  withdraw DIGEST      take a verdict out of use; -reason is required and kept

A verdict is its signed test result in .foundry/attestations; the state database only
indexes it (a row with no signed result behind it is listed as IGNORED). A candidate meets a
given sealed suite once: the next apply reuses a standing verdict instead of running the
sealed cases again. Changing, adding or removing a sealed case changes the suite digest, so
the verdicts judged under the old suite stop applying by themselves.

Withdraw a verdict that an evaluator fault decided (an infrastructure error, a flaky
sandbox): the next apply evaluates that candidate on the sealed suite afresh. The signed
evidence is kept, and a case it disclosed stays disclosed: a builder has seen it. DIGEST is
the verdict's envelope digest as listed, or a prefix that only it has.

Examples:
  foundry verdicts
  foundry verdicts -json -C examples/int-sort
  foundry verdicts withdraw sha256:63d94390 -reason "the sandbox ran out of disk"

Exit codes: 0 done, 1 no state, no such verdict, already withdrawn, 2 usage error (unknown
action, withdraw without DIGEST or -reason).`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			project := fs.String("C", ".", "project `DIR`")
			reason := fs.String("reason", "", "withdraw: why the verdict is withdrawn (required)")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "verdicts", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				opt := verdictsOptions{Project: *project, JSON: *jsonOut}
				return runAction(usage, args, "list",
					action{"list", 0, "list takes no arguments and no -reason", func([]string) int {
						if *reason != "" {
							return usage("list takes no arguments and no -reason")
						}
						return listVerdicts(env, opt)
					}},
					action{"withdraw", 1, "withdraw takes one DIGEST and a -reason", func(args []string) int {
						if *reason == "" {
							return usage("withdraw takes one DIGEST and a -reason")
						}
						return withdrawVerdict(env, opt, args[0], *reason)
					}})
			}
		},
	})
}

// verdictsOptions are what `foundry verdicts` and its actions read from their flags.
type verdictsOptions struct {
	Project string // the project directory (-C)
	JSON    bool   // print JSON
}

// openVerdicts opens the project's workspace, which must exist, and its trusted keys.
func openVerdicts(env *cliEnv, project string) (*workspace.Workspace, []*provenance.Verifier, bool) {
	ws, ok := openExistingWorkspace(env, "verdicts", project)
	if !ok {
		return nil, nil, false
	}
	keys, err := trustedKeys(project, nil)
	if err != nil {
		ws.Close()
		fmt.Fprintf(env.stderr, "foundry verdicts: %v\n", err)
		return nil, nil, false
	}
	return ws, keys, true
}

// withdrawVerdict is `foundry verdicts withdraw DIGEST -reason REASON`: the verdict whose
// envelope digest is (or starts with) envelope is taken out of use.
func withdrawVerdict(env *cliEnv, opt verdictsOptions, envelope, reason string) int {
	ws, keys, ok := openVerdicts(env, opt.Project)
	if !ok {
		return exitError
	}
	defer ws.Close()
	v, err := evaluate.WithdrawVerdict(context.Background(), ws, keys, envelope, reason)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry verdicts: %v\n", err)
		return exitError
	}
	if opt.JSON {
		writeJSON(env.stdout, v)
		return exitOK
	}
	fmt.Fprintf(env.stdout, "Withdrew verdict %s (%s on %s): %s\nThe next apply evaluates that candidate on the sealed suite again.\n",
		v.Envelope, v.Capability, v.Candidate, v.WithdrawnReason)
	return exitOK
}

// listVerdicts is `foundry verdicts [list]`: every recorded sealed verdict, newest first.
func listVerdicts(env *cliEnv, opt verdictsOptions) int {
	ws, keys, ok := openVerdicts(env, opt.Project)
	if !ok {
		return exitError
	}
	defer ws.Close()
	vs, err := evaluate.Verdicts(context.Background(), ws, keys)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry verdicts: %v\n", err)
		return exitError
	}
	if opt.JSON {
		if vs == nil {
			vs = []evaluate.VerdictView{}
		}
		writeJSON(env.stdout, vs)
		return exitOK
	}
	if len(vs) == 0 {
		fmt.Fprintln(env.stdout, "No sealed verdicts yet.")
		return exitOK
	}
	for _, v := range vs {
		result := "PASSED"
		if !v.Passed {
			result = fmt.Sprintf("FAILED %d of %d", v.Failed, v.Cases)
		}
		fmt.Fprintf(env.stdout, "%s  %s  %s\n", v.Envelope, v.Capability, result)
		fmt.Fprintf(env.stdout, "  candidate %s  contract %s  suite %s\n", v.Candidate, shortDigest(string(v.Contract)), shortDigest(string(v.SuiteDigest)))
		if !v.Evaluated.IsZero() {
			fmt.Fprintf(env.stdout, "  evaluated %s\n", v.Evaluated.Local().Format(time.DateTime))
		}
		if v.Disclosed != "" {
			fmt.Fprintf(env.stdout, "  disclosed %s (it serves for repair since)\n", v.Disclosed)
		}
		switch {
		case v.Evidence == "":
			fmt.Fprintln(env.stdout, "  IGNORED: a state row with no signed test result behind it")
		case !v.Withdrawn.IsZero():
			fmt.Fprintf(env.stdout, "  WITHDRAWN %s: %s\n", v.Withdrawn.Local().Format(time.DateTime), v.WithdrawnReason)
		}
	}
	return exitOK
}

// shortDigest abbreviates sha256:<hex> to its first 12 hex digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
