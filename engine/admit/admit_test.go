package admit_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/local"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// A candidate whose evaluation the local executor observed passed its suites, and its
// signed results say so; admission refuses it all the same (invariant 1: only a sandboxed
// evaluator's results are evidence), through the outbox: the publish is recorded as
// failed with why, the registry's contract tag is never moved, so a lookup finds nothing
// admitted, and a second attempt is refused the same way, never taken from the row.
func TestUnsandboxedEvaluationIsNotAdmitted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for p, content := range map[string]string{
		"schemas/ints.json": `{"type":"array","items":{"type":"integer"}}`,
		"dev/a.json":        `{"input":[1,2],"output":[1,2]}`,
		"sealed/s.json":     `{"input":[5],"output":[5]}`,
		"main.hcl": `
capability "sort" {
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sh", "-c", "cat"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "dev/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
}
`} {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g, diags := graph.Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := g.Nodes["capability.sort"]
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := provenance.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	own, err := signer.Verifier("test key")
	if err != nil {
		t.Fatal(err)
	}
	keys := []*provenance.Verifier{own}
	reg, err := registry.Open(registry.LayoutScheme + filepath.Join(dir, ".foundry", "registry"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := ws.State.BeginRun(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	noEvents := func(event.Event) {}
	ev := &evaluate.Evaluator{Workspace: ws, Attester: ws.Attester(signer), TrustedKeys: keys, Config: cfg, Scratch: t.TempDir(),
		ContainerPrefix: "foundry-test-", Emit: noEvents,
		Executor: func(context.Context, string) (executors.Executor, error) { return local.New(), nil }}
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "sort"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree, _, err := ws.Store.PutDir(files)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ev.Evaluate(ctx, n, "recipe.r", tree, executors.Image{})
	if err != nil || res.Rejection != nil || len(res.Tests) != 2 {
		t.Fatalf("evaluation: %+v, %v; want it passed with two signed results", res, err)
	}

	ad := &admit.Admitter{Workspace: ws, Attester: ws.Attester(signer), Graph: g, Registry: reg, TrustedKeys: keys,
		Version: "test", RunID: run.ID, Scratch: t.TempDir(), Emit: noEvents}
	const refused = `evaluator "https://foundry.dev/evaluator/local@v1?isolation=none" is not allowed`
	for i := range 2 {
		c := &admit.Candidate{Recipe: "recipe.r", Tree: tree, Tests: res.Tests}
		if ref, _, err := ad.Admit(ctx, n, c); err == nil || !strings.Contains(err.Error(), refused) {
			t.Fatalf("admission %d: %q, %v; want it refused", i+1, ref, err)
		}
		failed, err := ws.State.Effects(ctx, state.EffectFailed)
		if err != nil || len(failed) != 1 || failed[0].Kind != "publish" || !strings.Contains(failed[0].Result, refused) {
			t.Fatalf("after admission %d, failed effects %+v, %v; want the one publish, saying why", i+1, failed, err)
		}
		if done, _ := ws.State.Effects(ctx, state.EffectSucceeded); len(done) != 0 {
			t.Fatalf("succeeded effects %+v", done)
		}
		if pin, why, err := admit.Lookup(ctx, reg, keys, ws.State, n); pin != nil || err != nil {
			t.Fatalf("lookup after admission %d: %+v (%s), %v; want nothing admitted", i+1, pin, why, err)
		}
	}
}
