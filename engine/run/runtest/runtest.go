// Package runtest applies projects in the tests of the engine's packages (engine/run,
// engine/reconstruct, engine/evaluate, engine/admit, engine/deliver) as `foundry apply`
// does, with the local executor: no root, no runtime, a real workspace, state database,
// signing key and OCI-layout registry. The local executor runs argv on the host and refuses
// an action with mounts, so the projects these tests apply run their steps and candidates
// as host programs (/bin/sh), and tell candidates apart by their base seed's env. It is
// imported by tests only.
package runtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors/local"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Project is a project directory the tests apply again and again, with the one signing
// key and registry its applies share.
type Project struct {
	Dir      string
	Signer   *provenance.Signer
	Keys     []*provenance.Verifier // the signer's, trusted
	Registry registry.Store
}

// Write lays files (path → content) out in a new project directory; "main.hcl" is the
// configuration.
func Write(t *testing.T, files map[string]string) *Project {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		must(t, os.WriteFile(dst, []byte(content), 0o644))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	signer, err := provenance.NewSigner(key)
	must(t, err)
	own, err := signer.Verifier("test key")
	must(t, err)
	reg, err := registry.Open(registry.LayoutScheme + filepath.Join(dir, ".foundry", "registry"))
	must(t, err)
	return &Project{Dir: dir, Signer: signer, Keys: []*provenance.Verifier{own}, Registry: reg}
}

// Applied is what one apply did.
type Applied struct {
	Graph  *graph.Graph
	Plan   *plan.Plan
	Result *run.Result
	Err    error
	Events []event.Event
}

// Of returns the events of type typ about node (any node when "").
func (a *Applied) Of(typ, node string) []event.Event {
	var out []event.Event
	for _, e := range a.Events {
		if e.Type == typ && (node == "" || e.Node == node) {
			out = append(out, e)
		}
	}
	return out
}

// Apply loads, plans and applies the project with the local executor, as `foundry apply
// -executor local -unsandboxed` does; opt's Executor, Signer, Registry, TrustedKeys and
// Events are set here (Events also records every event in Applied.Events, then calls
// opt.Events if set). It fails the test if the project does not load or plan.
func (p *Project) Apply(t *testing.T, ctx context.Context, opt run.Options) *Applied {
	t.Helper()
	cfg, diags := lang.Load(p.Dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	g, diags := graph.Compile(cfg)
	if diags.HasErrors() {
		t.Fatalf("compile: %s", diags.Error())
	}
	ws, err := p.Workspace()
	must(t, err)
	defer ws.Close()
	pl, err := plan.ForWorkspace(ctx, ws, g, p.Registry, p.Keys, plan.Selection{})
	must(t, err)
	out := &Applied{Graph: g, Plan: pl}
	var mu sync.Mutex
	also := opt.Events
	opt.Executor, opt.Signer, opt.Registry, opt.TrustedKeys = local.New(), p.Signer, p.Registry, p.Keys
	opt.Events = func(e event.Event) {
		mu.Lock()
		out.Events = append(out.Events, e)
		mu.Unlock()
		if also != nil {
			also(e)
		}
	}
	out.Result, out.Err = run.Apply(ctx, ws, g, pl, opt)
	return out
}

// Workspace opens the project's workspace (.foundry); the caller closes it.
func (p *Project) Workspace() (*workspace.Workspace, error) { return workspace.Open(p.Dir) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
