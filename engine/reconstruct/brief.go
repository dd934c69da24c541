package reconstruct

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

// Brief is what a proposal source is given for a round: the job's files, read-only.
type Brief struct {
	Capability string
	Job        string
	Round      int
	// Tree is the digest of the job's files (what /job holds), Dir where they are
	// materialized on the host, read-only.
	Tree digest.Digest
	Dir  string
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
	// Shrunk is the smallest input found that fails the same way (shrunk_failure), shrunk
	// from the case whose content digest is original.
	Shrunk        string `json:"shrunk,omitempty"`
	ShrunkFailure string `json:"shrunk_failure,omitempty"`
	Original      string `json:"original,omitempty"`
}

// writeBrief writes the job's files for round and returns its brief, the files to mount
// read-only at /job:
//
//	contract.json                 the contract (the capability's definition)
//	schemas/input.json, output.json
//	cases/dev/*.json, cases/repair/*.json   the cases builders may see, as written
//	counterexamples/N.json        round N's failure, for every earlier round
//	oracle/round-N.jsonl          what round N's builder asked the references as an oracle, and their answers
//	round.json                    {"capability", "job", "round", "candidates"}, and "oracle" (where to
//	                              write requests, to which references) when a reference allows observe
//
// Never a sealed case: the dev and repair suites cannot match one (lang), disclosed sealed
// cases reach the builder only as the counterexample that disclosed them, and the job is
// refused, like any mount, if a file of it has a sealed case's content.
func (j *job) writeBrief(ctx context.Context, round int) (Brief, error) {
	capb, ws := j.n.Capability, j.rc.Workspace
	files := map[string][]byte{"contract.json": j.n.Definition}
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
			b, err := os.ReadFile(filepath.Join(j.rc.Graph.Config.Dir, filepath.FromSlash(f)))
			if err != nil {
				return Brief{}, err
			}
			at := path.Join("cases", name, path.Base(f))
			if _, dup := files[at]; dup { // two case files of one suite with the same name
				at = path.Join("cases", name, fmt.Sprintf("%d-%s", i, path.Base(f)))
			}
			files[at] = b
		}
		// Generated cases: their seed, and their inputs one per line (compact), as the
		// evaluator runs them. A candidate that memorises them gains nothing on the sealed
		// batch, drawn from a fresh seed.
		if g := s.Generate; g != nil {
			inputs, err := evaluate.GeneratedInputs(capb, name)
			if err != nil {
				return Brief{}, err
			}
			b, err := json.Marshal(map[string]any{"seed": g.Seed, "count": g.Count, "expect": "exit 0 with output the contract allows, or a declared error"})
			if err != nil {
				return Brief{}, err
			}
			files[path.Join("cases", name, "generated.json")] = append(b, '\n')
			var lines []byte
			for _, in := range inputs {
				lines = append(append(lines, in...), '\n')
			}
			files[path.Join("cases", name, "generated.jsonl")] = lines
		}
	}
	for i, rej := range j.rep.Rounds {
		b, err := json.MarshalIndent(counterexample{Round: i + 1, Suite: rej.Suite, Reason: rej.Reason, Case: rej.Case,
			Input: rej.Input, Expected: rej.Expected, Got: rej.Got, Shrunk: rej.Shrunk, ShrunkFailure: rej.ShrunkFailure, Original: string(rej.Original)}, "", "  ")
		if err != nil {
			return Brief{}, err
		}
		files[fmt.Sprintf("counterexamples/%d.json", i+1)] = append(b, '\n')
	}
	rounds, err := ws.State.Rounds(ctx, j.state.ID)
	if err != nil {
		return Brief{}, err
	}
	for _, r := range rounds {
		if r.N >= round || r.Oracle == nil {
			continue
		}
		b, err := ws.Store.Get(r.Oracle.Answers)
		if err != nil {
			return Brief{}, fmt.Errorf("round %d's oracle answers: %w", r.N, err)
		}
		files[fmt.Sprintf("oracle/round-%d.jsonl", r.N)] = b
	}
	info := map[string]any{"capability": capb.Name, "job": j.state.ID, "round": round, "candidates": j.block.Budget.Candidates}
	if j.dossier != nil {
		var observable []string
		for _, r := range j.dossier.References {
			if r.Observe {
				observable = append(observable, r.Name)
			}
		}
		if len(observable) > 0 {
			info["oracle"] = map[string]any{"requests": lang.OracleDir + "/REFERENCE/ID.json", "references": observable}
		}
	}
	b, err := json.Marshal(info)
	if err != nil {
		return Brief{}, err
	}
	files["round.json"] = append(b, '\n')

	dir := filepath.Join(j.rc.Scratch, "job-"+workspace.NewID())
	defer os.RemoveAll(dir)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Brief{}, err
		}
		if err := os.WriteFile(dst, files[p], 0o644); err != nil {
			return Brief{}, err
		}
	}
	d, man, err := ws.Store.PutDir(dir)
	if err != nil {
		return Brief{}, err
	}
	if err := j.rc.Apply.RefuseSealed("the job", man); err != nil {
		return Brief{}, err
	}
	src, err := ws.MaterializeTree(d)
	if err != nil {
		return Brief{}, err
	}
	return Brief{Capability: capb.Name, Job: j.state.ID, Round: round, Tree: d, Dir: src}, nil
}

// JobBrief is what a proposer of a job reads for the round that waits for a proposal: the
// files of its brief (never a sealed case, a key or the state database: see writeBrief).
type JobBrief struct {
	Job   string
	Round int
	Tree  digest.Digest
	Files map[string][]byte // by path in the brief: contract.json, cases/dev/…, counterexamples/…
}

// WaitingBrief returns the brief of job's round that waits for a proposal from outside,
// or an error saying that none does.
func WaitingBrief(ctx context.Context, ws *workspace.Workspace, job string) (*JobBrief, error) {
	n, tree, ok, err := ws.State.Waiting(ctx, job, ExternalSource)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no round of job %s waits for a proposal: a round waits while an apply runs it (see foundry jobs show %s)", job, job)
	}
	m, err := ws.Store.ReadManifest(tree)
	if err != nil {
		return nil, err
	}
	b := &JobBrief{Job: job, Round: n, Tree: tree, Files: map[string][]byte{}}
	for _, e := range m.Entries {
		if e.Type != digest.TypeFile {
			continue
		}
		data, err := ws.Store.Get(e.Digest)
		if err != nil {
			return nil, fmt.Errorf("the brief of job %s: %s: %w", job, e.Path, err)
		}
		b.Files[path.Clean(e.Path)] = data
	}
	return b, nil
}
