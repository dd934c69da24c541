package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

// Grants are the operator's, never the project's (spec/grants.md §1): a recipe author
// controls everything in the project directory, so no grants file is read from it unless
// the operator names it. They come from -grants FILE, else the file $FOUNDRY_GRANTS names,
// else the per-user file (userGrants: $XDG_CONFIG_HOME/foundry/grants.hcl), if it exists.

// grantsEnv names the operator's grants file when no -grants flag does.
const grantsEnv = "FOUNDRY_GRANTS"

// projectGrants is where earlier Foundry read a project's grants from: ignored now, with a
// warning that says where grants belong.
var projectGrants = filepath.Join(workspace.StateDir, "grants.hcl")

// userGrants is the per-user grants file, outside any project: foundry/grants.hcl in the
// user's configuration directory ($XDG_CONFIG_HOME, else ~/.config); "" when there is none.
func userGrants() string {
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "foundry", "grants.hcl")
}

// registerGrants adds -grants to plan, apply and mcp.
func registerGrants(fs *flag.FlagSet) *string {
	return fs.String("grants", "", "the operator's grants `FILE` (spec/grants.md): the destinations products may be delivered to, the hosts sources are fetched from and fixed-output steps reach (default $"+grantsEnv+", else $XDG_CONFIG_HOME/foundry/grants.hcl if it exists; never a file in the project unless named)")
}

// grantsFile is the grants file the operator chose (flag: -grants, "" for none) and
// whether it may be missing (only the per-user default may).
func grantsFile(flag string) (file string, optional bool) {
	switch {
	case flag != "":
		return flag, false
	case os.Getenv(grantsEnv) != "":
		return os.Getenv(grantsEnv), false
	}
	return userGrants(), true
}

// loadGrants reads the operator's grants for the project in dir: file (-grants), else the
// file $FOUNDRY_GRANTS names, else the per-user file when it exists (no grants when it does
// not). A .foundry/grants.hcl in the project is ignored with a warning, and a file the
// operator named inside the project is read with one. Diagnostics and warnings are written
// to env.stderr, prefixed by cmd; ok is false when there were errors.
func loadGrants(env *cliEnv, cmd, dir, file string) (*lang.Grants, bool) {
	file, optional := grantsFile(file)
	if file != "" && !filepath.IsAbs(file) {
		// A relative -grants or $FOUNDRY_GRANTS is the operator's, relative to where they
		// stand; a relative per-user default cannot happen.
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
	}
	inProject, _ := filepath.Abs(filepath.Join(dir, projectGrants))
	if _, err := os.Stat(inProject); err == nil && !sameFile(inProject, file) {
		fmt.Fprintf(env.stderr, "foundry %s: warning: ignoring %s: grants are the operator's and are never read from the project, which its author controls. Use -grants FILE, $%s, or %s.\n",
			cmd, inProject, grantsEnv, orNone(userGrants()))
	}
	if file == "" {
		return &lang.Grants{}, true
	}
	if within(dir, file) {
		fmt.Fprintf(env.stderr, "foundry %s: warning: the grants file %s is inside the project, which its author controls; it is read because the operator named it.\n", cmd, file)
	}
	g, files, diags := lang.LoadGrants(file, optional)
	if diags.HasErrors() {
		fmt.Fprintf(env.stderr, "foundry %s: the grants file %s:\n", cmd, file)
		writeDiagnostics(env.stderr, files, diags)
		return nil, false
	}
	return g, true
}

// within reports whether path is dir or under it, both made absolute and their links
// resolved as far as they exist.
func within(dir, path string) bool {
	d, p := resolved(dir), resolved(path)
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolved is p absolute, with the links of its longest existing prefix resolved.
func resolved(p string) string {
	p, _ = filepath.Abs(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Join(resolved(filepath.Dir(p)), filepath.Base(p))
}

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil || b == "" {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

func orNone(s string) string {
	if s == "" {
		return "a per-user grants file ($XDG_CONFIG_HOME/foundry/grants.hcl)"
	}
	return s
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
		file = orNone(userGrants())
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
