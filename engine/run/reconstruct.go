package run

import (
	"context"
	"errors"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
)

// rounds is the apply as engine/reconstruct's rounds see it (reconstruct.Apply): a
// capability the plan marks reconstruct is settled by a reconstruct.Reconstructor, whose
// rounds run their builder and build as steps are run here (runAction), assemble their
// candidates as packages are, and hand them to the same refusal and admission as a
// recipe's candidates (refuseQuarantined, admitCandidate).
type rounds struct{ r *runner }

var _ reconstruct.Apply = rounds{}

func (h rounds) Image(addr string) (executors.Image, bool) {
	if res := h.r.result(addr); res != nil {
		return res.image, true
	}
	return executors.Image{}, false
}

func (h rounds) Tree(addr string) digest.Digest {
	if res := h.r.result(addr); res != nil {
		return res.tree
	}
	return ""
}

func (h rounds) Run(ctx context.Context, n *graph.Node, note string, in ...reconstruct.Input) (*cache.Result, bool, error) {
	r := h.r
	res, hit, err := r.ws.Cache.Lookup(ctx, n.Digest)
	if err != nil {
		return nil, false, err
	}
	if hit && r.usable(res) {
		r.emit(event.Event{Type: "node_cached", Node: n.Address, Action: n.Digest})
		return res, true, nil
	}
	extra := make([]input, len(in))
	for i, x := range in {
		extra[i] = input{mount: x.Mount, dep: x.Dep}
	}
	res, err = r.runAction(ctx, n, n.Digest, n.Definition, note, extra...)
	var se *StepError
	if errors.As(err, &se) {
		return nil, false, &reconstruct.RunError{Err: err, NotRun: se.NotRun, CPU: se.CPU, PeakMemory: se.PeakMemory,
			Stdout: se.Stdout, Stderr: se.Stderr, Tail: se.LogTail}
	}
	return res, false, err
}

// Assemble records steps as the results of their nodes, which are not in the graph, for
// the package's files to name.
func (h rounds) Assemble(ctx context.Context, files map[string]*lang.Artifact, steps map[string]*cache.Result) (digest.Digest, error) {
	for a, res := range steps {
		h.r.setResult(a, &nodeResult{step: res})
	}
	return h.r.assemble(ctx, files)
}

func (h rounds) RefuseSealed(what string, man *digest.Manifest) error {
	return h.r.refuseSealed(what, man)
}

func (h rounds) Refuse(ctx context.Context, n *graph.Node, c *admit.Candidate) (*evaluate.Rejection, error) {
	return h.r.refuseQuarantined(ctx, n, c)
}

func (h rounds) Admit(ctx context.Context, n *graph.Node, c *admit.Candidate, tests [][]byte) (*evaluate.Rejection, error) {
	return h.r.admitCandidate(ctx, n, c, tests)
}
