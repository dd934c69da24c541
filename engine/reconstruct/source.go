package reconstruct

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// A ProposalSource proposes the candidates of a job, a round at a time. The command
// builder of a reconstruct block is one (commandBuilder); a source that waits for proposals
// sent from outside, by a person or a model over MCP, is another (externalSource). Whatever
// it proposes is untrusted: it becomes a candidate only through the package block, and is
// admitted only by the evaluator.
type ProposalSource interface {
	// Name is what a round records as its source.
	Name() string
	// Who says who proposes, in a round's progress event ("the builder").
	Who() string
	// Run is the run in the sandbox that makes the source's proposals, when one does: the
	// name a round keeps its logs under, and its time limit, the most a proposal may take.
	// ok is false for a source that runs nothing, which only the job's wall time bounds.
	Run() (name string, limit time.Duration, ok bool)
	// Propose makes a round's proposal from its brief. A *RunError (not NotRun) is a round
	// without a proposal, spent; any other error means the source cannot run, and the job
	// is unresolved. It must stop when ctx is done: the job's wall time is its deadline.
	Propose(ctx context.Context, b Brief) (*Proposal, error)
}

// Proposal is a source's proposal for a round.
type Proposal struct {
	// Result holds the proposal's files at the builder's declared output paths, in the
	// store, as a step's result does: the package block names them. Its attestations are
	// the proposal's provenance.
	Result *cache.Result
	// Key is the cache key of the run that made it ("" for a source that runs nothing).
	Key digest.Digest
	// Usage is what making it used; Cached is set when the builder's run was taken from the
	// action cache (an apply that died after it finished ran it), its usage then from the
	// run's record.
	Usage  state.Usage
	Cached bool
}

// commandBuilder is the builder of a reconstruct block, run as a sandboxed step. The same
// job for the same builder is the same action: a round an apply died in after the builder
// finished takes its result from the action cache.
type commandBuilder struct{ *job }

func (b commandBuilder) Name() string { return lang.BuilderAddress(b.n.Capability.Name) }

func (commandBuilder) Who() string { return "the builder" }

func (b commandBuilder) Run() (string, time.Duration, bool) {
	return "builder", graph.EffectiveLimits(b.block.Builder.Limits).Time, true
}

func (b commandBuilder) Propose(ctx context.Context, br Brief) (*Proposal, error) {
	ap, st := b.rc.Apply, b.block.Builder
	if b.dossier != nil {
		// The builder may ask the references as an oracle: what it writes at OracleDir is
		// collected when it writes anything (the round answers it), never part of the proposal.
		s := *st
		s.Optional = []string{lang.OracleDir}
		st = &s
	}
	img, ok := ap.Image(st.Image.Node)
	if !ok {
		return nil, fmt.Errorf("image %s is not built", st.Image.Node)
	}
	// The provenance names the job and the round by the URI of what /job held.
	ins := []Input{{Mount: executors.Mount{Source: br.Dir, Target: lang.JobDir},
		Dep: provenance.Dependency{Name: lang.JobDir, URI: roundURI(b.n.Address, br.Job, br.Round), Digest: string(br.Tree)}}}
	refs, err := b.inspected()
	if err != nil {
		return nil, err
	}
	ins = append(ins, refs...)
	extra := map[string]digest.Digest{}
	for _, in := range ins {
		extra[in.Mount.Target] = digest.Digest(in.Dep.Digest)
	}
	if b.dossier != nil {
		// Named in the provenance, mounted nowhere: the dossier the round ran under, which
		// is in the builder's key too, as what its provenance names must be.
		dep := b.dossier.Dependency()
		ins = append(ins, Input{Dep: dep})
		extra[dep.Name] = b.dossier.Digest
	}
	bn, err := graph.ReconstructStep(b.n, st, img.Digest, extra, ap.Tree)
	if err != nil {
		return nil, err
	}
	res, cached, err := ap.Run(ctx, bn, roundLabel(br.Round), ins...)
	if err != nil {
		return nil, err
	}
	p := &Proposal{Result: res, Key: bn.Digest, Cached: cached,
		Usage: state.Usage{CPU: res.CPU, PeakMemory: res.PeakMemory, BuilderWall: res.Duration}}
	if p.Usage.Written, err = written(b.rc.Workspace, res); err != nil {
		return nil, err
	}
	return p, nil
}

// inspected are the references the builder may read (inspect = true), each its image's
// root mounted read-only at lang.ReferenceDir/NAME, keyed and named in the provenance by
// the tree it holds; a reference the builder may not inspect is not in its sandbox at all.
// Its files are checked for sealed cases' content, as every tree shown to a builder is.
func (b commandBuilder) inspected() ([]Input, error) {
	var ins []Input
	refs := b.block.References
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		r := refs[name]
		if !r.Inspect {
			continue
		}
		img, ok := b.rc.Apply.Image(r.Image.Node)
		if !ok || img.Rootfs == "" {
			return nil, fmt.Errorf("reference %s: image %s is not built (or has no unpacked root)", name, r.Image.Node)
		}
		man, tree, err := digest.Dir(img.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("reference %s: reading its files: %w", name, err)
		}
		target := lang.ReferenceDir + "/" + name
		if err := b.rc.Apply.RefuseSealed("reference "+name, man); err != nil {
			return nil, err
		}
		ins = append(ins, Input{Mount: executors.Mount{Source: img.Rootfs, Target: target, Digest: string(tree)},
			Dep: provenance.Dependency{Name: target, URI: "foundry:" + r.Image.Node + "?reference=" + name + "&image=" + img.Digest, Digest: string(tree)}})
	}
	return ins, nil
}

// written is the number of bytes a run's outputs hold: a file's size, a tree's files'.
func written(ws *workspace.Workspace, res *cache.Result) (int64, error) {
	var n int64
	for _, o := range res.Outputs {
		if o.Kind != cache.Tree {
			n += o.Size
			continue
		}
		m, err := ws.Store.ReadManifest(o.Digest)
		if err != nil {
			return 0, err
		}
		for _, e := range m.Entries {
			n += e.Size
		}
	}
	return n, nil
}

// ExternalSource is the name rounds record for proposals sent from outside the job: by a
// person with foundry jobs propose, or by a model with the MCP propose tool.
const ExternalSource = "proposals"

// externalSource is the proposal source of a reconstruct block with a proposals block:
// each round waits, within the job's wall time, for a proposal sent for it
// (SubmitProposal), and takes the files its proposals block names from that tree.
type externalSource struct{ *job }

func (externalSource) Name() string { return ExternalSource }

func (externalSource) Who() string { return "a proposal sent from outside" }

func (externalSource) Run() (string, time.Duration, bool) { return "", 0, false }

// pollEvery is how often a waiting round looks for its proposal in the state database.
const pollEvery = 200 * time.Millisecond

func (s externalSource) Propose(ctx context.Context, br Brief) (*Proposal, error) {
	s.rc.emit(event.Event{Type: "reconstruct_waiting", Node: s.n.Address, Job: br.Job,
		Message: fmt.Sprintf("round %d waits for a proposal: foundry jobs brief %s shows what to propose from, foundry jobs propose %s DIR sends one (or the MCP propose tool)", br.Round, br.Job, br.Job)})
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		p, ok, err := s.rc.Workspace.State.ProposalFor(ctx, br.Job, br.Round)
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
func (s externalSource) proposalOf(p state.Proposal) (*Proposal, error) {
	m, err := s.rc.Workspace.Store.ReadManifest(p.Tree)
	if err != nil {
		return nil, fmt.Errorf("the proposal for round %d: %w", p.N, err)
	}
	outs := s.block.Proposals.Outputs
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
			return nil, &RunError{Err: fmt.Errorf("%s: the proposal %s holds no file %s (it must hold %s)", ExternalSource, p.Tree.Short(), out, strings.Join(outs, ", "))}
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
