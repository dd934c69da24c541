package evaluate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/local"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// evaluation is an Evaluator of a project holding one capability, "sort", whose
// candidates the local executor runs on the host: entrypoint is its interface's.
type evaluation struct {
	ev     *Evaluator
	n      *graph.Node
	events []event.Event
}

func newEvaluation(t *testing.T, entrypoint string, dev, sealed map[string]string) *evaluation {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"schemas/ints.json": `{"type":"array","items":{"type":"integer"}}`, "main.hcl": `
capability "sort" {
  equivalence = "json"
  interface "cli" {
    entrypoint = ` + entrypoint + `
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "dev/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
}
`}
	for name, c := range dev {
		files["dev/"+name] = c
	}
	for name, c := range sealed {
		files["sealed/"+name] = c
	}
	for p, content := range files {
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
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := provenance.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	e := &evaluation{n: g.Nodes["capability.sort"]}
	e.ev = &Evaluator{Workspace: ws, Attester: ws.Attester(signer), Config: cfg, Scratch: t.TempDir(), ContainerPrefix: "foundry-test-",
		Executor: func(context.Context, string) (executors.Executor, error) { return local.New(), nil },
		Emit:     func(ev event.Event) { e.events = append(e.events, ev) }}
	return e
}

// evaluate evaluates a candidate whose files are one file: the local executor runs the
// entrypoint on the host, so what the candidate does is the entrypoint's.
func (e *evaluation) evaluate(t *testing.T) *Result {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("candidate"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, _, err := e.ev.Workspace.Store.PutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.ev.Evaluate(context.Background(), e.n, "recipe.r", tree, executors.Image{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// suites are the suites evaluated, in order, as "suite passed/cases".
func (e *evaluation) suites() []string {
	var out []string
	for _, ev := range e.events {
		if ev.Type == "suite_evaluated" && ev.Cases != nil {
			out = append(out, ev.Suite+" "+strings.Fields(ev.Message)[2]+"/"+strings.Fields(ev.Message)[4])
		}
	}
	return out
}

// A candidate that fails dev cases is rejected with the failing case whose input is
// shortest as its counterexample, and never meets the sealed suite; every dev case runs,
// and is counted as a probe.
func TestFailingDevCaseRejectsWithTheSmallestCounterexample(t *testing.T) {
	e := newEvaluation(t, `["/bin/sh", "-c", "cat"]`, map[string]string{
		"long.json":   `{"input":[3,1,2,9,8],"output":[1,2,3,8,9]}`,
		"short.json":  `{"input":[2,1],"output":[1,2]}`,
		"sorted.json": `{"input":[1,2],"output":[1,2]}`,
	}, map[string]string{"s.json": `{"input":[5],"output":[5]}`})
	res := e.evaluate(t)
	rej := res.Rejection
	if rej == nil || rej.Suite != "dev" || rej.Case != "dev/short.json" || rej.Input != "[2,1]" || rej.Got != "[2,1]" || rej.Expected != "[1,2]" {
		t.Fatalf("rejection %+v, want dev/short.json as the counterexample", rej)
	}
	if got := strings.Join(e.suites(), ", "); got != "dev 1/3" {
		t.Errorf("suites evaluated: %s; want dev alone, 1 of 3 passed", got)
	}
	if res.Probes != 3 || len(res.Tests) != 0 {
		t.Errorf("probes %d, tests %d; want 3 probes and no signed result to admit with", res.Probes, len(res.Tests))
	}
	if n, err := e.ev.Probes(context.Background(), e.n); err != nil || n != 3 {
		t.Errorf("Probes = %d, %v; want the 3 dev cases", n, err)
	}
}

// A candidate that passes dev meets the sealed suite, and passing it has a signed test
// result of each suite, naming the candidate's tree, the contract and this evaluator.
func TestPassingCandidateHasSignedResultsOfEachSuite(t *testing.T) {
	e := newEvaluation(t, `["/bin/sh", "-c", "cat"]`, map[string]string{"a.json": `{"input":[1,2],"output":[1,2]}`},
		map[string]string{"s.json": `{"input":[5],"output":[5]}`, "t.json": `{"input":[],"output":[]}`})
	res := e.evaluate(t)
	if res.Rejection != nil {
		t.Fatalf("rejected: %+v", res.Rejection)
	}
	if got := strings.Join(e.suites(), ", "); got != "dev 1/1, sealed 2/2" {
		t.Errorf("suites evaluated: %s", got)
	}
	if len(res.Tests) != 2 || res.Probes != 1 || res.CasesWall <= 0 {
		t.Fatalf("tests %d, probes %d, cases wall %s", len(res.Tests), res.Probes, res.CasesWall)
	}
	key, err := e.ev.Attester.Signer.Verifier("test key")
	if err != nil {
		t.Fatal(err)
	}
	local, err := provenance.EvaluatorID("local", executors.IsolationNone)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := provenance.TestResultsIn(e.ev.Workspace.AttestationDir(), []*provenance.Verifier{key}, []string{local})
	if err != nil {
		t.Fatal(err)
	}
	suites := map[string]bool{}
	for _, s := range signed {
		if s.ContractDigest == string(e.n.Digest) && s.Passed() {
			suites[s.Suite] = true
		}
		if d := digest.FromBytes(s.Envelope); s.Digest != string(d) {
			t.Errorf("result %s is named %s", d, s.Digest)
		}
	}
	if !suites["dev"] || !suites["sealed"] {
		t.Errorf("signed passing results: %v, want dev and sealed", suites)
	}
	// The sandboxes' results alone are evidence: what the local executor observed is not.
	if sandboxed, err := provenance.TestResultsIn(e.ev.Workspace.AttestationDir(), []*provenance.Verifier{key}, nil); err != nil || len(sandboxed) != 0 {
		t.Errorf("results taken as a sandbox's: %d, %v", len(sandboxed), err)
	}
}

// An entrypoint that cannot be started fails the candidate's case, not the evaluation.
func TestEntrypointThatCannotStartFailsTheCandidate(t *testing.T) {
	e := newEvaluation(t, `["/nonexistent/sort"]`, map[string]string{"a.json": `{"input":[1],"output":[1]}`},
		map[string]string{"s.json": `{"input":[5],"output":[5]}`})
	res := e.evaluate(t)
	if rej := res.Rejection; rej == nil || rej.Suite != "dev" || !strings.Contains(rej.Reason, "could not be started") {
		t.Fatalf("rejection %+v, want the dev case failed: the program could not be started", res.Rejection)
	}
}
