package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/digest"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Limits of one evaluation sandbox: each case runs in a fresh one.
const (
	evalMemoryBytes = 512 << 20
	evalTimeout     = 60 * time.Second
	evalOutputBytes = 8 << 20
)

// AdmissionPolicyURI names the admission rules Foundry applies (spec/capability.md): dev
// and repair suites pass, then the sealed suite passes on its one evaluation.
const AdmissionPolicyURI = "https://foundry.dev/policy/admission/v1"

// CapabilityError says why no recipe of a capability was admitted.
type CapabilityError struct {
	Capability string
	Rejections []Rejection
}

// Rejection is why one candidate recipe was not admitted.
type Rejection struct {
	Recipe string
	Suite  string // the suite that failed, or "" when the build itself failed
	Reason string
	// Counterexample is the smallest failing case: its input, what was expected, what came.
	Case, Input, Expected, Got string
}

func (e *CapabilityError) Error() string {
	var parts []string
	for _, r := range e.Rejections {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("%s: no recipe was admitted:\n%s", e.Capability, strings.Join(parts, "\n"))
}

func (r Rejection) String() string {
	if r.Suite == "" {
		return fmt.Sprintf("  %s: did not build: %s", r.Recipe, r.Reason)
	}
	s := fmt.Sprintf("  %s: failed the %s suite: %s", r.Recipe, r.Suite, r.Reason)
	if r.Case != "" {
		s += fmt.Sprintf("\n    counterexample %s\n      input:    %s\n      expected: %s\n      got:      %s", r.Case, r.Input, r.Expected, r.Got)
	}
	return s
}

// settleCapability resolves a capability at apply time: the admitted version the plan
// pinned, or else its recipes in plan order — each built, evaluated on dev and repair
// cases, then once on the sealed cases; the first that passes is admitted (signed test
// results and a verification summary) and published. A rejected recipe is reported with
// its smallest counterexample and the next one is tried.
func (r *runner) settleCapability(ctx context.Context, n *Node) (string, error) {
	var cp *CapabilityPlan
	for _, c := range r.plan.Capabilities {
		if c.Address == n.Address {
			cp = c
		}
	}
	if cp == nil {
		return "failed", fmt.Errorf("%s is not in the plan", n.Address)
	}
	if cp.Status == StatusRegistry {
		tree, err := r.pullAdmitted(ctx, n, cp.Pinned)
		if err != nil {
			return "failed", fmt.Errorf("%s: %w", n.Address, err)
		}
		r.setResult(n.Address, &nodeResult{tree: tree})
		r.emit(Event{Type: "capability_pinned", Node: n.Address, Message: cp.Pinned.Ref})
		return "", nil
	}
	capErr := &CapabilityError{Capability: n.Address}
	for _, o := range cp.Recipes {
		if o.Status != StatusBuild && o.Status != StatusAlternative {
			continue
		}
		tree, base, err := r.buildCandidate(ctx, o.Address)
		if err != nil {
			capErr.Rejections = append(capErr.Rejections, Rejection{Recipe: o.Address, Reason: err.Error()})
			continue
		}
		rej, evidence, err := r.evaluate(ctx, n, tree, base)
		if err != nil {
			return "failed", fmt.Errorf("evaluating %s for %s: %w", o.Address, n.Address, err)
		}
		if rej != nil {
			rej.Recipe = o.Address
			capErr.Rejections = append(capErr.Rejections, *rej)
			r.emit(Event{Type: "candidate_rejected", Node: n.Address, Message: rej.String()})
			continue
		}
		ref, err := r.admit(ctx, n, o.Address, tree, evidence)
		if err != nil {
			return "failed", fmt.Errorf("admitting %s for %s: %w", o.Address, n.Address, err)
		}
		r.setResult(n.Address, &nodeResult{tree: tree})
		r.emit(Event{Type: "capability_admitted", Node: n.Address, Message: fmt.Sprintf("%s admitted as %s", o.Address, ref)})
		r.mu.Lock()
		r.rejections = append(r.rejections, capErr.Rejections...)
		r.mu.Unlock()
		return "built", nil
	}
	return "failed", capErr
}

// buildCandidate runs a recipe's steps and package and returns the package tree and the
// base image the candidate runs on (zero when the package has no base).
func (r *runner) buildCandidate(ctx context.Context, recipe string) (digest.Digest, executors.Image, error) {
	var nodes []string
	for _, a := range r.g.Order {
		if a == recipe || strings.HasPrefix(a, recipe+".") {
			nodes = append(nodes, a)
		}
	}
	deps := map[string][]string{}
	inSub := map[string]bool{}
	for _, a := range nodes {
		inSub[a] = true
	}
	for _, a := range nodes {
		for _, d := range r.g.Nodes[a].Deps {
			if inSub[d] { // everything outside the recipe was settled before the capability
				deps[a] = append(deps[a], d)
			}
		}
	}
	res := r.walk(ctx, nodes, deps)
	r.mu.Lock()
	r.nested = append(r.nested, res)
	r.mu.Unlock()
	if len(res.Failed) > 0 {
		var reasons []string
		for _, f := range res.Failed {
			reasons = append(reasons, f.Error())
		}
		return "", executors.Image{}, errors.New(strings.Join(reasons, "; "))
	}
	pkg := r.result(recipe + ".package")
	if pkg == nil || pkg.tree == "" {
		return "", executors.Image{}, fmt.Errorf("%s produced no package", recipe)
	}
	var base executors.Image
	if b := r.g.Nodes[recipe].Recipe.Package.Base; b != nil {
		br := r.result(b.Node)
		if br == nil {
			return "", executors.Image{}, fmt.Errorf("%s: base %s is not built", recipe, b.Node)
		}
		base = br.image
	}
	return pkg.tree, base, nil
}

// evidence is what an evaluation produced for admission: signed test results, by suite.
type evidence struct {
	testResults [][]byte
}

// suiteCase is one parsed case with its digest (what retirement is keyed by).
type suiteCase struct {
	c      *verdict.Case
	digest digest.Digest
}

// loadSuite parses a suite's case files; retired sealed cases are left out.
func (r *runner) loadSuite(ctx context.Context, capb *lang.Capability, s *lang.Suite) ([]suiteCase, error) {
	retired := map[digest.Digest]string{}
	if s.Sealed {
		var err error
		if retired, err = r.ws.State.RetiredCases(ctx, capb.Name); err != nil {
			return nil, err
		}
	}
	var out []suiteCase
	for _, f := range s.Files {
		b, err := os.ReadFile(filepath.Join(r.g.Config.Dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		d := digest.FromBytes(b)
		if _, gone := retired[d]; gone {
			continue
		}
		c, err := verdict.ParseCase(f, b, capb)
		if err != nil {
			return nil, err
		}
		out = append(out, suiteCase{c: c, digest: d})
	}
	return out, nil
}

// evaluate runs the candidate on its suites. It returns a rejection (with the smallest
// counterexample) or, on success, the signed test results. The sealed suite runs at most
// once per candidate: a recorded sealed outcome is reused, never re-run.
func (r *runner) evaluate(ctx context.Context, n *Node, tree digest.Digest, base executors.Image) (*Rejection, *evidence, error) {
	capb := n.Capability
	if capb.Interface == nil || (capb.Interface.Kind != "cli" && capb.Interface.Kind != "service") {
		return &Rejection{Reason: "the capability has no interface Foundry can evaluate"}, nil, nil
	}
	key, _, err := digest.Of(map[string]any{"tree": tree, "base": base.Digest})
	if err != nil {
		return nil, nil, err
	}
	img, err := r.candidateImage(ctx, capb, tree, base, key)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate image: %w", err)
	}
	ev := &evidence{}
	for _, name := range []string{"dev", "repair", "sealed"} {
		s := capb.Suites[name]
		if s == nil {
			continue
		}
		if s.Sealed {
			if prev, ok, err := r.ws.State.GetEvaluation(ctx, n.Digest, key, "sealed"); err != nil {
				return nil, nil, err
			} else if ok {
				rej, env, err := decodeSealed(prev.Record)
				if err != nil {
					return nil, nil, err
				}
				if !prev.Passed {
					return rej, nil, nil
				}
				ev.testResults = append(ev.testResults, env)
				continue
			}
		}
		cases, err := r.loadSuite(ctx, capb, s)
		if err != nil {
			return nil, nil, err
		}
		if len(cases) == 0 {
			if s.Sealed {
				return &Rejection{Suite: name, Reason: "no sealed case is left (all were retired); add sealed cases"}, nil, nil
			}
			continue
		}
		rej, env, err := r.runSuite(ctx, n, img, tree, s, cases)
		if err != nil {
			return nil, nil, err
		}
		if s.Sealed {
			rec := encodeSealed(rej, env)
			if err := r.ws.State.RecordSealedEvaluation(ctx, state.Evaluation{Contract: n.Digest, Candidate: key, Suite: "sealed", Passed: rej == nil, Record: rec}); err != nil {
				return nil, nil, err
			}
			if rej != nil {
				// The counterexample is about to be shown: the case leaves the sealed set.
				if err := r.ws.State.RetireCase(ctx, capb.Name, rej.caseDigest, rej.Case, "shown as the counterexample that rejected a candidate"); err != nil {
					return nil, nil, err
				}
			}
		} else if err := r.ws.State.RecordEvaluation(ctx, state.Evaluation{Contract: n.Digest, Candidate: key, Suite: name, Passed: rej == nil, Record: []byte(`{}`)}); err != nil {
			return nil, nil, err
		}
		if rej != nil {
			return &rej.Rejection, nil, nil
		}
		ev.testResults = append(ev.testResults, env)
	}
	if len(ev.testResults) == 0 || capb.Suites["sealed"] == nil {
		return &Rejection{Suite: "sealed", Reason: "the capability has no sealed suite: nothing can be admitted without one"}, nil, nil
	}
	return nil, ev, nil
}

// rejection carries the failing case's digest, for retirement.
type rejection struct {
	Rejection
	caseDigest digest.Digest
	inputLen   int // the smallest counterexample is the failing case with the shortest input
}

// candidateImage is the base image with the package tree laid over it at /.
func (r *runner) candidateImage(ctx context.Context, capb *lang.Capability, tree digest.Digest, base executors.Image, key digest.Digest) (executors.Image, error) {
	dir, err := r.materializeTree(tree)
	if err != nil {
		return executors.Image{}, err
	}
	spec := &seed.Spec{Name: "candidate-" + capb.Name, Platform: capb.Target, Key: "candidate " + string(key)}
	if base.Digest != "" {
		b := base
		spec.Layers = append(spec.Layers, seed.Layer{From: &b})
		spec.Env = envMap(base.Env)
	}
	spec.Layers = append(spec.Layers, seed.Layer{Dir: dir, At: "/"})
	return r.ws.Seeds.Build(ctx, spec)
}

func envMap(kvs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// runSuite runs every case of a suite, each in a fresh sandbox, judges it, and mints the
// suite's signed test result. It returns the smallest failing case as a rejection.
func (r *runner) runSuite(ctx context.Context, n *Node, img executors.Image, tree digest.Digest, s *lang.Suite, cases []suiteCase) (*rejection, []byte, error) {
	capb := n.Capability
	started := time.Now()
	var results []provenance.CaseResult
	var worst *rejection
	for _, sc := range cases {
		var v verdict.Verdict
		var shown string
		var err error
		if capb.Interface.Kind == "service" {
			v, shown, err = r.runServiceCase(ctx, capb, img, sc.c)
		} else {
			v, err = r.runCase(ctx, capb, img, sc.c)
			shown = string(sc.c.Input)
		}
		if err != nil {
			return nil, nil, err
		}
		results = append(results, provenance.CaseResult{Name: sc.c.Name, Pass: v.Pass})
		if v.Pass {
			continue
		}
		rej := &rejection{Rejection: Rejection{Suite: s.Name, Reason: v.Reason, Case: sc.c.Name,
			Input: abbreviate(shown, 160), Expected: v.Expected, Got: v.Got}, caseDigest: sc.digest, inputLen: caseSize(sc.c)}
		if worst == nil || rej.inputLen < worst.inputLen {
			worst = rej
		}
	}
	evaluator, err := provenance.EvaluatorID(r.opt.Executor.Name(), r.opt.Executor.Isolation())
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	var suiteDigests []string
	for _, sc := range cases {
		suiteDigests = append(suiteDigests, sc.c.Name+"="+string(sc.digest))
	}
	sort.Strings(suiteDigests)
	st, err := provenance.NewTestResult(&provenance.Evaluation{
		Capability: capb.Name, ContractDigest: string(n.Digest), Candidate: string(tree),
		Suite: s.Name, SuiteDigest: string(digest.FromBytes([]byte(strings.Join(suiteDigests, "\n")))),
		Evaluator: evaluator, Cases: results, StartedOn: started, FinishedOn: time.Now(),
		Configuration: []provenance.Dependency{{Name: "candidate-image", URI: "foundry:" + n.Address, Digest: img.Digest}},
	})
	if err != nil {
		return nil, nil, err
	}
	env, err := provenance.Sign(r.opt.Signer, st)
	if err != nil {
		return nil, nil, err
	}
	if _, err := r.ws.Store.PutBytes(env); err != nil {
		return nil, nil, err
	}
	if _, err := provenance.WriteEnvelope(r.ws.AttestationDir(), env); err != nil {
		return nil, nil, err
	}
	r.emit(Event{Type: "suite_evaluated", Node: n.Address, Message: fmt.Sprintf("%s suite: %d of %d cases passed", s.Name, countPassed(results), len(results))})
	return worst, env, nil
}

func countPassed(rs []provenance.CaseResult) int {
	n := 0
	for _, r := range rs {
		if r.Pass {
			n++
		}
	}
	return n
}

// runCandidate runs the candidate's entrypoint once in a fresh evaluation sandbox: its own
// empty /out, no network, the evaluation limits. The caller's a supplies stdin, the output
// writers and, for a service, Attach.
func (r *runner) runCandidate(ctx context.Context, capb *lang.Capability, img executors.Image, a executors.Action) (*executors.Result, error) {
	scratch := filepath.Join(r.scratch, "eval-"+newID())
	out := filepath.Join(scratch, "out")
	if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, err
	}
	os.Chmod(out, 0o777)
	defer os.RemoveAll(scratch)
	// Evaluations are not nodes of the run: a crashed one's container is found by the
	// run's container prefix, which the next apply cleans up.
	a.ID = r.containerPrefix() + "eval-" + newID()
	a.Image, a.Argv, a.Env, a.Workdir, a.OutDir = img, capb.Interface.Entrypoint, img.Env, "/", out
	a.Network = executors.NetworkNone
	a.Limits = executors.Limits{MemoryBytes: evalMemoryBytes, CPUs: 1, Pids: 256, Timeout: evalTimeout}
	return r.opt.Executor.Run(ctx, &a)
}

// runCase runs one case in a fresh sandbox: the entrypoint with the case input on stdin.
func (r *runner) runCase(ctx context.Context, capb *lang.Capability, img executors.Image, c *verdict.Case) (verdict.Verdict, error) {
	stdout := &limitedBuffer{limit: evalOutputBytes}
	stderr := &limitedBuffer{limit: 64 << 10}
	xr, err := r.runCandidate(ctx, capb, img, executors.Action{Stdin: bytes.NewReader(c.Stdin()), Stdout: stdout, Stderr: stderr})
	if errors.Is(err, executors.ErrNotStarted) {
		return notStarted(err, c.Expect.Output), nil
	}
	if err != nil {
		return verdict.Verdict{}, fmt.Errorf("running case %s: %w", c.Name, err)
	}
	return verdict.Judge(capb, c, verdict.Observation{Stdout: stdout.b.Bytes(), Stderr: stderr.b.Bytes(), ExitCode: xr.ExitCode,
		TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled, StdoutTruncated: stdout.truncated}), nil
}

// notStarted is the verdict on a candidate whose entrypoint could not be executed: the
// candidate's fault (it was built without it, or not executable), so a failing case, not an
// error of the run.
func notStarted(err error, expected []byte) verdict.Verdict {
	msg := err.Error()
	if i := strings.Index(msg, "exec: "); i >= 0 {
		msg = msg[i:]
	}
	want := "a running entrypoint"
	if expected != nil {
		want = abbreviate(string(expected), 200)
	}
	return verdict.Verdict{Reason: "the entrypoint could not be started", Expected: want, Got: abbreviate(msg, 200)}
}

// caseSize measures a case for choosing the smallest counterexample: the length of its
// input, or of all its requests.
func caseSize(c *verdict.Case) int {
	if len(c.Requests) == 0 {
		return len(c.Input)
	}
	n := 0
	for i := range c.Requests {
		n += len(c.Requests[i].Describe())
	}
	return n
}

// limitedBuffer keeps at most limit bytes and notes whether more came.
type limitedBuffer struct {
	b         bytes.Buffer
	limit     int
	truncated bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := l.limit - l.b.Len()
	if room < len(p) {
		l.truncated = true
		if room > 0 {
			l.b.Write(p[:room])
		}
		return len(p), nil
	}
	return l.b.Write(p)
}

func abbreviate(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// sealedRecord is what the state keeps of the one sealed evaluation of a candidate.
type sealedRecord struct {
	Rejection  *Rejection    `json:"rejection,omitempty"`
	TestResult []byte        `json:"test_result,omitempty"`
	CaseDigest digest.Digest `json:"case_digest,omitempty"`
}

func encodeSealed(rej *rejection, env []byte) []byte {
	rec := sealedRecord{TestResult: env}
	if rej != nil {
		rec.Rejection, rec.CaseDigest = &rej.Rejection, rej.caseDigest
	}
	b, _ := json.Marshal(rec)
	return b
}

func decodeSealed(b []byte) (*Rejection, []byte, error) {
	var rec sealedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, nil, fmt.Errorf("reading the recorded sealed evaluation: %w", err)
	}
	if rec.Rejection != nil {
		rej := *rec.Rejection
		rej.Reason = "(recorded sealed evaluation) " + rej.Reason
		return &rej, rec.TestResult, nil
	}
	return nil, rec.TestResult, nil
}

// admit mints the verification summary over the candidate's provenance and test results,
// publishes the capability to the project registry and attaches every attestation to it.
// The publish is an external effect: it goes through the outbox with a deterministic ID.
func (r *runner) admit(ctx context.Context, n *Node, recipe string, tree digest.Digest, ev *evidence) (string, error) {
	if r.opt.Registry == nil {
		return "", errors.New("no registry is configured to publish admitted capabilities to")
	}
	var inputs []provenance.Attestation
	var provEnvs [][]byte
	for a, nr := range r.snapshot() {
		if !strings.HasPrefix(a, recipe+".step.") || nr.step == nil {
			continue
		}
		for _, d := range nr.step.Attestations {
			b, err := r.ws.Store.Get(d)
			if err != nil {
				return "", fmt.Errorf("provenance of %s: %w", a, err)
			}
			inputs = append(inputs, provenance.Attestation{Source: a, Envelope: b})
			provEnvs = append(provEnvs, b)
		}
	}
	for _, env := range ev.testResults {
		inputs = append(inputs, provenance.Attestation{Source: "evaluation", Envelope: env})
	}
	pub, err := provenance.NewVerifier("signing key "+r.opt.Signer.KeyID(), r.opt.Signer.PublicKey())
	if err != nil {
		return "", err
	}
	policy := digest.FromBytes([]byte(AdmissionPolicyURI + "\ndev and repair pass; sealed passes on its one evaluation\n"))
	st, err := provenance.NewVerificationSummary(&provenance.Admission{
		Subject:        provenance.Artifact{Name: n.Capability.Name, Digest: string(tree)},
		ContractDigest: string(n.Digest),
		TimeVerified:   time.Now(),
		Policy:         provenance.PolicyRef{URI: AdmissionPolicyURI, Digest: string(policy)},
		Inputs:         inputs,
		Keys:           []*provenance.Verifier{pub},
	})
	if err != nil {
		return "", err
	}
	vsa, err := provenance.Sign(r.opt.Signer, st)
	if err != nil {
		return "", err
	}
	if _, err := r.ws.Store.PutBytes(vsa); err != nil {
		return "", err
	}
	if _, err := provenance.WriteEnvelope(r.ws.AttestationDir(), vsa); err != nil {
		return "", err
	}
	dest := r.opt.Registry.String()
	id, err := state.EffectID(r.g.Config.Project.Name, string(tree), n.Address, "publish", dest)
	if err != nil {
		return "", err
	}
	eff, _, err := r.ws.State.EffectIntent(ctx, state.Effect{ID: id, RunID: r.runID, Address: n.Address, Kind: "publish", Destination: dest})
	if err != nil {
		return "", err
	}
	if eff.Status == state.EffectSucceeded {
		// Published by an earlier apply: never twice. But a version quarantined since
		// must not come back as admitted.
		if err := r.refuseQuarantined(ctx, tree, eff.Result); err != nil {
			return "", err
		}
		return eff.Result, nil
	}
	if eff.Status == state.EffectUnknown {
		// An apply that died after dispatching this publish left its outcome unknown. The
		// reconciliation of a publish is to publish again: the manifest is content-addressed
		// (the same one is stored again) and attaching attestations adds what is missing, so
		// nothing is published twice.
		why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it; publishing is idempotent, so it is published again", r.runID, eff.RunID)
		if err := r.ws.State.ResolveEffect(ctx, id, state.EffectFailed, why); err != nil {
			return "", err
		}
		r.emit(Event{Type: "effect_reconciled", Node: n.Address, Message: fmt.Sprintf("the publish to %s that run %s dispatched has an unknown outcome; publishing is idempotent, so it is published again", dest, eff.RunID)})
	}
	if err := r.ws.State.EffectDispatching(ctx, id, r.runID); err != nil {
		return "", err
	}
	r.fault(FaultAfterDispatch, n.Address)
	ref, err := r.publish(ctx, n, recipe, tree, provEnvs, ev.testResults, vsa)
	if err != nil {
		r.ws.State.EffectFinished(context.WithoutCancel(ctx), id, state.EffectFailed, err.Error())
		return "", err
	}
	if err := r.ws.State.EffectFinished(ctx, id, state.EffectSucceeded, ref); err != nil {
		return "", err
	}
	if err := r.refuseQuarantined(ctx, tree, ref); err != nil {
		return "", err
	}
	return ref, nil
}

// refuseQuarantined fails when the candidate's files or its published manifest (the digest
// after the last "@" of ref) are quarantined: a rebuild of a withdrawn artifact is the same
// artifact, and is not admitted again.
func (r *runner) refuseQuarantined(ctx context.Context, tree digest.Digest, ref string) error {
	ds := []digest.Digest{tree}
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ds = append(ds, digest.Digest(ref[i+1:]))
	}
	for _, d := range ds {
		bad, reason, err := r.ws.State.IsQuarantined(ctx, d)
		if err != nil {
			return err
		}
		if bad {
			return fmt.Errorf("the candidate's artifact %s is quarantined (%s); it is not admitted again", d, reason)
		}
	}
	return nil
}

// publish stores the capability artifact and attaches its attestations. Both are
// idempotent (content-addressed), which is what lets a dispatched-but-unknown publish be
// reconciled by publishing again.
func (r *runner) publish(ctx context.Context, n *Node, recipe string, tree digest.Digest, prov, tests [][]byte, vsa []byte) (string, error) {
	m, err := registry.Publish(ctx, r.opt.Registry, r.ws.Store, registry.Capability{
		Contract: n.Definition, Tree: tree, Name: n.Capability.Name, Version: tree.Hex()[:12],
		Target: n.Capability.Target, Tag: ContractTag(n.Digest),
	})
	if err != nil {
		return "", err
	}
	// The packaging itself is an action Foundry observed (on the host, unsandboxed): its
	// provenance names the published manifest, which is what OCI tools such as cosign look
	// for, and the tree, with the step outputs it was assembled from as dependencies.
	if pkg, err := r.packageProvenance(n, recipe, tree, m); err != nil {
		return "", fmt.Errorf("provenance of the package: %w", err)
	} else if pkg != nil {
		prov = append(prov, pkg)
	}
	for _, group := range []struct {
		envs  [][]byte
		ptype string
	}{{prov, provenance.PredicateSLSAProvenance}, {tests, provenance.PredicateTestResult}, {[][]byte{vsa}, provenance.PredicateVSA}} {
		for _, env := range group.envs {
			if _, err := registry.Attach(ctx, r.opt.Registry, m, env, group.ptype); err != nil {
				return "", err
			}
		}
	}
	return r.opt.Registry.String() + "@" + string(m), nil
}

// ContractTag is the registry tag under which the latest admitted version of a contract is
// published; plans resolve it to a digest once and pin that.
func ContractTag(contract digest.Digest) string { return "contract-" + contract.Hex() }

// snapshot copies the results map.
func (r *runner) snapshot() map[string]*nodeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*nodeResult, len(r.results))
	for k, v := range r.results {
		out[k] = v
	}
	return out
}

// pullAdmitted fetches the pinned admitted version, verifying its attestations with the
// trusted keys before anything is written, and stores its files as a tree.
func (r *runner) pullAdmitted(ctx context.Context, n *Node, pin *Admitted) (digest.Digest, error) {
	if r.opt.Registry == nil {
		return "", errors.New("no registry is configured")
	}
	dest := filepath.Join(r.scratch, "pull-"+newID())
	pulled, err := registry.Pull(ctx, r.opt.Registry, string(pin.Digest), dest, registry.PullOptions{
		Keys: r.opt.TrustedKeys, Quarantine: r.ws.State,
		Policy: provenance.Policy{PredicateTypes: []string{provenance.PredicateVSA}},
	})
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dest)
	tree, _, err := r.ws.Store.PutDir(dest)
	if err != nil {
		return "", err
	}
	if tree != pulled.Tree {
		return "", fmt.Errorf("pulled files hash to %s, the artifact says %s", tree, pulled.Tree)
	}
	return tree, nil
}

// packageProvenance mints and signs the provenance of assembling and publishing a
// capability artifact: subjects are the manifest and the tree; dependencies are the base
// image and every packaged step output, by digest, with its producer. It returns nil when
// the package has no base image to name as its environment.
func (r *runner) packageProvenance(n *Node, recipe string, tree, manifest digest.Digest) ([]byte, error) {
	snap := r.snapshot()
	pkgNode := r.g.Nodes[recipe+".package"]
	if pkgNode == nil || pkgNode.Package.Base == nil {
		return nil, nil
	}
	base := snap[pkgNode.Package.Base.Node]
	if base == nil {
		return nil, nil
	}
	e := &provenance.Execution{
		InvocationID: fmt.Sprintf("%s/%s/publish", r.runID, n.Address),
		Executor:     "packager", Isolation: provenance.IsolationNone,
		Versions:     map[string]string{"foundry": r.opt.Version},
		Step:         pkgNode.Definition,
		ActionDigest: string(pkgNode.Digest), Platform: n.Capability.Target,
		Network: provenance.Network{Mode: executors.NetworkNone},
		Image:   provenance.Dependency{Name: "image", URI: "foundry:" + pkgNode.Package.Base.Node, Digest: base.image.Digest},
		Outputs: []provenance.Artifact{
			{Name: "manifest", Digest: string(manifest), MediaType: "application/vnd.oci.image.manifest.v1+json"},
			{Name: "files", Digest: string(tree)},
		},
		StartedOn: time.Now(), FinishedOn: time.Now(),
	}
	for _, path := range sortedKeys(pkgNode.Package.Files) {
		a := pkgNode.Package.Files[path]
		if a.Kind != lang.ArtifactStepOutput {
			continue
		}
		o, producer, err := r.recordedOutput(a)
		if err != nil {
			return nil, err
		}
		e.Inputs = append(e.Inputs, provenance.Dependency{Name: path, URI: "foundry:" + a.Node + "#" + a.Path,
			Digest: string(o.Digest), Producer: string(producer)})
	}
	st, err := provenance.NewProvenance(e)
	if err != nil {
		return nil, err
	}
	env, err := provenance.Sign(r.opt.Signer, st)
	if err != nil {
		return nil, err
	}
	if _, err := r.ws.Store.PutBytes(env); err != nil {
		return nil, err
	}
	if _, err := provenance.WriteEnvelope(r.ws.AttestationDir(), env); err != nil {
		return nil, err
	}
	return env, nil
}
