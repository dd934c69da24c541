package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

// defaultGrants is the grants file of a project when no -grants flag names one.
var defaultGrants = filepath.Join(workspace.StateDir, "grants.hcl")

// registerGrants adds -grants to plan and apply.
func registerGrants(fs *flag.FlagSet) *string {
	return fs.String("grants", "", "the operator's grants `FILE` (spec/grants.md): the destinations products may be delivered to, the hosts sources are fetched from and fixed-output steps reach (default DIR/"+defaultGrants+", if it exists)")
}

// loadGrants reads the operator's grants for the project in dir: file, or the project's
// default grants file when file is "" (no grants when it does not exist). Diagnostics are
// written to env.stderr, prefixed by cmd; ok is false when there were errors.
func loadGrants(env *cliEnv, cmd, dir, file string) (*lang.Grants, bool) {
	optional := file == ""
	if optional {
		file = filepath.Join(dir, defaultGrants)
	}
	g, files, diags := lang.LoadGrants(file, optional)
	if diags.HasErrors() {
		fmt.Fprintf(env.stderr, "foundry %s: the grants file %s:\n", cmd, file)
		writeDiagnostics(env.stderr, files, diags)
		return nil, false
	}
	return g, true
}

// refuseUngranted says which products' destinations, which sources' hosts and which steps'
// endpoints no grant allows, and the grants that would: it returns false when there are some.
func refuseUngranted(env *cliEnv, cmd string, p *plan.Plan, grants *lang.Grants, dir string) bool {
	ng := p.NeedsGrant()
	if len(ng) == 0 {
		return true
	}
	file := grants.File
	if file == "" {
		file = filepath.Join(dir, defaultGrants)
	}
	var to, hosts []string
	for _, n := range ng {
		switch {
		case n.Deliver != nil && n.Deliver.Refused != "":
			fmt.Fprintf(env.stderr, "foundry %s: %s delivers to %s, which no grant can allow: %s.\n", cmd, n.Address, n.Deliver.To, n.Deliver.Refused)
		case n.Deliver != nil:
			fmt.Fprintf(env.stderr, "foundry %s: %s delivers to %s, which no grant allows.\n", cmd, n.Address, n.Deliver.To)
			to = append(to, strconv.Quote(n.Deliver.To))
		case n.Fetch != nil:
			fmt.Fprintf(env.stderr, "foundry %s: %s is fetched from %s, which no grant allows.\n", cmd, n.Address, strings.Join(n.Fetch.Hosts, " or "))
			if len(n.Fetch.Hosts) > 0 && !slices.Contains(hosts, strconv.Quote(n.Fetch.Hosts[0])) {
				hosts = append(hosts, strconv.Quote(n.Fetch.Hosts[0]))
			}
		case n.Egress != nil:
			for _, h := range n.Egress.Ungranted() {
				fmt.Fprintf(env.stderr, "foundry %s: %s reaches %s, which no grant allows.\n", cmd, n.Address, h)
				if !slices.Contains(hosts, strconv.Quote(h)) {
					hosts = append(hosts, strconv.Quote(h))
				}
			}
		}
	}
	if len(to) == 0 && len(hosts) == 0 {
		fmt.Fprintln(env.stderr, "Nothing was run, fetched or written. Deliver it elsewhere: a destination is reached from its grant following no symbolic link, and never inside a release.")
		return false
	}
	fmt.Fprintf(env.stderr, "Nothing was run, fetched or written. To allow it, the operator adds to the grants file %s (or the file -grants names):\n", file)
	if len(to) > 0 {
		fmt.Fprintf(env.stderr, "\n  grant %q {\n    to = [%s]\n  }\n", lang.DeliverGrantKind, strings.Join(to, ", "))
	}
	if len(hosts) > 0 {
		fmt.Fprintf(env.stderr, "\n  grant %q {\n    hosts = [%s]\n  }\n", lang.NetworkGrantKind, strings.Join(hosts, ", "))
	}
	return false
}
