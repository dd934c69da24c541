package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// reconstruct settles capability n, which the plan found no admitted version and no
// feasible recipe for, with its reconstruct block (spec/capability.md §5a). Each round, up
// to the budget's candidates: the builder runs in the sandbox with the job mounted
// read-only at /job (contract, schemas, dev and repair cases, and every earlier round's
// failure as a counterexample); its declared outputs are packaged on the base; the
// candidate is evaluated and admitted exactly as a recipe's is (tryCandidate). A rejection
// goes to the next round's job. With the budget spent, the capability fails with every
// round's rejection and the smallest counterexample (ReconstructionError).
func (r *runner) reconstruct(ctx context.Context, n *graph.Node) (string, error) {
	rc := n.Capability.Reconstruct
	failed := &ReconstructionError{Capability: n.Address, Budget: rc.Budget.Candidates}
	for round := 1; round <= rc.Budget.Candidates; round++ {
		r.emit(event.Event{Type: "reconstruct_round", Node: n.Address, Recipe: roundLabel(round),
			Message: fmt.Sprintf("round %d of %d: the builder proposes a candidate from %d counterexample(s)", round, rc.Budget.Candidates, len(failed.Rounds))})
		c, err := r.propose(ctx, n, round, failed.Rounds)
		var se *StepError
		switch {
		case err != nil && ctx.Err() != nil:
			return "failed", interruptedError(ctx)
		case errors.As(err, &se):
			// The builder failed, or made no proposal: a round spent, nothing to evaluate.
			failed.Rounds = append(failed.Rounds, r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round), Reason: err.Error()}))
			continue
		case err != nil:
			return "failed", fmt.Errorf("%s: %w", roundLabel(round), err)
		}
		if kind, err := r.offer(ctx, n, c, &failed.Rounds); kind != "" {
			return kind, err
		}
	}
	r.emit(event.Event{Type: "reconstruct_exhausted", Node: n.Address, Message: failed.headline()})
	return "failed", failed
}

// roundLabel names a round's candidate where a recipe's address names a recipe's.
func roundLabel(round int) string { return fmt.Sprintf("reconstruct round %d", round) }

// ReconstructionError is a reconstruction that spent its budget without an admission: every
// round's rejection, in order.
type ReconstructionError struct {
	Capability string
	Budget     int
	Rounds     []evaluate.Rejection
}

func (e *ReconstructionError) headline() string {
	return fmt.Sprintf("reconstruction exhausted its budget: %d of %d candidates tried, none admitted", len(e.Rounds), e.Budget)
}

// Error is the report without the capability's address, which the walk puts before it.
func (e *ReconstructionError) Error() string {
	s := e.headline()
	if c := e.Smallest(); c != nil {
		s += fmt.Sprintf("\n  smallest counterexample (%s, %s suite): %s\n    input:    %s\n    expected: %s\n    got:      %s", c.Recipe, c.Suite, c.Case, c.Input, c.Expected, c.Got)
	}
	for _, r := range e.Rounds {
		s += "\n" + r.String()
	}
	return s
}

// Smallest is the counterexample with the shortest input among the rounds' (the first of
// equals), or nil when no round got as far as a failing case.
func (e *ReconstructionError) Smallest() *evaluate.Rejection {
	var best *evaluate.Rejection
	for i := range e.Rounds {
		if c := &e.Rounds[i]; c.Case != "" && (best == nil || len(c.Input) < len(best.Input)) {
			best = c
		}
	}
	return best
}

// propose runs round's builder and packages what it wrote into a candidate. A failure of
// the builder, or an output it did not make, is a *StepError.
func (r *runner) propose(ctx context.Context, n *graph.Node, round int, earlier []evaluate.Rejection) (*admit.Candidate, error) {
	rc := n.Capability.Reconstruct
	job, err := r.writeJob(n, round, earlier)
	if err != nil {
		return nil, fmt.Errorf("writing the job: %w", err)
	}
	img := r.result(rc.Builder.Image.Node)
	if img == nil {
		return nil, fmt.Errorf("image %s is not built", rc.Builder.Image.Node)
	}
	bn, key, keyDef, err := builderNode(n, img.image, job)
	if err != nil {
		return nil, err
	}
	res, err := r.runAction(ctx, bn, key, keyDef, roundLabel(round), job)
	if err != nil {
		return nil, err
	}
	// The package's files name the builder's outputs: this round's are its result.
	r.setResult(bn.Address, &nodeResult{step: res})
	tree, err := r.assemble(ctx, rc.Package.Files)
	if err != nil {
		return nil, fmt.Errorf("packaging the proposal: %w", err)
	}
	var base executors.Image
	if b := rc.Package.Base; b != nil {
		br := r.result(b.Node)
		if br == nil {
			return nil, fmt.Errorf("base %s is not built", b.Node)
		}
		base = br.image
	}
	// The builder's provenance is an input of the admission, under the round it made.
	steps := map[string]*cache.Result{fmt.Sprintf("%s#%d", bn.Address, round): res}
	return &admit.Candidate{Recipe: roundLabel(round), Tree: tree, Base: base, Steps: steps, Output: r.recordedOutput}, nil
}

// builderNode is the builder of capability n as a step node of its own (it is not in the
// graph), keyed by its definition, its image, what it mounts and this round's job: the
// same job for the same builder is the same action.
func builderNode(n *graph.Node, img executors.Image, job input) (*graph.Node, digest.Digest, []byte, error) {
	st := n.Capability.Reconstruct.Builder
	bn := &graph.Node{Address: lang.BuilderAddress(n.Capability.Name), Kind: graph.KindStep, Step: st, Range: st.DeclRange}
	mounts := map[string]string{job.mount.Target: job.dep.Digest}
	for target, a := range st.Mounts {
		d := a.Digest
		if a.Kind == lang.ArtifactInline {
			d = digest.FromBytes(a.Inline)
		}
		mounts[target] = string(d)
	}
	key, def, err := digest.Of(map[string]any{"kind": "builder", "v": graph.DefinitionVersion, "contract": n.Digest,
		"step": graph.StepFields(bn), "image": img.Digest, "mounts": mounts})
	if err != nil {
		return nil, "", nil, err
	}
	bn.Digest, bn.Definition = key, def
	return bn, key, def, nil
}

// counterexample is one earlier round's failure as the builder reads it in /job.
type counterexample struct {
	Round    int    `json:"round"`
	Suite    string `json:"suite,omitempty"` // "" when the round made no candidate
	Reason   string `json:"reason"`
	Case     string `json:"case,omitempty"`
	Input    string `json:"input,omitempty"`
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
}

// writeJob writes round's job and returns it as an input to mount read-only at /job:
//
//	contract.json                 the contract (the capability's definition)
//	schemas/input.json, output.json
//	cases/dev/*.json, cases/repair/*.json   the cases builders may see, as written
//	counterexamples/N.json        round N's failure, for every earlier round
//	round.json                    {"capability", "round", "candidates"}
//
// Never a sealed case: the dev and repair suites cannot match one (lang), disclosed sealed
// cases reach the builder only as the counterexample that disclosed them, and the job is
// refused, like any mount, if a file of it has a sealed case's content.
func (r *runner) writeJob(n *graph.Node, round int, earlier []evaluate.Rejection) (input, error) {
	capb := n.Capability
	files := map[string][]byte{"contract.json": n.Definition}
	if it := capb.Interface; it != nil && it.InputSchema != "" {
		files["schemas/input.json"] = []byte(it.InputSchema)
	}
	if it := capb.Interface; it != nil && it.OutputSchema != "" {
		files["schemas/output.json"] = []byte(it.OutputSchema)
	}
	for _, name := range []string{"dev", "repair"} {
		s := capb.Suites[name]
		if s == nil {
			continue
		}
		for i, f := range s.Files {
			b, err := os.ReadFile(filepath.Join(r.g.Config.Dir, filepath.FromSlash(f)))
			if err != nil {
				return input{}, err
			}
			at := path.Join("cases", name, path.Base(f))
			if _, dup := files[at]; dup { // two case files of one suite with the same name
				at = path.Join("cases", name, fmt.Sprintf("%d-%s", i, path.Base(f)))
			}
			files[at] = b
		}
	}
	for i, rej := range earlier {
		b, err := json.MarshalIndent(counterexample{Round: i + 1, Suite: rej.Suite, Reason: rej.Reason, Case: rej.Case,
			Input: rej.Input, Expected: rej.Expected, Got: rej.Got}, "", "  ")
		if err != nil {
			return input{}, err
		}
		files[fmt.Sprintf("counterexamples/%d.json", i+1)] = append(b, '\n')
	}
	b, err := json.Marshal(map[string]any{"capability": capb.Name, "round": round, "candidates": capb.Reconstruct.Budget.Candidates})
	if err != nil {
		return input{}, err
	}
	files["round.json"] = append(b, '\n')

	dir := filepath.Join(r.scratch, "job-"+workspace.NewID())
	defer os.RemoveAll(dir)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return input{}, err
		}
		if err := os.WriteFile(dst, files[p], 0o644); err != nil {
			return input{}, err
		}
	}
	d, man, err := r.ws.Store.PutDir(dir)
	if err != nil {
		return input{}, err
	}
	if err := r.refuseSealed("the job", man); err != nil {
		return input{}, err
	}
	src, err := r.ws.MaterializeTree(d)
	if err != nil {
		return input{}, err
	}
	return input{mount: executors.Mount{Source: src, Target: lang.JobDir},
		dep: provenance.Dependency{Name: lang.JobDir, URI: "foundry:" + n.Address + "#job", Digest: string(d)}}, nil
}
