package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
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
	Suite  string // the suite that failed, or "" when the build itself failed or it was refused
	Reason string
	// Refused is set when the candidate (or a pinned version) was refused before or after
	// evaluation, quarantined or unusable, rather than failing to build or a suite.
	Refused bool
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
	if r.Refused {
		return fmt.Sprintf("  %s: refused: %s", r.Recipe, r.Reason)
	}
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
func (r *runner) settleCapability(ctx context.Context, n *graph.Node) (string, error) {
	var cp *CapabilityPlan
	for _, c := range r.plan.Capabilities {
		if c.Address == n.Address {
			cp = c
		}
	}
	if cp == nil {
		return "failed", fmt.Errorf("%s is not in the plan", n.Address)
	}
	capErr := &CapabilityError{Capability: n.Address}
	if cp.Status == StatusRegistry {
		tree, err := r.pullAdmitted(ctx, n, cp.Pinned)
		if err == nil {
			r.setResult(n.Address, &nodeResult{tree: tree})
			r.emit(event.Event{Type: "capability_pinned", Node: n.Address, Ref: cp.Pinned.Ref, Message: cp.Pinned.Ref})
			return "", nil
		}
		if ctx.Err() != nil {
			return "failed", fmt.Errorf("%s: %w", n.Address, err)
		}
		// The pin is no longer usable (quarantined since the plan, or its evidence no
		// longer binds it): the recipes the plan kept as alternatives are tried instead.
		capErr.Rejections = append(capErr.Rejections, Rejection{Recipe: cp.Pinned.Ref, Refused: true, Reason: "the pinned version is not usable: " + err.Error()})
		r.emit(event.Event{Type: "pin_refused", Node: n.Address, Ref: cp.Pinned.Ref, Message: fmt.Sprintf("%s: %v; trying its recipes", cp.Pinned.Ref, err)})
	}
	for _, o := range cp.Recipes {
		if o.Status != StatusBuild && o.Status != StatusAlternative {
			continue
		}
		tree, base, err := r.buildCandidate(ctx, o.Address)
		if err != nil {
			rej := Rejection{Recipe: o.Address, Reason: err.Error()}
			capErr.Rejections = append(capErr.Rejections, rej)
			r.rejected(n, rej)
			continue
		}
		// A rebuild of a withdrawn artifact is the same artifact: it is not evaluated or
		// admitted again, and the next recipe is tried.
		if why, err := r.quarantined(ctx, tree); err != nil {
			return "failed", err
		} else if why != "" {
			rej := Rejection{Recipe: o.Address, Refused: true, Reason: fmt.Sprintf("its files %s are quarantined (%s)", tree, why)}
			capErr.Rejections = append(capErr.Rejections, rej)
			r.rejected(n, rej)
			continue
		}
		rej, evidence, err := r.evaluate(ctx, n, o.Address, tree, base)
		if err != nil {
			return "failed", fmt.Errorf("evaluating %s for %s: %w", o.Address, n.Address, err)
		}
		if rej != nil {
			rej.Recipe = o.Address
			capErr.Rejections = append(capErr.Rejections, *rej)
			r.rejected(n, *rej)
			continue
		}
		ref, m, err := r.admit(ctx, n, o.Address, tree, evidence)
		if err != nil {
			return "failed", fmt.Errorf("admitting %s for %s: %w", o.Address, n.Address, err)
		}
		if why, err := r.quarantined(ctx, m); err != nil {
			return "failed", err
		} else if why != "" {
			rej := Rejection{Recipe: o.Address, Refused: true, Reason: fmt.Sprintf("its manifest %s is quarantined (%s)", m, why)}
			capErr.Rejections = append(capErr.Rejections, rej)
			r.rejected(n, rej)
			continue
		}
		r.setResult(n.Address, &nodeResult{tree: tree})
		r.emit(event.Event{Type: "capability_admitted", Node: n.Address, Recipe: o.Address, Ref: ref, Message: fmt.Sprintf("%s admitted as %s", o.Address, ref)})
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

// suiteCase is one parsed case with its content digest. A case from a sealed suite is
// published by its digest only (name), never by its file name.
type suiteCase struct {
	c      *verdict.Case
	digest digest.Digest
	name   string // as published in test results
}

// DefaultMinUndisclosed is how many undisclosed sealed cases a capability must keep for a
// candidate to be promoted, unless the project's min_undisclosed_sealed says more.
const DefaultMinUndisclosed = 1

// suites are a capability's cases as the evaluator uses them now: dev as written; repair as
// written plus every sealed case that signed evidence says was disclosed to a builder; and
// sealed, the sealed cases never disclosed, with their digest (what verdicts are keyed by).
type suites struct {
	dev, repair, sealed []suiteCase
	sealedDigest        digest.Digest
	// names maps each sealed case's digest to its file, for the operator's local record.
	names map[digest.Digest]string
}

// loadSuites reads a capability's case files and splits them by what the evidence says:
// disclosed sealed cases move to repair for every later candidate.
func (r *runner) loadSuites(ctx context.Context, n *graph.Node) (*suites, error) {
	results, err := r.sealedResults()
	if err != nil {
		return nil, err
	}
	retired, err := r.ws.State.RetiredCases(ctx, n.Capability.Name)
	if err != nil {
		return nil, err
	}
	return readSuites(r.g.Config.Dir, n.Capability, disclosedBy(results, n.Capability.Name, retired))
}

// readSuites reads capability capb's case files under the project directory dir; the sealed
// cases whose digest is in disclosed join the repair suite.
func readSuites(dir string, capb *lang.Capability, disclosed map[digest.Digest]bool) (*suites, error) {
	su := &suites{names: map[digest.Digest]string{}}
	for _, name := range []string{"dev", "repair", "sealed"} {
		s := capb.Suites[name]
		if s == nil {
			continue
		}
		for _, f := range s.Files {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
			if err != nil {
				return nil, err
			}
			d := digest.FromBytes(b)
			c, err := verdict.ParseCase(f, b, capb)
			if err != nil {
				return nil, err
			}
			sc := suiteCase{c: c, digest: d, name: f}
			switch {
			case name == "dev":
				su.dev = append(su.dev, sc)
			case name == "repair":
				su.repair = append(su.repair, sc)
			case disclosed[d]:
				su.names[d] = f
				sc.name = string(d)
				su.repair = append(su.repair, sc)
			default:
				su.names[d] = f
				sc.name = string(d)
				su.sealed = append(su.sealed, sc)
			}
		}
	}
	su.sealedDigest = suiteDigest(su.sealed)
	return su, nil
}

// disclosedBy are the content digests of the sealed cases of capability name that signed
// test results say were shown to a builder, together with those the state once recorded as
// retired (a row can only move a case from sealed to repair, where it is still checked).
func disclosedBy(results []provenance.SignedTestResult, name string, retired map[digest.Digest]string) map[digest.Digest]bool {
	out := map[digest.Digest]bool{}
	for _, t := range results {
		if t.Suite != provenance.SuiteSealed || t.Capability != name {
			continue
		}
		for _, d := range t.Disclosed {
			out[digest.Digest(d)] = true
		}
	}
	for d := range retired {
		out[d] = true
	}
	return out
}

// suiteDigest is the digest of a suite's cases as run: their content digests, sorted.
func suiteDigest(cases []suiteCase) digest.Digest {
	ds := make([]string, 0, len(cases))
	for _, c := range cases {
		ds = append(ds, string(c.digest))
	}
	sort.Strings(ds)
	return digest.FromBytes([]byte(strings.Join(ds, "\n")))
}

// sealedResults are the signed sealed test results in the attestation directory that verify
// with the trusted keys: the evidence of what the evaluator observed, read once per run.
func (r *runner) sealedResults() ([]provenance.SignedTestResult, error) {
	r.resultsMu.Lock()
	defer r.resultsMu.Unlock()
	if r.resultsRead {
		return r.sealedSeen, nil
	}
	pub, err := provenance.NewVerifier("signing key "+r.opt.Signer.KeyID(), r.opt.Signer.PublicKey())
	if err != nil {
		return nil, err
	}
	all, err := provenance.TestResultsIn(r.ws.AttestationDir(), append([]*provenance.Verifier{pub}, r.opt.TrustedKeys...), nil)
	if err != nil {
		return nil, err
	}
	r.sealedSeen = nil
	for _, t := range all {
		if t.Suite == provenance.SuiteSealed {
			r.sealedSeen = append(r.sealedSeen, t)
		}
	}
	r.resultsRead = true
	return r.sealedSeen, nil
}

// sealedSigned marks the cached sealed results stale: the run has just signed another.
func (r *runner) sealedSigned() {
	r.resultsMu.Lock()
	r.resultsRead = false
	r.resultsMu.Unlock()
}

// recordedSealed finds the signed sealed test result of this candidate on this sealed suite
// under this contract (candidate = tree on the candidate image), unless the operator
// withdrew its verdict. The state row, when there is one, only supplies what was shown.
func (r *runner) recordedSealed(ctx context.Context, n *graph.Node, tree, image digest.Digest, suite digest.Digest) (*provenance.SignedTestResult, *state.Verdict, error) {
	results, err := r.sealedResults()
	if err != nil {
		return nil, nil, err
	}
	rows, err := r.ws.State.Verdicts(ctx)
	if err != nil {
		return nil, nil, err
	}
	byEnv := map[digest.Digest]*state.Verdict{}
	for i := range rows {
		byEnv[rows[i].Envelope] = &rows[i]
	}
	for i := range results {
		t := &results[i]
		if t.ContractDigest != string(n.Digest) || t.SuiteDigest != string(suite) || !slices.Equal(t.Subjects, []string{string(tree)}) ||
			t.Configuration["candidate-image"] != string(image) {
			continue
		}
		row := byEnv[digest.Digest(t.Digest)]
		if row != nil && !row.Withdrawn.IsZero() {
			continue
		}
		return t, row, nil
	}
	return nil, nil, nil
}

// evaluate runs the candidate on its suites: dev, then repair (with every disclosed sealed
// case), then, if enough undisclosed sealed cases are left, the sealed suite once per suite
// version: a signed sealed result for this candidate, contract and suite digest is reused,
// never re-run. It returns a rejection (with the smallest counterexample) or, on success,
// the signed test results.
func (r *runner) evaluate(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, base executors.Image) (*Rejection, *evidence, error) {
	capb := n.Capability
	if capb.Interface == nil || (capb.Interface.Kind != "cli" && capb.Interface.Kind != "service") {
		return &Rejection{Reason: "the capability has no interface Foundry can evaluate"}, nil, nil
	}
	if capb.Suites["sealed"] == nil {
		return &Rejection{Suite: "sealed", Reason: "the capability has no sealed suite: nothing can be admitted without one"}, nil, nil
	}
	key, _, err := digest.Of(map[string]any{"tree": tree, "base": base.Digest})
	if err != nil {
		return nil, nil, err
	}
	img, err := r.candidateImage(ctx, capb, tree, base, key)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate image: %w", err)
	}
	su, err := r.loadSuites(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	ev := &evidence{}
	for _, part := range []struct {
		name  string
		cases []suiteCase
	}{{provenance.SuiteDev, su.dev}, {provenance.SuiteRepair, su.repair}} {
		if len(part.cases) == 0 {
			continue
		}
		rej, env, err := r.runSuite(ctx, n, recipe, img, tree, part.name, part.cases, false)
		if err != nil {
			return nil, nil, err
		}
		if err := r.ws.State.RecordEvaluation(ctx, state.Evaluation{Contract: n.Digest, Candidate: key, Suite: part.name, Passed: rej == nil, Record: []byte(`{}`)}); err != nil {
			return nil, nil, err
		}
		if rej != nil {
			return &rej.Rejection, nil, nil
		}
		ev.testResults = append(ev.testResults, env)
	}
	if need := r.minUndisclosed(); len(su.sealed) < need {
		return &Rejection{Suite: "sealed", Reason: fmt.Sprintf("%d undisclosed sealed case(s) left, and promotion needs %d: every other sealed case was shown to a builder and now serves for repair; add sealed cases", len(su.sealed), need)}, nil, nil
	}
	if prev, row, err := r.recordedSealed(ctx, n, tree, digest.Digest(img.Digest), su.sealedDigest); err != nil {
		return nil, nil, err
	} else if prev != nil {
		if prev.Passed() {
			passed := true
			r.emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: provenance.SuiteSealed, Passed: &passed,
				Message: fmt.Sprintf("sealed suite: passed (recorded evaluation %s)", digest.Digest(prev.Digest).Short())})
			ev.testResults = append(ev.testResults, prev.Envelope)
			return nil, ev, nil
		}
		return recordedRejection(prev, row, su), nil, nil
	}
	rej, env, err := r.runSuite(ctx, n, recipe, img, tree, provenance.SuiteSealed, su.sealed, true)
	if err != nil {
		return nil, nil, err
	}
	rec, _ := json.Marshal(verdictRecord{Rejection: rejectionOf(rej), Cases: su.names})
	v := state.Verdict{Envelope: digest.FromBytes(env), Capability: capb.Name, Contract: n.Digest, Candidate: tree,
		SuiteDigest: su.sealedDigest, Passed: rej == nil, Record: rec, Evaluated: time.Now()}
	if err := r.ws.State.RecordVerdict(ctx, v); err != nil {
		return nil, nil, err
	}
	r.sealedSigned()
	if rej != nil {
		// The state's index of disclosed cases, for the operator (the evidence is the
		// signed result's disclosure).
		if err := r.ws.State.RetireCase(ctx, capb.Name, rej.caseDigest, su.names[rej.caseDigest], "shown as the counterexample that rejected a candidate"); err != nil {
			return nil, nil, err
		}
		return &rej.Rejection, nil, nil
	}
	ev.testResults = append(ev.testResults, env)
	return nil, ev, nil
}

// minUndisclosed is the number of undisclosed sealed cases promotion needs.
func (r *runner) minUndisclosed() int { return minUndisclosed(r.g.Config.Project) }

// minUndisclosed is the number of undisclosed sealed cases the project's promotion needs.
func minUndisclosed(p *lang.Project) int {
	if p != nil && p.MinUndisclosedSealed > 0 {
		return p.MinUndisclosedSealed
	}
	return DefaultMinUndisclosed
}

// verdictRecord is what the state keeps beside a sealed verdict for the operator: the
// rejection shown, and the case files behind the digests the signed result names.
type verdictRecord struct {
	Rejection *Rejection               `json:"rejection,omitempty"`
	Cases     map[digest.Digest]string `json:"cases,omitempty"`
}

func rejectionOf(rej *rejection) *Rejection {
	if rej == nil {
		return nil
	}
	return &rej.Rejection
}

// recordedRejection is the rejection a signed FAILED sealed result stands for. What it says
// comes from the evidence and the current case files: the disclosed case is looked up by
// its digest; the output the candidate gave is quoted from the local record only when that
// record is about the same disclosed case.
func recordedRejection(t *provenance.SignedTestResult, row *state.Verdict, su *suites) *Rejection {
	rej := &Rejection{Suite: "sealed", Reason: fmt.Sprintf("(recorded sealed evaluation %s) failed %d of %d sealed case(s)",
		digest.Digest(t.Digest).Short(), len(t.Predicate.GetFailedTests()), len(t.Predicate.GetFailedTests())+len(t.Predicate.GetPassedTests()))}
	if len(t.Disclosed) == 0 {
		return rej
	}
	d := digest.Digest(t.Disclosed[0])
	for _, sc := range su.repair {
		if sc.digest != d {
			continue
		}
		rej.Case, rej.Input, rej.Expected, rej.Got = su.names[d], abbreviate(describeInput(sc.c), 160), abbreviate(string(sc.c.Expect.Output), 200), "(not recorded)"
		var rec verdictRecord
		if row != nil && json.Unmarshal(row.Record, &rec) == nil && rec.Rejection != nil && rec.Rejection.Case == rej.Case {
			rej.Reason = "(recorded sealed evaluation) " + rec.Rejection.Reason
			rej.Got = rec.Rejection.Got
		}
	}
	return rej
}

// describeInput is how a case's input is shown in a counterexample.
func describeInput(c *verdict.Case) string {
	if len(c.Requests) == 0 {
		return string(c.Input)
	}
	var parts []string
	for i := range c.Requests {
		parts = append(parts, c.Requests[i].Describe())
	}
	return strings.Join(parts, "; ")
}

// rejection carries the failing case's digest, for retirement.
type rejection struct {
	Rejection
	caseDigest digest.Digest
	inputLen   int // the smallest counterexample is the failing case with the shortest input
}

// candidateImage is the base image with the package tree laid over it at /.
func (r *runner) candidateImage(ctx context.Context, capb *lang.Capability, tree digest.Digest, base executors.Image, key digest.Digest) (executors.Image, error) {
	dir, err := r.ws.MaterializeTree(tree)
	if err != nil {
		return executors.Image{}, err
	}
	spec := &seed.Spec{Name: "candidate-" + capb.Name, Platform: capb.Target, Key: "candidate " + string(key)}
	if base.Digest != "" {
		b := base
		spec.Layers = append(spec.Layers, seed.Layer{From: &b})
		spec.Env = seed.EnvMap(base.Env)
	}
	spec.Layers = append(spec.Layers, seed.Layer{Dir: dir, At: "/"})
	return r.ws.Seeds.Build(ctx, spec)
}

// runSuite runs every case of a suite, each in a fresh sandbox, judges it, and mints the
// suite's signed test result. It returns the smallest failing case as a rejection; with
// disclose set, that case is about to be shown to the operator (and so to whoever builds the
// next candidate), and the signed result records its disclosure.
func (r *runner) runSuite(ctx context.Context, n *graph.Node, recipe string, img executors.Image, tree digest.Digest, suite string, cases []suiteCase, disclose bool) (*rejection, []byte, error) {
	capb := n.Capability
	started := time.Now()
	var results []provenance.CaseResult
	var worst *rejection
	var worstName string
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
		results = append(results, provenance.CaseResult{Name: sc.name, Pass: v.Pass})
		if v.Pass {
			continue
		}
		rej := &rejection{Rejection: Rejection{Suite: suite, Reason: v.Reason, Case: sc.c.Name,
			Input: abbreviate(shown, 160), Expected: v.Expected, Got: v.Got}, caseDigest: sc.digest, inputLen: caseSize(sc.c)}
		if worst == nil || rej.inputLen < worst.inputLen {
			worst, worstName = rej, sc.name
		}
	}
	exe, err := r.executor(ctx, "the evaluation of "+n.Address)
	if err != nil {
		return nil, nil, err
	}
	evaluator, err := provenance.EvaluatorID(exe.Name(), exe.Isolation())
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	e := &provenance.Evaluation{
		Capability: capb.Name, ContractDigest: string(n.Digest), Candidate: string(tree),
		Suite: suite, SuiteDigest: string(suiteDigest(cases)),
		Evaluator: evaluator, Cases: results, StartedOn: started, FinishedOn: time.Now(),
		Configuration: []provenance.Dependency{{Name: "candidate-image", URI: "foundry:" + n.Address, Digest: img.Digest}},
	}
	if disclose && worst != nil {
		e.Disclosed = []string{worstName}
	}
	env, err := r.att.Sign(provenance.NewTestResult(e))
	if err != nil {
		return nil, nil, err
	}
	passed, total := countPassed(results), len(results)
	ok := passed == total
	r.emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: suite, Passed: &ok, Cases: &total, CasesPassed: &passed,
		Message: fmt.Sprintf("%s suite: %d of %d cases passed", suite, passed, total)})
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
	scratch := filepath.Join(r.scratch, "eval-"+workspace.NewID())
	out := filepath.Join(scratch, "out")
	if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, err
	}
	os.Chmod(out, 0o777)
	defer os.RemoveAll(scratch)
	// Evaluations are not nodes of the run: a crashed one's container is found by the
	// run's container prefix, which the next apply cleans up.
	a.ID = r.containerPrefix() + "eval-" + workspace.NewID()
	a.Image, a.Argv, a.Env, a.Workdir, a.OutDir = img, capb.Interface.Entrypoint, img.Env, "/", out
	a.Network = executors.NetworkNone
	a.Limits = executors.Limits{MemoryBytes: evalMemoryBytes, CPUs: 1, Pids: 256, Timeout: evalTimeout}
	exe, err := r.executor(ctx, "the evaluation of capability."+capb.Name)
	if err != nil {
		return nil, err
	}
	return exe.Run(ctx, &a)
}

// runCase runs one case in a fresh sandbox: the entrypoint with the case input on stdin.
func (r *runner) runCase(ctx context.Context, capb *lang.Capability, img executors.Image, c *verdict.Case) (verdict.Verdict, error) {
	stdout := capped.NewBuffer(evalOutputBytes)
	stderr := capped.NewBuffer(64 << 10)
	xr, err := r.runCandidate(ctx, capb, img, executors.Action{Stdin: bytes.NewReader(c.Stdin()), Stdout: stdout, Stderr: stderr})
	if errors.Is(err, executors.ErrNotStarted) {
		return notStarted(err, c.Expect.Output), nil
	}
	if err != nil {
		return verdict.Verdict{}, fmt.Errorf("running case %s: %w", c.Name, err)
	}
	return verdict.Judge(capb, c, verdict.Observation{Stdout: stdout.B.Bytes(), Stderr: stderr.B.Bytes(), ExitCode: xr.ExitCode,
		TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled, StdoutTruncated: stdout.Truncated}), nil
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

func abbreviate(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// admit publishes an evaluated candidate to the project registry with its evidence and
// returns the reference and manifest digest it was published as. The publish is an external
// effect: it goes through the outbox with a deterministic ID. The outbox row is an index,
// never a fact to repeat: the reference returned is the one this publish wrote and signed.
func (r *runner) admit(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, ev *evidence) (string, digest.Digest, error) {
	if r.opt.Registry == nil {
		return "", "", errors.New("no registry is configured to publish admitted capabilities to")
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
				return "", "", fmt.Errorf("provenance of %s: %w", a, err)
			}
			inputs = append(inputs, provenance.Attestation{Source: a, Envelope: b})
			provEnvs = append(provEnvs, b)
		}
	}
	for _, env := range ev.testResults {
		inputs = append(inputs, provenance.Attestation{Source: "evaluation", Envelope: env})
	}
	dest := r.opt.Registry.String()
	id, err := state.EffectID(r.g.Config.Project.Name, string(tree), n.Address, "publish", dest)
	if err != nil {
		return "", "", err
	}
	eff, _, err := r.ws.State.EffectIntent(ctx, state.Effect{ID: id, RunID: r.runID, Address: n.Address, Kind: "publish", Destination: dest})
	if err != nil {
		return "", "", err
	}
	switch eff.Status {
	case state.EffectSucceeded:
		// An earlier apply recorded this publish, yet the plan found no admitted version:
		// the registry lost it, or its evidence no longer binds it. Publishing is idempotent
		// (content-addressed; attaching adds what is missing), so it is published again.
		m, err := r.publish(ctx, n, recipe, tree, provEnvs, ev.testResults, inputs)
		if err != nil {
			return "", "", err
		}
		return dest + "@" + string(m), m, nil
	case state.EffectUnknown:
		// An apply that died after dispatching this publish left its outcome unknown. The
		// reconciliation of a publish is to publish again, for the same reason.
		why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it; publishing is idempotent, so it is published again", r.runID, eff.RunID)
		if err := r.ws.State.ResolveEffect(ctx, id, state.EffectFailed, why); err != nil {
			return "", "", err
		}
		r.emit(event.Event{Type: "effect_reconciled", Node: n.Address, Recipe: recipe, Message: fmt.Sprintf("the publish to %s that run %s dispatched has an unknown outcome; publishing is idempotent, so it is published again", dest, eff.RunID)})
	}
	if err := r.ws.State.EffectDispatching(ctx, id, r.runID); err != nil {
		return "", "", err
	}
	r.fault(FaultAfterDispatch, n.Address)
	m, err := r.publish(ctx, n, recipe, tree, provEnvs, ev.testResults, inputs)
	if err != nil {
		r.ws.State.EffectFinished(context.WithoutCancel(ctx), id, state.EffectFailed, err.Error())
		return "", "", err
	}
	ref := dest + "@" + string(m)
	if err := r.ws.State.EffectFinished(ctx, id, state.EffectSucceeded, ref); err != nil {
		return "", "", err
	}
	return ref, m, nil
}

// resourceURI is the URI a verification summary names the published manifest by: the
// layout's own "oci-layout:PATH@DIGEST", or "oci://HOST/REPO@DIGEST" for a registry.
func resourceURI(s registry.Store, m digest.Digest) string {
	ref := s.String() + "@" + string(m)
	if strings.HasPrefix(ref, registry.LayoutScheme) {
		return ref
	}
	return "oci://" + ref
}

// rejected reports a candidate's rejection (event candidate_rejected).
func (r *runner) rejected(n *graph.Node, rej Rejection) {
	r.emit(event.Event{Type: "candidate_rejected", Node: n.Address, Recipe: rej.Recipe, Suite: rej.Suite, Message: rej.String()})
}

// quarantined returns why digest d is quarantined, or "".
func (r *runner) quarantined(ctx context.Context, d digest.Digest) (string, error) {
	bad, reason, err := r.ws.State.IsQuarantined(ctx, d)
	if err != nil || !bad {
		return "", err
	}
	return reason, nil
}

// publish stores the capability artifact, untagged; mints the verification summary that
// binds its contract, its manifest and its tree (over the candidate's provenance and test
// results, inputs); attaches every attestation; and only then points the contract tag at it,
// so that the tag never names a manifest without its evidence. Every step is idempotent
// (content-addressed), which is what lets a dispatched-but-unknown publish be reconciled by
// publishing again.
func (r *runner) publish(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, prov, tests [][]byte, inputs []provenance.Attestation) (digest.Digest, error) {
	m, err := registry.Publish(ctx, r.opt.Registry, r.ws.Store, registry.Capability{
		Contract: n.Definition, Tree: tree, Name: n.Capability.Name, Version: tree.Hex()[:12],
		Target: n.Capability.Target,
	})
	if err != nil {
		return "", err
	}
	pub, err := provenance.NewVerifier("signing key "+r.opt.Signer.KeyID(), r.opt.Signer.PublicKey())
	if err != nil {
		return "", err
	}
	policy := digest.FromBytes([]byte(AdmissionPolicyURI + "\ndev and repair pass; sealed passes on its one evaluation\n"))
	vsa, err := r.att.Sign(provenance.NewVerificationSummary(&provenance.Admission{
		Subject:        provenance.Artifact{Name: n.Capability.Name, Digest: string(tree)},
		ContractDigest: string(n.Digest),
		Manifest:       string(m),
		ResourceURI:    resourceURI(r.opt.Registry, m),
		TimeVerified:   time.Now(),
		Policy:         provenance.PolicyRef{URI: AdmissionPolicyURI, Digest: string(policy)},
		Inputs:         inputs,
		Keys:           []*provenance.Verifier{pub},
	}))
	if err != nil {
		return "", err
	}
	// The packaging itself is an action Foundry observed (on the host, unsandboxed): its
	// provenance names the published manifest and the tree, with the step outputs it was
	// assembled from as dependencies.
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
	if err := r.opt.Registry.Tag(ctx, ContractTag(n.Digest), m); err != nil {
		return "", err
	}
	return m, nil
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
func (r *runner) pullAdmitted(ctx context.Context, n *graph.Node, pin *Admitted) (digest.Digest, error) {
	if r.opt.Registry == nil {
		return "", errors.New("no registry is configured")
	}
	dest := filepath.Join(r.scratch, "pull-"+workspace.NewID())
	pulled, err := registry.Pull(ctx, r.opt.Registry, string(pin.Digest), dest, registry.PullOptions{
		Keys: r.opt.TrustedKeys, Quarantine: r.ws.State, Contract: n.Digest,
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
	if tree != pulled.Tree || (pin.Tree != "" && tree != pin.Tree) {
		return "", fmt.Errorf("pulled files hash to %s; the evidence binds %s and the plan pinned %s", tree, pulled.Tree, pin.Tree)
	}
	return tree, nil
}

// packageProvenance mints and signs the provenance of assembling and publishing a
// capability artifact: subjects are the manifest and the tree; dependencies are the base
// image and every packaged step output, by digest, with its producer. It returns nil when
// the package has no base image to name as its environment.
func (r *runner) packageProvenance(n *graph.Node, recipe string, tree, manifest digest.Digest) ([]byte, error) {
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
	for _, path := range slices.Sorted(maps.Keys(pkgNode.Package.Files)) {
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
	return r.att.Sign(provenance.NewProvenance(e))
}
