package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
)

func init() {
	register(&command{
		name:    "capabilities",
		summary: "List the project's capabilities and their admitted versions, with evidence status",
		usage:   "foundry capabilities [options] [DIR]",
		help: `
Capabilities lists every capability contract of the project in DIR with its contract
digest and what the project's registry holds for it: the admitted version (pinned by
digest), whether it is quarantined, and whether its evidence verifies with the trusted
keys — the verification summary, the sealed test result it relies on, and the provenance
of the build. Only a verified, unquarantined version is used by plan and apply.

Examples:
  foundry capabilities
  foundry capabilities -json -trust-key team.pub

Exit codes: 0 success, 1 configuration or registry errors, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			var trust stringList
			fs.Var(&trust, "trust-key", "also trust this public key `PEM` (repeatable; the project's own key is always trusted)")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				dir, ok := projectDir(env, "capabilities", args)
				if !ok {
					return exitUsage
				}
				g, _ := loadGraph(env, dir, &v, false)
				if g == nil {
					return exitError
				}
				rows, err := capabilityRows(context.Background(), dir, g, trust)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry capabilities: %v\n", err)
					return exitError
				}
				if *jsonOut {
					writeJSON(env.stdout, rows)
					return exitOK
				}
				for _, r := range rows {
					fmt.Fprintf(env.stdout, "%s\n  contract %s\n", r.Address, r.Contract)
					in := r.Registry
					switch {
					case in == nil || in.Manifest == "":
						fmt.Fprintln(env.stdout, "  no admitted version in the registry")
					case in.Quarantined != "":
						fmt.Fprintf(env.stdout, "  %s\n  QUARANTINED: %s\n", in.Ref, in.Quarantined)
					case in.Verified:
						fmt.Fprintf(env.stdout, "  admitted %s\n  files %s\n  evidence verified: verification summary → sealed test result → provenance\n", in.Ref, in.Tree)
					default:
						fmt.Fprintf(env.stdout, "  %s\n  NOT ADMITTED for this contract: %s\n", in.Ref, in.NotAdmitted)
					}
					if in != nil {
						for _, sk := range in.Skipped {
							fmt.Fprintf(env.stdout, "  skipped referrer %s: %s\n", sk.Digest, sk.Reason)
						}
					}
				}
				return exitOK
			}
		},
	})
}

// capabilityRow is one capability of a project as `foundry capabilities` shows it.
type capabilityRow struct {
	Address  string            `json:"address"`
	Contract string            `json:"contract_digest"`
	Registry *admit.Inspection `json:"registry,omitempty"`
}

// capabilityRows judges, for every capability contract of g in graph order, what the
// project's registry holds for it with the trusted keys (the project's own and trust).
// A project without a registry gets rows without Registry; nothing is created.
func capabilityRows(ctx context.Context, dir string, g *graph.Graph, trust []string) ([]capabilityRow, error) {
	reg, err := projectRegistry(g, false)
	if err != nil {
		return nil, err
	}
	keys, err := trustedKeys(dir, trust)
	if err != nil {
		return nil, err
	}
	var ws *workspace.Workspace
	if reg != nil {
		if ws, err = workspace.Open(dir); err != nil {
			return nil, err
		}
		defer ws.Close()
	}
	rows := []capabilityRow{}
	for _, a := range g.Order {
		n := g.Nodes[a]
		if n.Kind != graph.KindCapability {
			continue
		}
		r := capabilityRow{Address: a, Contract: string(n.Digest)}
		if reg != nil {
			in, err := admit.Inspect(ctx, reg, keys, ws.State, n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			in.Report = nil
			r.Registry = in
		}
		rows = append(rows, r)
	}
	return rows, nil
}
