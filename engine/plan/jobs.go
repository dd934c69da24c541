package plan

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/lang"
)

// JobIdentity is what names the reconstruction job of capability n: its project's name, contract digest,
// its target platform and the trust policy its candidates are promoted under (how many
// undisclosed sealed cases promotion needs, and whether earlier-suite pins are kept). The
// same in the plan and in every apply, so that an apply joins the job an earlier one opened.
func JobIdentity(g *graph.Graph, n *graph.Node) (id, target string, policy digest.Digest, err error) {
	p := g.Config.Project
	target = n.Capability.Target
	if target == "" {
		target = p.Platform
	}
	policy, _, err = digest.Of(map[string]any{"min_undisclosed_sealed": evaluate.MinUndisclosed(p), "keep_pins": p.KeepPins})
	if err != nil {
		return "", "", "", err
	}
	id, err = state.JobID(p.Name, n.Digest, target, policy)
	return id, target, policy, err
}

// RecordedJob is JobIdentity's ID of capability n's job, after giving it to the job db
// recorded for n under an earlier foundry's ID (state.AdoptJob), so that a job opened
// before job IDs named the project keeps its rounds and what it spent.
func RecordedJob(ctx context.Context, db *state.DB, g *graph.Graph, n *graph.Node) (id, target string, policy digest.Digest, err error) {
	id, target, policy, err = JobIdentity(g, n)
	if err != nil {
		return "", "", "", err
	}
	return id, target, policy, db.AdoptJob(ctx, id, n.Digest, target, policy)
}

// JobView is a reconstruction job as the plan shows it: recorded by an earlier apply, or
// the one apply will open.
type JobView struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "new" when no apply opened it yet
	// Rounds are the rounds dispatched so far; Probes and WallMillis what they spent.
	Rounds     int     `json:"rounds"`
	Probes     int     `json:"probes"`
	WallMillis int64   `json:"wall_ms"`
	Spend      float64 `json:"spend"`
	// Next says how to go on when the job is exhausted and the reconstruct block's budget
	// is still spent: apply reopens such a job only under a raised budget.
	Next string `json:"next,omitempty"`
}

// spentUnder says which part of budget b the job's rounds have spent ("" when none is):
// an exhausted job with a part still spent ends again as soon as apply reopens it.
func (v *JobView) spentUnder(b lang.ReconstructBudget) string {
	switch {
	case v.Rounds >= b.Candidates:
		return fmt.Sprintf("%d of %d candidates", v.Rounds, b.Candidates)
	case v.Probes >= b.Probes:
		return fmt.Sprintf("%d of %d probes", v.Probes, b.Probes)
	case time.Duration(v.WallMillis)*time.Millisecond >= b.Wall:
		return fmt.Sprintf("%dms of %s wall", v.WallMillis, b.Wall)
	case v.Spend > b.Spend:
		return fmt.Sprintf("%g of %g spend", v.Spend, b.Spend)
	}
	return ""
}

// jobOf looks up the job of capability n in db.
func jobOf(ctx context.Context, db *state.DB, g *graph.Graph, n *graph.Node) (*JobView, error) {
	id, _, _, err := RecordedJob(ctx, db, g, n)
	if err != nil {
		return nil, err
	}
	v := &JobView{ID: id, Status: "new"}
	j, err := db.Job(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	rounds, err := db.Rounds(ctx, id)
	if err != nil {
		return nil, err
	}
	var used state.Usage
	for _, r := range rounds {
		used = used.Add(r.Used)
	}
	v.Status, v.Rounds, v.Probes, v.WallMillis, v.Spend = string(j.Status), len(rounds), used.Probes, used.Wall.Milliseconds(), used.Spend
	if rc := n.Capability.Reconstruct; j.Status == state.JobExhausted && rc != nil {
		if spent := v.spentUnder(rc.Budget); spent != "" {
			at := ""
			if rc.Range.Filename != "" {
				at = fmt.Sprintf(" (%s:%d)", rc.Range.Filename, rc.Range.Start.Line)
			}
			v.Next = fmt.Sprintf("exhausted: its budget is spent (%s) with no admission; to go on, raise the budget of the reconstruct block%s (apply reopens the job, keeping what it spent), or provide %s by a recipe or an admitted version; foundry jobs show %s says how each round failed", spent, at, n.Address, j.ID)
		}
	}
	return v, nil
}

// budgetOf is the plan's view of a reconstruct block's budget.
func budgetOf(b lang.ReconstructBudget) Budget {
	return Budget{Candidates: b.Candidates, Probes: b.Probes, Wall: b.Wall.String(), ScratchBytes: b.Scratch, Spend: b.Spend}
}
