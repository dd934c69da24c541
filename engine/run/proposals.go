package run

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

// ExternalSource is the name rounds record for proposals sent from outside the job: by a
// person with foundry jobs propose, or by a model with the MCP propose tool.
const ExternalSource = "proposals"

// externalSource is the proposal source of a reconstruct block with a proposals block:
// each round waits, within the job's wall time, for a proposal sent for it
// (SubmitProposal), and takes the files its proposals block names from that tree.
type externalSource struct {
	r *runner
	n *graph.Node
}

func (s *externalSource) Name() string { return ExternalSource }

// pollEvery is how often a waiting round looks for its proposal in the state database.
const pollEvery = 200 * time.Millisecond

func (s *externalSource) Propose(ctx context.Context, br Brief) (*Proposal, error) {
	r := s.r
	r.emit(event.Event{Type: "reconstruct_waiting", Node: s.n.Address, Job: br.Job,
		Message: fmt.Sprintf("round %d waits for a proposal: foundry jobs brief %s shows what to propose from, foundry jobs propose %s DIR sends one (or the MCP propose tool)", br.Round, br.Job, br.Job)})
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		p, ok, err := r.ws.State.ProposalFor(ctx, br.Job, br.Round)
		if err != nil {
			return nil, err
		}
		if ok {
			return s.proposalOf(p)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// proposalOf is the proposal p sent, as a step's result holding the files the proposals
// block names. A proposal without one of them spends its round.
func (s *externalSource) proposalOf(p state.Proposal) (*Proposal, error) {
	m, err := s.r.ws.Store.ReadManifest(p.Tree)
	if err != nil {
		return nil, fmt.Errorf("the proposal for round %d: %w", p.N, err)
	}
	outs := s.n.Capability.Reconstruct.Proposals.Outputs
	res := &cache.Result{Action: p.Tree, Started: p.Submitted, Finished: p.Submitted}
	u := state.Usage{Spend: p.Spend}
	if p.Source == "cli" {
		u.Interventions = 1 // a person made it
	}
	for _, out := range outs {
		var found *digest.Entry
		for i, e := range m.Entries {
			if e.Path == strings.TrimPrefix(out, "/") && e.Type == digest.TypeFile {
				found = &m.Entries[i]
			}
		}
		if found == nil {
			return nil, &StepError{Node: ExternalSource, Reason: fmt.Sprintf("the proposal %s holds no file %s (it must hold %s)", p.Tree.Short(), out, strings.Join(outs, ", "))}
		}
		mode := uint32(0o644) // normalized as a step's file output is
		if found.Mode&0o111 != 0 {
			mode = 0o755
		}
		res.Outputs = append(res.Outputs, cache.Output{Path: out, Kind: cache.File, Digest: found.Digest, Size: found.Size, Mode: mode})
		u.Written += found.Size
	}
	return &Proposal{Result: res, Usage: u}, nil
}

// JobBrief is what a proposer of a job reads for the round that waits for a proposal: the
// files of its brief (never a sealed case, a key or the state database: see writeJob).
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

// SubmitProposal sends the files under dir as the proposal for job's waiting round, from
// source ("cli" for a person, "mcp" for a model) by by, costing spend. It returns the
// round it was sent for. The apply running that round takes it from there: the proposal is
// untrusted, and becomes a candidate only through the package block and an evaluation.
func SubmitProposal(ctx context.Context, ws *workspace.Workspace, job, dir, source, by string, spend float64) (int, error) {
	tree, _, err := ws.Store.PutDir(dir)
	if err != nil {
		return 0, fmt.Errorf("storing the proposal: %w", err)
	}
	return ws.State.SubmitProposal(ctx, state.Proposal{Job: job, Tree: tree, Source: source, By: by, Spend: spend}, ExternalSource)
}
