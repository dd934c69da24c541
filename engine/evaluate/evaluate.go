package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// An Evaluator evaluates the candidates of one run, each on its capability's suites in
// sandboxes of its own, and signs what it observed. It takes from the run only what it is
// given here.
type Evaluator struct {
	Workspace *workspace.Workspace
	// Attester signs the test results; its key and TrustedKeys verify the sealed results the
	// attestation directory already holds.
	Attester    *workspace.Attester
	TrustedKeys []*provenance.Verifier
	// Config is the project: its directory, where the case files are, and its promotion rule.
	Config *lang.Config
	// Executor returns the run's executor, opened on first use, for what is about to run.
	Executor func(ctx context.Context, what string) (executors.Executor, error)
	// Scratch is the run's scratch directory, where each sandbox gets its own /out, and
	// ContainerPrefix starts each sandbox's container ID: the run's own, so that the next
	// apply cleans up after a crashed evaluation.
	Scratch, ContainerPrefix string
	Emit                     func(event.Event) // suite_evaluated
	// Fault is called at the evaluation's fault points (FaultBeforeSealed, FaultAfterSealed)
	// with the capability's address: a test hook, nil in production.
	Fault func(point, node string)
	// Images gives the image a seed address was built as: a reference's, which the
	// evaluator runs for a differential suite's expected outputs. Nil when none is built.
	Images func(addr string) (executors.Image, bool)

	refs referenceRuns
	// The signed test results of the attestation directory, read once; resultsRead is
	// cleared when the Evaluator signs one that a later lookup must find.
	resultsMu   sync.Mutex
	resultsSeen []provenance.SignedTestResult
	resultsRead bool
}

// Fault points of an evaluation, in the order it passes them.
const (
	FaultBeforeSealed = "before-sealed" // dev and repair passed and were recorded; the sealed suite has not run
	FaultAfterSealed  = "after-sealed"  // the sealed verdict is signed and recorded; its case not yet retired, nothing returned
)

func (ev *Evaluator) fault(point, node string) {
	if ev.Fault != nil {
		ev.Fault(point, node)
	}
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
	// Shrunk, when the failing case was shrunk (§6 of spec/capability.md), is the smallest
	// input found that fails the same way (ShrunkFailure, verdict.Intrinsic's text),
	// abbreviated to 160 bytes; Original is the failing case's content digest, and
	// ShrinkRuns how many runs of the candidate the shrinking took (charged as probes).
	Shrunk, ShrunkFailure string        `json:",omitempty"`
	Original              digest.Digest `json:",omitempty"`
	ShrinkRuns            int           `json:",omitempty"`
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
		if r.Shrunk != "" {
			s += fmt.Sprintf("\n      shrunk:   %s (%s; from case %s in %d run(s))", r.Shrunk, r.ShrunkFailure, r.Original.Short(), r.ShrinkRuns)
		}
	}
	return s
}

// Event is the event that reports r as the rejection of a candidate of capability node
// (candidate_rejected), a recipe's or a reconstruction round's.
func (r Rejection) Event(node string) event.Event {
	return event.Event{Type: "candidate_rejected", Node: node, Recipe: r.Recipe, Suite: r.Suite, Message: r.String()}
}

// suiteCase is one parsed case with its content digest. A case from a sealed suite is
// published by its digest only (name), never by its file name.
type suiteCase struct {
	c      *verdict.Case
	digest digest.Digest
	name   string // as published in test results
	// ref, for a case generated for a differential suite, names the reference whose
	// output on its input is the case's expected output (filled in by Evaluator.differential).
	ref string
}

// DefaultMinUndisclosed is how many undisclosed sealed cases a capability must keep for a
// candidate to be promoted, unless the project's min_undisclosed_sealed says more.
const DefaultMinUndisclosed = 1

// suites are a capability's cases as the evaluator uses them now: dev as written; repair as
// written plus every sealed case that signed evidence says was disclosed to a builder; and
// sealed, the sealed cases never disclosed, with their digest (what verdicts are keyed by).
type suites struct {
	dev, repair, sealed []suiteCase
	// sealedGen, when the sealed suite has a generate block, adds that many cases generated
	// from a fresh secret seed for each candidate when the sealed suite runs.
	sealedGen    *lang.Generate
	sealedDigest digest.Digest
	// names maps each sealed case's digest to its file, for the operator's local record.
	names map[digest.Digest]string
}

// loadSuites reads a capability's case files and splits them by what the evidence says:
// disclosed sealed cases move to repair for every later candidate.
func (ev *Evaluator) loadSuites(ctx context.Context, n *graph.Node) (*suites, error) {
	results, err := ev.sealedResults()
	if err != nil {
		return nil, err
	}
	retired, err := ev.Workspace.State.RetiredCases(ctx, n.Capability.Name)
	if err != nil {
		return nil, err
	}
	return readSuites(ev.Config.Dir, n.Capability, disclosedBy(results, n.Capability.Name, retired))
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
		if g := s.Generate; g != nil && name == "sealed" {
			su.sealedGen = g
		} else if g != nil {
			gen, err := generatedCases(capb, name, g.Seed, g.Count)
			if err != nil {
				return nil, err
			}
			if name == "dev" {
				su.dev = append(su.dev, gen...)
			} else {
				su.repair = append(su.repair, gen...)
			}
		}
		for _, f := range s.Files {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
			if err != nil {
				return nil, err
			}
			d := digest.FromBytes(b)
			parse := verdict.ParseCase
			if s.Expect != "" {
				parse = verdict.ParseTraceCase // the reference's trace is expected
			}
			c, err := parse(f, b, capb)
			if err != nil {
				return nil, err
			}
			sc := suiteCase{c: c, digest: d, name: f, ref: s.Expect}
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
	if s := capb.Suites["sealed"]; s != nil && s.Expect != "" {
		// What its cases expect is part of the suite: the reference's traces.
		su.sealedDigest = digest.FromBytes(fmt.Appendf(nil, "%s\nexpect reference.%s", su.sealedDigest, s.Expect))
	}
	if su.sealedGen != nil {
		// The generated part is named by how many cases it draws, not by their seed: the
		// suite (what verdicts are keyed by and admissions bind) is the same for every
		// candidate, and each candidate meets it once.
		su.sealedDigest = digest.FromBytes(fmt.Appendf(nil, "%s\ngenerate %d", su.sealedDigest, su.sealedGen.Count))
		if r := su.sealedGen.Expect; r != "" {
			// What its cases expect is part of the suite: a reference's outputs (the
			// dossier, which pins the reference, is in each signed result).
			su.sealedDigest = digest.FromBytes(fmt.Appendf(nil, "%s\nexpect reference.%s", su.sealedDigest, r))
		}
	}
	return su, nil
}

// undisclosed is how many sealed cases a candidate would meet that no builder has seen: a
// generated batch is fresh for every candidate, so it never runs out.
func (su *suites) undisclosed() int {
	n := len(su.sealed)
	if su.sealedGen != nil {
		n += su.sealedGen.Count
	}
	return n
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

// Sealed is a capability's sealed suite as it stands: its digest (what verdicts are keyed
// by) and how many of its cases no signed result disclosed.
type Sealed struct {
	Digest      digest.Digest
	Undisclosed int
}

// SealedNow returns a function giving a capability's sealed suite as it stands in workspace
// w, for the project in dir (the sealed cases no signed result verified with keys
// disclosed), or nil when it has none or it cannot be read: the plan then says nothing about it, and apply
// reports the problem when it evaluates.
func SealedNow(ctx context.Context, w *workspace.Workspace, dir string, keys []*provenance.Verifier) func(*graph.Node) *Sealed {
	var results []provenance.SignedTestResult
	var once sync.Once
	return func(n *graph.Node) *Sealed {
		if n.Capability.Suites["sealed"] == nil {
			return nil // no sealed suite to compare with (a project that only consumes it)
		}
		once.Do(func() { results, _ = provenance.TestResultsIn(w.AttestationDir(), keys, nil) })
		retired, err := w.State.RetiredCases(ctx, n.Capability.Name)
		if err != nil {
			return nil
		}
		su, err := readSuites(dir, n.Capability, disclosedBy(results, n.Capability.Name, retired))
		if err != nil {
			return nil
		}
		return &Sealed{Digest: su.sealedDigest, Undisclosed: su.undisclosed()}
	}
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

// signedResults are the signed test results in the attestation directory that verify with
// the trusted keys: the evidence of what the evaluator observed, read once per run and
// again after the Evaluator signs another.
func (ev *Evaluator) signedResults() ([]provenance.SignedTestResult, error) {
	ev.resultsMu.Lock()
	defer ev.resultsMu.Unlock()
	if ev.resultsRead {
		return ev.resultsSeen, nil
	}
	pub, err := provenance.NewVerifier("signing key "+ev.Attester.Signer.KeyID(), ev.Attester.Signer.PublicKey())
	if err != nil {
		return nil, err
	}
	all, err := provenance.TestResultsIn(ev.Workspace.AttestationDir(), append([]*provenance.Verifier{pub}, ev.TrustedKeys...), nil)
	if err != nil {
		return nil, err
	}
	ev.resultsSeen, ev.resultsRead = all, true
	return all, nil
}

// sealedResults are the signed sealed test results (signedResults).
func (ev *Evaluator) sealedResults() ([]provenance.SignedTestResult, error) {
	all, err := ev.signedResults()
	if err != nil {
		return nil, err
	}
	var sealed []provenance.SignedTestResult
	for _, t := range all {
		if t.Suite == provenance.SuiteSealed {
			sealed = append(sealed, t)
		}
	}
	return sealed, nil
}

// resultsSigned marks the cached results stale: the Evaluator has just signed another
// that a later lookup must see.
func (ev *Evaluator) resultsSigned() {
	ev.resultsMu.Lock()
	ev.resultsRead = false
	ev.resultsMu.Unlock()
}

// recordedSealed finds the signed sealed test result of this candidate on this sealed suite
// under this contract (candidate = tree on the candidate image), unless the operator
// withdrew its verdict; on any version of the sealed suite when suite is "", and only one
// that keep keeps when keep is not nil. The state row, when there is one, only supplies
// what was shown.
func (ev *Evaluator) recordedSealed(ctx context.Context, n *graph.Node, tree, image digest.Digest, suite digest.Digest, keep func(*provenance.SignedTestResult) bool) (*provenance.SignedTestResult, *state.Verdict, error) {
	results, err := ev.sealedResults()
	if err != nil {
		return nil, nil, err
	}
	rows, err := ev.Workspace.State.Verdicts(ctx)
	if err != nil {
		return nil, nil, err
	}
	byEnv := map[digest.Digest]*state.Verdict{}
	for i := range rows {
		byEnv[rows[i].Envelope] = &rows[i]
	}
	for i := range results {
		t := &results[i]
		if t.ContractDigest != string(n.Digest) || (suite != "" && t.SuiteDigest != string(suite)) || !slices.Equal(t.Subjects, []string{string(tree)}) ||
			t.Configuration[provenance.ConfigCandidateImage] != string(image) || (keep != nil && !keep(t)) {
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

// Evaluate runs the candidate of recipe for capability n (the package tree on the base
// image) on its suites: dev, then repair (with every disclosed sealed case), then, if enough
// undisclosed sealed cases are left, the sealed suite once per suite version: a signed
// sealed result for this candidate, contract and suite digest is reused, never re-run. It
// returns a rejection (with the smallest counterexample) or, on success, the signed test
// results: the evidence admission binds; and what the case runs took.
func (ev *Evaluator) Evaluate(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, base executors.Image) (*Result, error) {
	return ev.EvaluateShrinking(ctx, n, recipe, tree, base, DefaultShrinkRuns)
}

// EvaluateShrinking is Evaluate with the counterexample of a rejection shrunk in at most
// shrinkRuns more runs of the candidate (0: not shrunk), counted among the Result's probes.
func (ev *Evaluator) EvaluateShrinking(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, base executors.Image, shrinkRuns int) (*Result, error) {
	capb := n.Capability
	out := &Result{}
	reject := func(r *Rejection) (*Result, error) {
		out.Rejection = r
		return out, nil
	}
	if capb.Interface == nil || (capb.Interface.Kind != "cli" && capb.Interface.Kind != "service") {
		return reject(&Rejection{Reason: "the capability has no interface Foundry can evaluate"})
	}
	if capb.Suites["sealed"] == nil {
		return reject(&Rejection{Suite: "sealed", Reason: "the capability has no sealed suite: nothing can be admitted without one"})
	}
	key, err := CandidateKey(tree, base)
	if err != nil {
		return nil, err
	}
	img, err := CandidateImage(ctx, ev.Workspace, capb.Name, capb.Target, tree, base)
	if err != nil {
		return nil, fmt.Errorf("candidate image: %w", err)
	}
	su, err := ev.loadSuites(ctx, n)
	if err != nil {
		return nil, err
	}
	// The reference dossier, frozen for this evaluation: a candidate holding a reference's
	// bytes that may not be distributed is refused; a reference the contract's own cases
	// refute stops the evaluation (a *Disagreement); the differential cases take their
	// expected outputs from their reference, each run in a sandbox of its own.
	dossier, err := DossierOf(capb, ev.Images)
	if err != nil && capb.Reconstruct != nil && referenced(capb) {
		return nil, err
	} else if err != nil {
		dossier = nil // not needed: no suite expects a reference's outputs
	}
	if rej, err := ev.refuseDistribution(capb, dossier, tree); err != nil || rej != nil {
		if err != nil {
			return nil, err
		}
		return reject(rej)
	}
	if err := ev.checkReferences(ctx, capb, dossier, su); err != nil {
		return nil, err
	}
	var config []provenance.Dependency
	if dossier != nil {
		config = []provenance.Dependency{dossier.Dependency()}
		out.Dossier = dossier
	}
	if su.dev, err = ev.differential(ctx, capb, dossier, su.dev); err != nil {
		return nil, err
	}
	if su.repair, err = ev.differential(ctx, capb, dossier, su.repair); err != nil {
		return nil, err
	}
	for _, part := range []struct {
		name  string
		cases []suiteCase
	}{{provenance.SuiteDev, su.dev}, {provenance.SuiteRepair, su.repair}} {
		if len(part.cases) == 0 {
			continue
		}
		started := time.Now()
		rej, env, err := ev.runSuite(ctx, n, recipe, img, tree, part.name, part.cases, suiteDigest(part.cases), config, false)
		if err != nil {
			return nil, err
		}
		out.Probes += len(part.cases)
		if rej != nil {
			if err := ev.shrink(ctx, capb, img, dossier, rej, shrinkRuns); err != nil {
				return nil, err
			}
			out.Probes += rej.ShrinkRuns
		}
		out.CasesWall += time.Since(started)
		if err := ev.Workspace.State.RecordEvaluation(ctx, state.Evaluation{Contract: n.Digest, Candidate: key, Suite: part.name, Passed: rej == nil, Record: []byte(`{}`)}); err != nil {
			return nil, err
		}
		if rej != nil {
			return reject(&rej.Rejection)
		}
		out.Tests = append(out.Tests, env)
	}
	if need := MinUndisclosed(ev.Config.Project); su.undisclosed() < need {
		return reject(&Rejection{Suite: "sealed", Reason: fmt.Sprintf("%d undisclosed sealed case(s) left, and promotion needs %d: every other sealed case was shown to a builder and now serves for repair; add sealed cases", su.undisclosed(), need)})
	}
	if prev, row, err := ev.recordedSealed(ctx, n, tree, digest.Digest(img.Digest), su.sealedDigest, nil); err != nil {
		return nil, err
	} else if prev != nil {
		if prev.Passed() {
			passed := true
			ev.Emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: provenance.SuiteSealed, Passed: &passed,
				Message: fmt.Sprintf("sealed suite: passed (recorded evaluation %s)", digest.Digest(prev.Digest).Short())})
			out.Tests = append(out.Tests, prev.Envelope)
			return out, nil
		}
		return reject(recordedRejection(prev, row, su))
	}
	ev.fault(FaultBeforeSealed, n.Address)
	started := time.Now()
	sealed, seedDep := su.sealed, []provenance.Dependency(nil)
	// Hand-written cases of a sealed suite that expects a reference's traces take them now,
	// when the suite runs.
	if sealed, err = ev.differential(ctx, capb, dossier, sealed); err != nil {
		return nil, err
	}
	if g := su.sealedGen; g != nil {
		seed, err := freshSeed()
		if err != nil {
			return nil, err
		}
		gen, err := generatedCases(capb, "sealed", seed, g.Count)
		if err != nil {
			return nil, err
		}
		if gen, err = ev.differential(ctx, capb, dossier, gen); err != nil {
			return nil, err
		}
		sealed = append(slices.Clone(sealed), gen...)
		seedDep = []provenance.Dependency{seedDependency(seed, g.Count)}
		out.Evidence = evidence(g, seed, len(gen), len(su.sealed))
	} else if ref := capb.Suites["sealed"].Expect; ref != "" {
		out.Evidence = traceEvidence(ref, len(su.sealed))
	} else {
		out.Evidence = fmt.Sprintf("%d hand-written sealed case(s) passed", len(su.sealed))
	}

	rej, env, err := ev.runSuite(ctx, n, recipe, img, tree, provenance.SuiteSealed, sealed, su.sealedDigest, append(seedDep, config...), true)
	if err != nil {
		return nil, err
	}
	if rej != nil {
		// The case is disclosed with this rejection, so smaller inputs made from it may be
		// shown too.
		if err := ev.shrink(ctx, capb, img, dossier, rej, shrinkRuns); err != nil {
			return nil, err
		}
		out.Probes += rej.ShrinkRuns
	}
	out.CasesWall += time.Since(started)
	rec, _ := json.Marshal(verdictRecord{Rejection: rejectionOf(rej), Cases: su.names})
	v := state.Verdict{Envelope: digest.FromBytes(env), Capability: capb.Name, Contract: n.Digest, Candidate: tree,
		SuiteDigest: su.sealedDigest, Passed: rej == nil, Record: rec, Evaluated: time.Now()}
	if err := ev.Workspace.State.RecordVerdict(ctx, v); err != nil {
		return nil, err
	}
	ev.resultsSigned()
	ev.fault(FaultAfterSealed, n.Address)
	if rej != nil {
		// The state's index of disclosed cases, for the operator (the evidence is the
		// signed result's disclosure).
		name := su.names[rej.caseDigest]
		if name == "" {
			name = "(generated from the candidate's secret seed)"
		}
		if err := ev.Workspace.State.RetireCase(ctx, capb.Name, rej.caseDigest, name, "shown as the counterexample that rejected a candidate"); err != nil {
			return nil, err
		}
		return reject(&rej.Rejection)
	}
	out.Tests = append(out.Tests, env)
	return out, nil
}

// Recorded settles the candidate of recipe for capability n (tree on base) from the signed
// results of an evaluation that finished before, without running a case: what a resumed
// reconstruction round does when the apply that evaluated its candidate died before
// recording how the round ended. A signed sealed result for this candidate under this
// contract (on any version of the sealed suite, unless its verdict was withdrawn) that
// failed is the rejection it recorded; one that passed on the sealed suite as it stands,
// with the signed passing results of the dev and repair suites as they stand, is the
// candidate's evidence. ok is false when there is neither: the candidate must be evaluated
// (Evaluate), the sealed suite included, since it never met it.
func (ev *Evaluator) Recorded(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, base executors.Image) (res *Result, ok bool, err error) {
	capb := n.Capability
	if capb.Interface == nil || capb.Suites["sealed"] == nil {
		return nil, false, nil
	}
	img, err := CandidateImage(ctx, ev.Workspace, capb.Name, capb.Target, tree, base)
	if err != nil {
		return nil, false, fmt.Errorf("candidate image: %w", err)
	}
	su, err := ev.loadSuites(ctx, n)
	if err != nil {
		return nil, false, err
	}
	imgD := digest.Digest(img.Digest)
	failed := func(t *provenance.SignedTestResult) bool { return !t.Passed() }
	if prev, row, err := ev.recordedSealed(ctx, n, tree, imgD, "", failed); err != nil {
		return nil, false, err
	} else if prev != nil {
		ev.Emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: provenance.SuiteSealed, Passed: new(bool),
			Message: fmt.Sprintf("sealed suite: failed (recorded evaluation %s)", digest.Digest(prev.Digest).Short())})
		return &Result{Rejection: recordedRejection(prev, row, su)}, true, nil
	}
	prev, _, err := ev.recordedSealed(ctx, n, tree, imgD, su.sealedDigest, (*provenance.SignedTestResult).Passed)
	if err != nil || prev == nil {
		return nil, false, err
	}
	all, err := ev.signedResults()
	if err != nil {
		return nil, false, err
	}
	out := &Result{}
	for _, part := range []struct {
		name  string
		cases []suiteCase
	}{{provenance.SuiteDev, su.dev}, {provenance.SuiteRepair, su.repair}} {
		if len(part.cases) == 0 {
			continue
		}
		i := slices.IndexFunc(all, func(t provenance.SignedTestResult) bool {
			return t.Suite == part.name && t.Passed() && t.ContractDigest == string(n.Digest) && t.SuiteDigest == string(suiteDigest(part.cases)) &&
				slices.Equal(t.Subjects, []string{string(tree)}) && t.Configuration[provenance.ConfigCandidateImage] == img.Digest
		})
		if i < 0 {
			return nil, false, nil
		}
		out.Tests = append(out.Tests, all[i].Envelope)
	}
	passed := true
	ev.Emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: provenance.SuiteSealed, Passed: &passed,
		Message: fmt.Sprintf("sealed suite: passed (recorded evaluation %s)", digest.Digest(prev.Digest).Short())})
	out.Tests = append(out.Tests, prev.Envelope)
	return out, true, nil
}

// Result is what one evaluation found and what its case runs took.
type Result struct {
	Rejection *Rejection // nil when the candidate passed
	Tests     [][]byte   // the signed test results, when it passed
	// Probes counts the dev and repair case runs (each in a sandbox of its own) and the runs
	// that shrank a counterexample, of any suite; CasesWall is the wall time of every suite
	// run, sealed and shrinking included.
	Probes    int
	CasesWall time.Duration
	// Evidence says what the sealed suite proved, for the admission ("agreed with
	// reference R on N generated sealed cases from seed S, 0 disagreements; M hand-written
	// sealed cases passed"); "" when the sealed result was a recorded one.
	Evidence string
	// Dossier is the reference dossier the evaluation was judged under, nil without one.
	Dossier *Dossier
}

// Probes is the number of dev and repair cases a candidate of n runs before the sealed
// suite: what one evaluation may take of a reconstruction's probes.
func (ev *Evaluator) Probes(ctx context.Context, n *graph.Node) (int, error) {
	su, err := ev.loadSuites(ctx, n)
	if err != nil {
		return 0, err
	}
	return len(su.dev) + len(su.repair), nil
}

// MinUndisclosed is the number of undisclosed sealed cases the project's promotion needs.
func MinUndisclosed(p *lang.Project) int {
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
			if rec.Rejection.Original == d { // not re-run: what it was shrunk to, as recorded
				rej.Shrunk, rej.ShrunkFailure, rej.Original = rec.Rejection.Shrunk, rec.Rejection.ShrunkFailure, d
			}
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

// rejection carries the failing case's digest, for retirement, and what shrinking it needs.
type rejection struct {
	Rejection
	caseDigest digest.Digest
	inputLen   int // the smallest counterexample is the failing case with the shortest input
	input      []byte
	// intrinsic is how the run failed whatever the case expected (verdict.Intrinsic), or ""
	// when the failure depends on the expectation: only an intrinsic failure is shrunk,
	// or one of a differential case (ref), whose reference says what a smaller input expects.
	intrinsic string
	ref       string
	// trace, for a failing case of a service suite that expects reference ref's trace, is
	// the case: its request sequence is what is shrunk.
	trace *verdict.Case
}

// runSuite runs every case of a suite, each in a fresh sandbox, judges it, and mints the
// suite's signed test result. It returns the smallest failing case as a rejection; with
// disclose set, that case is about to be shown to the operator (and so to whoever builds the
// next candidate), and the signed result records its disclosure.
//
// suiteD is the suite's digest as signed; config adds to the result's configuration (a
// generated sealed batch's seed).
func (ev *Evaluator) runSuite(ctx context.Context, n *graph.Node, recipe string, img executors.Image, tree digest.Digest, suite string, cases []suiteCase, suiteD digest.Digest, config []provenance.Dependency, disclose bool) (*rejection, []byte, error) {
	capb := n.Capability
	started := time.Now()
	var results []provenance.CaseResult
	var worst *rejection
	var worstName string
	span := trace.Start(ctx, "suite "+suite, "evaluation")
	defer span.End()
	span.Set("cases", len(cases))
	for _, sc := range cases {
		cs := trace.Start(ctx, "case "+sc.name, "evaluation")
		var v verdict.Verdict
		var o verdict.Observation
		var shown string
		var err error
		if capb.Interface.Kind == "service" {
			v, shown, err = ev.runServiceCase(ctx, capb, img, sc.c, nil)
		} else {
			v, o, err = ev.runCase(ctx, capb, img, sc.c)
			shown = string(sc.c.Input)
		}
		cs.Set("pass", err == nil && v.Pass)
		cs.End()
		if err != nil {
			return nil, nil, err
		}
		results = append(results, provenance.CaseResult{Name: sc.name, Pass: v.Pass})
		if v.Pass {
			continue
		}
		rej := &rejection{Rejection: Rejection{Suite: suite, Reason: v.Reason, Case: sc.c.Name,
			Input: abbreviate(shown, 160), Expected: v.Expected, Got: v.Got}, caseDigest: sc.digest, inputLen: caseSize(sc.c)}
		if capb.Interface.Kind == "cli" {
			rej.input, rej.intrinsic, rej.ref = sc.c.Input, verdict.Intrinsic(capb, o), sc.ref
		} else if sc.ref != "" {
			rej.trace, rej.ref = sc.c, sc.ref
		}
		if worst == nil || rej.inputLen < worst.inputLen {
			worst, worstName = rej, sc.name
		}
	}
	exe, err := ev.Executor(ctx, "the evaluation of "+n.Address)
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
		Suite: suite, SuiteDigest: string(suiteD),
		Evaluator: evaluator, Cases: results, StartedOn: started, FinishedOn: time.Now(),
		Configuration: append([]provenance.Dependency{{Name: provenance.ConfigCandidateImage, URI: "foundry:" + n.Address, Digest: img.Digest}}, config...),
	}
	if disclose && worst != nil {
		e.Disclosed = []string{worstName}
	}
	env, err := ev.Attester.Sign(provenance.NewTestResult(e))
	if err != nil {
		return nil, nil, err
	}
	passed, total := countPassed(results), len(results)
	ok := passed == total
	ev.Emit(event.Event{Type: "suite_evaluated", Node: n.Address, Recipe: recipe, Suite: suite, Passed: &ok, Cases: &total, CasesPassed: &passed,
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

// sandbox is where the evaluator runs each case: a fresh evaluation sandbox per case.
func (ev *Evaluator) sandbox() Sandbox {
	// Evaluations are not nodes of the run: a crashed one's container is found by the
	// run's container prefix, which the next apply cleans up.
	return Sandbox{Executor: ev.Executor, Scratch: ev.Scratch, ContainerPrefix: ev.ContainerPrefix}
}

// runCandidate runs the candidate's entrypoint once in a fresh evaluation sandbox. The
// caller's a supplies stdin, the output writers and, for a service, Attach.
func (ev *Evaluator) runCandidate(ctx context.Context, capb *lang.Capability, img executors.Image, a executors.Action) (*executors.Result, error) {
	return ev.sandbox().Run(ctx, "the evaluation of capability."+capb.Name, capb.Interface.Entrypoint, img, a)
}

// runCase runs one case in a fresh sandbox, the entrypoint with the case input on stdin,
// and judges what it observed. A candidate whose entrypoint cannot start fails with an
// empty observation.
func (ev *Evaluator) runCase(ctx context.Context, capb *lang.Capability, img executors.Image, c *verdict.Case) (verdict.Verdict, verdict.Observation, error) {
	o, err := ev.sandbox().RunCLI(ctx, "the evaluation of capability."+capb.Name, capb.Interface.Entrypoint, img, c.Stdin())
	if errors.Is(err, executors.ErrNotStarted) {
		return notStarted(err, c.Expect.Output), verdict.Observation{}, nil
	}
	if err != nil {
		return verdict.Verdict{}, verdict.Observation{}, fmt.Errorf("running case %s: %w", c.Name, err)
	}
	return verdict.Judge(capb, c, o), o, nil
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
