package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
)

func init() {
	register(&command{
		name:    "plan",
		summary: "Show what apply would do: what runs, what is cached, what is missing and why",
		usage:   "foundry plan [options] [DIR]",
		help: `
Plan compiles the project in DIR (default: the current directory) into a content-addressed
graph and says, for every node, what apply would do with it:

  +  run       a step that will execute in a sandbox
  =  cached    a step whose exact action digest already has a result, a seed
               whose image is already built, or a source already stored
  <  fetch     a source (url, git or oci, pinned) that apply fetches, from the hosts
               the operator's network grant allows
  +  build     a seed image, package or recipe that will be assembled
  @  registry  a capability pinned to an admitted version by digest
  !  missing   cannot be produced; the reason says why
  ?  alternative  a recipe kept as a fallback for its capability
  #  needs-grant   a product whose deliver destination no grant allows, a source not
               stored whose hosts no network grant allows, or a fixed-output step that
               would run and reaches a host (network = "egress") no network grant allows:
               apply refuses it; the operator's grants file (-grants, else
               $FOUNDRY_GRANTS, else $XDG_CONFIG_HOME/foundry/grants.hcl) can allow it

Nothing is executed and nothing is written, except the plan file with -out.

Examples:
  foundry plan
  foundry plan -var greeting=hi examples/hello
  foundry plan -json > plan.json          # machine-readable, see spec/plan-json.md
  foundry plan -out hello.plan            # apply hello.plan later; it refuses if inputs changed
  foundry plan -target 'step.build["linux/arm64"]'   # that step and what it needs
  foundry plan -target module.sum -replace step.test # a module; and a step run again

Exit codes: 0 success, 1 configuration errors, 2 usage error,
3 with -detailed-exitcode when a step will run, a seed or recipe will be built or a
source fetched (0 then means nothing to do), 4 internal error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			jsonOut := fs.Bool("json", false, "print the plan as JSON (spec/plan-json.md) instead of text")
			out := fs.String("out", "", "also save the plan to `FILE` for a later 'foundry apply FILE'")
			detailed := fs.Bool("detailed-exitcode", false, "exit 3 when the plan has work to do, 0 when it has none")
			var trust stringList
			fs.Var(&trust, "trust-key", "also trust this public key `PEM` for admitted capabilities in the registry (repeatable; the project's own key is always trusted)")
			var sel selectFlags
			sel.register(fs, true)
			grantsFile := registerGrants(fs)
			return func(env *cliEnv, args []string) int {
				dir, ok := projectDir(env, "plan", args)
				if !ok {
					return exitUsage
				}
				grants, ok := loadGrants(env, "plan", dir, *grantsFile)
				if !ok {
					return exitError
				}
				g, diags := loadGraph(env, dir, &v, *jsonOut)
				if g == nil {
					if *jsonOut {
						writeJSON(env.stdout, map[string]any{"format_version": plan.FormatVersion, "valid": false, "diagnostics": toJSONDiagnostics(diags)})
					}
					return exitError
				}
				selection := sel.selection()
				selection.Grants = grants
				p, err := planWithCache(dir, g, trust, selection)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry plan: %v\n", err)
					return planError(err)
				}
				if *out != "" {
					p.Invocation = &plan.Invocation{Vars: v.vars}
					for _, f := range v.varFiles {
						abs, _ := filepath.Abs(f)
						p.Invocation.VarFiles = append(p.Invocation.VarFiles, abs)
					}
					if err := plan.Save(p, *out); err != nil {
						fmt.Fprintf(env.stderr, "foundry plan: %v\n", err)
						return exitError
					}
				}
				if *jsonOut {
					_ = p.WriteJSON(env.stdout)
				} else {
					p.WriteText(env.stdout)
					if *out != "" {
						fmt.Fprintf(env.stdout, "Saved the plan to %s; run 'foundry apply %s' to carry it out.\n", *out, *out)
					}
				}
				if *detailed && p.Summary.Run+p.Summary.Build+p.Summary.Reconstruct+p.Summary.Fetch > 0 {
					return exitDiffers
				}
				return exitOK
			}
		},
	})
}

// planWithCache plans against the project's action cache and registry when it has state; a
// project that was never applied has nothing cached, and plan must not create its state
// directory, so it plans against the registry alone (when one exists and a key is trusted).
func planWithCache(dir string, g *graph.Graph, trust []string, sel plan.Selection) (*plan.Plan, error) {
	reg, err := projectRegistry(g, false)
	if err != nil {
		return nil, err
	}
	keys, err := trustedKeys(dir, trust)
	if err != nil {
		return nil, err
	}
	if !fileExists(filepath.Join(dir, workspace.StateDir, "state.db")) {
		// Nothing applied here yet, and plan creates nothing: the registry alone (one
		// another project shares, say) can settle capabilities.
		if reg == nil || len(keys) == 0 {
			return plan.Make(g, plan.Options{Selection: sel})
		}
		return plan.ForRegistry(context.Background(), g, reg, keys, sel)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return plan.ForWorkspace(context.Background(), ws, g, reg, keys, sel)
}

// planError is the exit code of a planning error: a -target or -replace that names nothing
// is the user's (1); anything else is Foundry's (4).
func planError(err error) int {
	if plan.IsSelectionError(err) {
		return exitError
	}
	return exitInternal
}
