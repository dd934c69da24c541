package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// defaultRegistry is where a project without a registry attribute keeps admitted capabilities.
const defaultRegistry = "oci-layout:" + workspace.StateDir + "/registry"

// projectRegistry opens the project's registry. A relative OCI layout path is relative to
// the project directory. With create false, a layout that does not exist yet is not made
// (plan writes nothing) and nil is returned.
func projectRegistry(g *graph.Graph, create bool) (registry.Store, error) {
	addr := g.Config.Project.Registry
	if addr == "" {
		addr = defaultRegistry
	}
	if p, ok := strings.CutPrefix(addr, registry.LayoutScheme); ok {
		if !filepath.IsAbs(p) {
			p = filepath.Join(g.Config.Dir, p)
		}
		if !create {
			if _, err := os.Stat(p); err != nil {
				return nil, nil
			}
		}
		addr = registry.LayoutScheme + p
	}
	return registry.Open(addr)
}

// projectKey is the public half of the signing key of the project in dir
// (.foundry/keys/signing.pub), when it has one: the key pull and verify trust by default
// inside a project, as the MCP verify tool does. It says so on stderr (cmd names the
// command), so that the trust is never silent.
func projectKey(env *cliEnv, cmd, dir string) (string, bool) {
	own := filepath.Join(dir, workspace.StateDir, "keys", "signing.pub")
	if !fileExists(own) {
		return "", false
	}
	if abs, err := filepath.Abs(own); err == nil {
		own = abs
	}
	fmt.Fprintf(env.stderr, "foundry %s: no -key: trusting the project's own key %s\n", cmd, own)
	return own, true
}

// trustedKeys are the public keys whose signatures Foundry accepts on what it pulls: the
// project's own signing key, and any -trust-key given.
func trustedKeys(dir string, extra []string) ([]*provenance.Verifier, error) {
	paths := append([]string{}, extra...)
	own := filepath.Join(dir, workspace.StateDir, "keys", "signing.pub")
	if fileExists(own) {
		paths = append(paths, own)
	}
	if len(paths) == 0 {
		return nil, nil
	}
	return provenance.LoadVerifiers(paths...)
}
