package evaluate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// Acceptance is what the acceptance of one product found: the signed acceptance test result
// (passed or failed), and for a failure the smallest failing case.
type Acceptance struct {
	Passed bool
	// Failure is the failing case, as a capability's counterexample: the request, what
	// was expected and what came back. Nil when Passed.
	Failure *Rejection
	// Evidence is the signed test result of suite "acceptance" about the service's tree,
	// and Digest its envelope digest: what a delivery names (spec/provenance.md).
	Evidence []byte
	Digest   digest.Digest
	// Reused is set when a signed passing result for the same product, service and cases
	// was found and nothing ran.
	Reused bool
	// Passed and total cases, for the report.
	CasesPassed, Cases int
}

// Accept runs the acceptance of product n, whose accept block says how: its service (tree,
// the files laid over base) is started in a fresh sandbox per case, with a fresh data
// volume of the run's scratch mounted read-write at the block's data path and kept across
// the case's restarts, each instance reached from inside its network namespace as a
// service capability's candidate is; every response is judged by the block's contract
// (lang.Acceptance.Contract). It signs one test result of suite acceptance whose subject is
// the tree, under the product's node digest. A signed passing result for this product
// digest, tree, image and cases is reused, never re-run: the evidence, not a row, says the
// product was accepted.
func (ev *Evaluator) Accept(ctx context.Context, n *graph.Node, tree digest.Digest, base executors.Image) (*Acceptance, error) {
	ac := n.Product.Accept
	contract := ac.Contract(n.Product.Name)
	img, err := CandidateImage(ctx, ev.Workspace, "accept-"+n.Product.Name, ev.platform(), tree, base)
	if err != nil {
		return nil, fmt.Errorf("the image of %s: %w", contract.Name, err)
	}
	var cases []suiteCase
	for _, f := range ac.Cases.Files {
		b, err := os.ReadFile(filepath.Join(ev.Config.Dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		c, err := verdict.ParseAcceptanceCase(f, b, contract)
		if err != nil {
			return nil, err
		}
		cases = append(cases, suiteCase{c: c, digest: digest.FromBytes(b), name: f})
	}
	suite := suiteDigest(cases)
	if prev, err := ev.recordedAcceptance(n, tree, img, suite); err != nil {
		return nil, err
	} else if prev != nil {
		passed := len(prev.Predicate.GetPassedTests())
		return &Acceptance{Passed: true, Evidence: prev.Envelope, Digest: digest.Digest(prev.Digest), Reused: true, CasesPassed: passed, Cases: passed}, nil
	}

	started := time.Now()
	out := &Acceptance{Cases: len(cases)}
	var results []provenance.CaseResult
	var worst *rejection
	for _, sc := range cases {
		v, shown, err := ev.acceptCase(ctx, contract, ac, img, sc.c)
		if err != nil {
			return nil, err
		}
		results = append(results, provenance.CaseResult{Name: sc.name, Pass: v.Pass})
		if v.Pass {
			out.CasesPassed++
			continue
		}
		rej := &rejection{Rejection: Rejection{Suite: provenance.SuiteAcceptance, Reason: v.Reason, Case: sc.name,
			Input: abbreviate(shown, 200), Expected: v.Expected, Got: v.Got}, inputLen: caseSize(sc.c)}
		if worst == nil || rej.inputLen < worst.inputLen {
			worst = rej
		}
	}
	exe, err := ev.Executor(ctx, "the acceptance of "+n.Address)
	if err != nil {
		return nil, err
	}
	evaluator, err := provenance.EvaluatorID(exe.Name(), exe.Isolation())
	if err != nil {
		return nil, err
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	env, err := ev.Attester.Sign(provenance.NewTestResult(&provenance.Evaluation{
		Capability: n.Address, ContractDigest: string(n.Digest), Candidate: string(tree),
		Suite: provenance.SuiteAcceptance, SuiteDigest: string(suite),
		Evaluator: evaluator, Cases: results, StartedOn: started, FinishedOn: time.Now(),
		Configuration: []provenance.Dependency{{Name: provenance.ConfigCandidateImage, URI: "foundry:" + n.Address, Digest: img.Digest}},
	}))
	if err != nil {
		return nil, err
	}
	ev.resultsSigned()
	out.Passed = worst == nil
	if worst != nil {
		out.Failure = &worst.Rejection
	}
	out.Evidence, out.Digest = env, digest.Digest(provenance.EnvelopeDigest(env))
	return out, nil
}

// acceptCase runs one acceptance case with a data volume of its own, new and empty, which
// every instance of the case (one per restart) mounts at the block's data path.
func (ev *Evaluator) acceptCase(ctx context.Context, contract *lang.Capability, ac *lang.Acceptance, img executors.Image, c *verdict.Case) (verdict.Verdict, string, error) {
	var vol *volume
	if ac.Data != "" {
		dir := filepath.Join(ev.Scratch, "accept-"+workspace.NewID())
		src := filepath.Join(dir, "data")
		if err := os.MkdirAll(src, 0o777); err != nil {
			return verdict.Verdict{}, "", err
		}
		defer os.RemoveAll(dir)
		// The service runs as the sandbox's non-root user.
		if err := os.Chmod(src, 0o777); err != nil {
			return verdict.Verdict{}, "", err
		}
		vol = &volume{source: src, target: ac.Data}
	}
	return ev.runServiceCase(ctx, contract, img, c, vol)
}

// recordedAcceptance finds a signed passing acceptance result of product n about this
// tree on this image and these cases, by a key this Evaluator trusts.
func (ev *Evaluator) recordedAcceptance(n *graph.Node, tree digest.Digest, img executors.Image, suite digest.Digest) (*provenance.SignedTestResult, error) {
	results, err := ev.signedResults()
	if err != nil {
		return nil, err
	}
	for i := range results {
		t := &results[i]
		if t.Suite == provenance.SuiteAcceptance && t.Capability == n.Address && t.ContractDigest == string(n.Digest) &&
			t.SuiteDigest == string(suite) && slices.Equal(t.Subjects, []string{string(tree)}) &&
			t.Configuration[provenance.ConfigCandidateImage] == img.Digest && t.Passed() {
			return t, nil
		}
	}
	return nil, nil
}

// platform is the project's target platform, where a product's service runs.
func (ev *Evaluator) platform() string {
	if ev.Config.Project != nil && ev.Config.Project.Platform != "" {
		return ev.Config.Project.Platform
	}
	return "linux/amd64"
}
