package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/registry"
)

func init() {
	register(&command{
		name:    "effects",
		summary: "List external effects (publishes, deliveries) and resolve those left unknown",
		usage:   "foundry effects [list] [-status S] [-C DIR] [-json] | resolve ID -status succeeded|failed -reason TEXT [-result REF] [-C DIR] [-json]",
		help: `
Effects shows the outbox of external effects of the project at -C (default: the current
directory): every publish of an admitted capability to its registry and every delivery of
a product to its destination, with the run that last dispatched it and how it ended.

  list (the default)   every effect, oldest first; -status keeps those with that status
                       (intended, dispatched, succeeded, failed or unknown)
  resolve ID           settle an effect whose outcome is unknown, by your decision:
                       -status and -reason are required; who decided and when are kept

An effect is unknown when the apply that dispatched it died before it recorded the outcome
(state.md section 5). Apply never performs an unknown effect blindly: it reconciles it by
itself, looking for it at its destination (a publish in the registry by digest, a delivery
by its release digest), and performs it again only when it is not there. When the
destination cannot tell (it cannot be read: a registry that does not answer), the apply
fails naming this command, and performs nothing until the destination answers or you
resolve the effect. Resolve is how you record what you found out instead:

  -status failed      it did not happen, or you do not know: the engine performs it again
                      (for a publish, the next apply that admits the capability publishes;
                      for a delivery, the next apply delivers; both are idempotent)
  -status succeeded   it happened; -result may say what it produced: for a publish the
                      reference it was published under, DESTINATION@sha256:..., which must
                      be in that registry

The decision only records what you found out: whether a capability is admitted is decided
from the registry's signed evidence, never from this row.

ID is the effect's full ID (eff-<64 hex>) or a prefix that only it has.

Examples:
  foundry effects
  foundry effects -status unknown -json
  foundry effects resolve eff-3f2a9c -status failed -reason "registry shows no such manifest"
  foundry effects resolve eff-3f2a9c -status succeeded -reason "pushed; checked with crane" \
      -result oci-layout:/srv/reg@sha256:17478b8d...

Exit codes: 0 done, 1 no such effect (or no state), the effect is not unknown, -result is
not in the registry, or the state could not be read or written, 2 usage error (unknown
action, missing -status or -reason, a -status that is not an outcome, -result with
-status failed).`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			project := fs.String("C", ".", "project `DIR`")
			status := fs.String("status", "", "list: only effects with this `STATUS`; resolve: the outcome you decided, succeeded or failed")
			reason := fs.String("reason", "", "resolve: why, what you found out (required)")
			result := fs.String("result", "", "resolve -status succeeded: what the effect produced; for a publish the `REF` it was published under, checked to be there")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "effects", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				return runAction(usage, args, "list",
					action{"list", 0, "list takes no arguments (the project is -C DIR)", func([]string) int {
						switch s := state.EffectStatus(*status); s {
						case "", state.EffectIntended, state.EffectDispatched, state.EffectSucceeded, state.EffectFailed, state.EffectUnknown:
						default:
							return usage("-status %q: want intended, dispatched, succeeded, failed or unknown", *status)
						}
						return listEffects(env, *project, state.EffectStatus(*status), *jsonOut)
					}},
					action{"resolve", 1, "resolve wants exactly one effect ID", func(args []string) int {
						s := state.EffectStatus(*status)
						if s != state.EffectSucceeded && s != state.EffectFailed {
							return usage("resolve needs -status succeeded or -status failed, got %q", *status)
						}
						if strings.TrimSpace(*reason) == "" {
							return usage("resolve needs -reason TEXT: say what you found out, for whoever reads the effect later")
						}
						if s == state.EffectFailed && *result != "" {
							return usage("-result is for -status succeeded: a failed effect produced nothing")
						}
						return resolveEffect(env, *project, args[0], s, *reason, *result, *jsonOut)
					}})
			}
		},
	})
}

// effectJSON is an effect as `foundry effects -json` prints it.
type effectJSON struct {
	ID          string              `json:"id"`
	Run         string              `json:"run"`
	Address     string              `json:"address"`
	Kind        string              `json:"kind"`
	Destination string              `json:"destination"`
	Status      state.EffectStatus  `json:"status"`
	Result      string              `json:"result"`
	Created     time.Time           `json:"created"`
	Updated     time.Time           `json:"updated"`
	Decision    *effectDecisionJSON `json:"decision,omitempty"`
}

type effectDecisionJSON struct {
	Status state.EffectStatus `json:"status"`
	By     string             `json:"by"`
	At     time.Time          `json:"at"`
	Reason string             `json:"reason"`
}

func toEffectJSON(e state.Effect) effectJSON {
	j := effectJSON{ID: e.ID, Run: e.RunID, Address: e.Address, Kind: e.Kind, Destination: e.Destination,
		Status: e.Status, Result: e.Result, Created: e.Created.UTC(), Updated: e.Updated.UTC()}
	if d := e.Decision; d != nil {
		j.Decision = &effectDecisionJSON{Status: d.Status, By: d.By, At: d.At.UTC(), Reason: d.Reason}
	}
	return j
}

// openEffects opens the project's state database if it has one (nil, true if not), and
// records as unknown the effects that a dead apply had dispatched, as that apply's recovery
// will: a publish cut short by a kill is unknown from then on, not dispatched.
func openEffects(env *cliEnv, dir string) (*state.DB, bool) {
	p := filepath.Join(dir, workspace.StateDir, "state.db")
	if !fileExists(p) {
		return nil, true
	}
	db, err := state.OpenState(p)
	if err == nil {
		_, err = db.ParkEffects(context.Background())
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		fmt.Fprintf(env.stderr, "foundry effects: %v\n", err)
		return nil, false
	}
	return db, true
}

func listEffects(env *cliEnv, dir string, status state.EffectStatus, jsonOut bool) int {
	db, ok := openEffects(env, dir)
	if !ok {
		return exitError
	}
	var effects []state.Effect
	if db != nil {
		defer db.Close()
		var err error
		if effects, err = db.Effects(context.Background(), status); err != nil {
			fmt.Fprintf(env.stderr, "foundry effects: %v\n", err)
			return exitError
		}
	}
	if jsonOut {
		out := make([]effectJSON, 0, len(effects))
		for _, e := range effects {
			out = append(out, toEffectJSON(e))
		}
		writeJSON(env.stdout, out)
		return exitOK
	}
	if len(effects) == 0 {
		what := "No effects are recorded"
		if status != "" {
			what = "No effect is " + string(status)
		}
		if db == nil {
			what += " (no project state in " + dir + ")"
		}
		fmt.Fprintln(env.stdout, what+".")
		return exitOK
	}
	unknown := 0
	for i, e := range effects {
		if i > 0 {
			fmt.Fprintln(env.stdout)
		}
		writeEffect(env.stdout, e)
		if e.Status == state.EffectUnknown {
			unknown++
		}
	}
	fmt.Fprintf(env.stdout, "\n%d effect(s)", len(effects))
	if unknown > 0 {
		fmt.Fprintf(env.stdout, ", %d unknown: resolve with 'foundry effects resolve ID -status failed|succeeded -reason TEXT'", unknown)
	}
	fmt.Fprintln(env.stdout, ".")
	return exitOK
}

func writeEffect(w io.Writer, e state.Effect) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	fmt.Fprintf(w, "%s  %s\n", e.ID, e.Status)
	fmt.Fprintf(w, "  %-12s %s of %s\n", "effect", e.Kind, e.Address)
	fmt.Fprintf(w, "  %-12s %s\n", "destination", e.Destination)
	fmt.Fprintf(w, "  %-12s %s\n", "run", e.RunID)
	if e.Result != "" {
		fmt.Fprintf(w, "  %-12s %s\n", "result", e.Result)
	}
	fmt.Fprintf(w, "  %-12s created %s, updated %s\n", "times", ts(e.Created), ts(e.Updated))
	if d := e.Decision; d != nil {
		fmt.Fprintf(w, "  %-12s %s, by %s at %s: %s\n", "decided", d.Status, d.By, ts(d.At), d.Reason)
	}
}

func resolveEffect(env *cliEnv, dir, id string, status state.EffectStatus, reason, result string, jsonOut bool) int {
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry effects: "+format+"\n", a...)
		return exitError
	}
	db, ok := openEffects(env, dir)
	if !ok {
		return exitError
	}
	if db == nil {
		return failed("no effect %s: %s has no %s/state.db (nothing has been applied here)", id, dir, workspace.StateDir)
	}
	defer db.Close()
	ctx := context.Background()
	all, err := db.Effects(ctx, "")
	if err != nil {
		return failed("%v", err)
	}
	var matches []state.Effect
	for _, e := range all {
		if e.ID == id {
			matches = []state.Effect{e}
			break
		}
		if strings.HasPrefix(e.ID, id) {
			matches = append(matches, e)
		}
	}
	switch len(matches) {
	case 0:
		return failed("no effect %s in %s (see 'foundry effects')", id, dir)
	case 1:
	default:
		return failed("%d effects start with %s; give more of the ID (see 'foundry effects')", len(matches), id)
	}
	e := matches[0]
	if e.Status != state.EffectUnknown {
		return failed("effect %s is %s, not unknown: only an effect whose outcome is unknown is resolved; nothing was changed", e.ID, e.Status)
	}
	switch {
	case result == "":
		result = "resolved " + string(status) + ": " + reason
	case e.Kind == "publish":
		if err := checkPublished(ctx, e.Destination, result); err != nil {
			return failed("%v; nothing was changed (if it was not published, resolve it -status failed and the next apply publishes it)", err)
		}
	}
	dec := state.EffectDecision{Status: status, By: operator(), At: time.Now(), Reason: reason}
	if err := db.DecideEffect(ctx, e.ID, dec, result); err != nil {
		if errors.Is(err, state.ErrNotUnknown) {
			return failed("%v (it changed meanwhile); nothing was changed", err)
		}
		return failed("%v", err)
	}
	if e, err = db.GetEffect(ctx, e.ID); err != nil {
		return failed("%v", err)
	}
	if jsonOut {
		writeJSON(env.stdout, toEffectJSON(e))
		return exitOK
	}
	fmt.Fprintf(env.stdout, "resolved %s (%s of %s to %s): %s\n", e.ID, e.Kind, e.Address, e.Destination, status)
	if status == state.EffectFailed && e.Kind == "publish" {
		fmt.Fprintf(env.stdout, "The next apply that admits %s publishes it again (publishing is idempotent).\n", e.Address)
	}
	return exitOK
}

// checkPublished makes sure ref names a manifest stored in dest, so that a succeeded publish
// does not record a reference that is not there.
func checkPublished(ctx context.Context, dest, ref string) error {
	addr, d, err := registry.SplitReference(ref)
	if err != nil {
		return fmt.Errorf("-result: %v", err)
	}
	if addr != dest || !strings.HasPrefix(d, "sha256:") {
		return fmt.Errorf("-result %s: want %s@sha256:<64 hex>, the reference in the effect's destination", ref, dest)
	}
	if p, ok := strings.CutPrefix(dest, registry.LayoutScheme); ok {
		if _, err := os.Stat(filepath.Join(p, "oci-layout")); err != nil {
			return fmt.Errorf("-result %s: %s is not an OCI layout", ref, dest)
		}
	}
	reg, err := registry.Open(dest)
	if err != nil {
		return fmt.Errorf("-result %s: %v", ref, err)
	}
	if _, _, err := reg.Manifest(ctx, digest.Digest(d)); err != nil {
		return fmt.Errorf("-result %s is not in %s: %v", ref, dest, err)
	}
	return nil
}

// operator names who resolved an effect: user@host.
func operator() string {
	name := "uid " + fmt.Sprint(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if host == "" {
		return name
	}
	return name + "@" + host
}
