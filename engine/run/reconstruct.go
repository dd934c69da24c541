package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// reconstruct settles capability n, which the plan found no admitted version and no
// feasible recipe for, with its reconstruct block (spec/capability.md §5a), through its
// job: one per contract, target and trust policy (plan.JobIdentity), opened by the first
// apply that needs it and joined by every later one. Each round, while the budget lasts:
// the builder runs in the sandbox with the job mounted read-only at /job (contract,
// schemas, dev and repair cases, and every earlier round's failure as a counterexample);
// its declared outputs are packaged on the base; the candidate is evaluated and admitted
// exactly as a recipe's is (tryCandidate). A rejection goes to the next round's job.
//
// The job and its rounds are in the state database, and each part of a round is charged
// as it ends: an apply killed at any point resumes the job where it stood (a finished round
// is not run again, the round it died in is dispatched again with what it spent so far),
// and the sealed-once rule and the publish outbox see to the rest.
func (r *runner) reconstruct(ctx context.Context, n *graph.Node) (string, error) {
	jb, err := r.openJob(ctx, n)
	if err != nil {
		return "failed", fmt.Errorf("opening the reconstruction job: %w", err)
	}
	var src ProposalSource = &commandBuilder{r: r, n: n}
	if n.Capability.Reconstruct.Proposals != nil {
		src = &externalSource{r: r, n: n}
	}
	return r.runJob(ctx, n, jb, src)
}

// Faults of a reconstruction round, in the order a round passes them (see FaultInjector;
// the builder's run passes a step's, its evaluation evaluate.FaultBeforeSealed and
// FaultAfterSealed, its publish admit.FaultAfterDispatch).
const (
	FaultRoundProposed  = "round-proposed"  // the proposal is made and charged, not yet evaluated
	FaultRoundEvaluated = "round-evaluated" // the evaluation is charged with its outcome: a rejected round has ended with it, a passing candidate is not yet admitted
	FaultRoundAdmitted  = "round-admitted"  // the candidate is admitted and published, its round ended; the job's status not yet written
	FaultRoundFinished  = "round-finished"  // a round ended without an admission; the next not yet dispatched
)

// openJob opens capability n's job, or joins the one an earlier apply opened, with the
// budget its reconstruct block says now and the nodes that wait for it. A job that ended
// (exhausted, unresolved, or admitted by an apply whose artifact the plan did not find) is
// reopened: whether anything is left to do is the budget's to say, and what it spent stays.
func (r *runner) openJob(ctx context.Context, n *graph.Node) (state.Job, error) {
	id, target, policy, err := plan.JobIdentity(r.g, n)
	if err != nil {
		return state.Job{}, err
	}
	var waiting []string
	for _, a := range r.g.Order {
		if slices.Contains(r.g.Nodes[a].Deps, n.Address) {
			waiting = append(waiting, a)
		}
	}
	b := n.Capability.Reconstruct.Budget
	jb, _, err := r.ws.State.OpenJob(ctx, state.Job{ID: id, Capability: n.Capability.Name, Contract: n.Digest, Target: target, Policy: policy,
		Budget:  state.JobBudget{Candidates: b.Candidates, Probes: b.Probes, Wall: b.Wall, Scratch: b.Scratch, Spend: b.Spend},
		Waiting: waiting})
	if err != nil {
		return state.Job{}, err
	}
	if jb.Status != state.JobOpen {
		if err := r.ws.State.SetJobStatus(ctx, jb.ID, state.JobOpen, "", ""); err != nil {
			return state.Job{}, err
		}
		jb.Status = state.JobOpen
	}
	return jb, nil
}

// jobAdmittedElsewhere closes capability n's job, if it has one still open, now that the
// registry holds an admitted version: the apply that admitted it died before it recorded
// the admission (or another project's admission reached the shared registry first). A
// round it left running is closed as admitted, with the pinned tree as its candidate.
func (r *runner) jobAdmittedElsewhere(ctx context.Context, n *graph.Node, pin *admit.Admitted) error {
	id, _, _, err := plan.JobIdentity(r.g, n)
	if err != nil {
		return err
	}
	jb, err := r.ws.State.Job(ctx, id)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && jb.Status == state.JobAdmitted) {
		return nil
	}
	if err != nil {
		return err
	}
	rounds, err := r.ws.State.Rounds(ctx, id)
	if err != nil {
		return err
	}
	for _, rd := range rounds {
		if rd.Status == state.RoundRunning {
			if err := r.ws.State.FinishRound(ctx, id, rd.N, state.RoundAdmitted, "", pin.Tree, nil); err != nil {
				return err
			}
		}
	}
	return r.ws.State.SetJobStatus(ctx, id, state.JobAdmitted, "found admitted in the registry as "+pin.Ref, pin.Ref)
}

// runJob runs job jb's rounds for capability n, proposals from src, until a candidate is
// admitted ("built"), the budget is spent (exhausted) or the job cannot go on (unresolved).
func (r *runner) runJob(ctx context.Context, n *graph.Node, jb state.Job, src ProposalSource) (string, error) {
	db := r.ws.State
	rounds, err := db.Rounds(ctx, jb.ID)
	if err != nil {
		return "failed", err
	}
	rep := &ReconstructionError{Capability: n.Address, Job: jb.ID, Budget: jb.Budget}
	var resume state.Round // a round an earlier apply dispatched and did not finish
	for _, rd := range rounds {
		rep.Used = rep.Used.Add(rd.Used)
		switch rd.Status {
		case state.RoundRunning:
			resume = rd
		case state.RoundFailed, state.RoundRejected:
			var rej evaluate.Rejection
			if err := json.Unmarshal(rd.Failure, &rej); err != nil {
				return "failed", fmt.Errorf("job %s: round %d's failure: %w", jb.ID, rd.N, err)
			}
			rep.Rounds = append(rep.Rounds, rej)
		}
	}
	dispatched := len(rounds)
	for {
		round := resume.N
		if round == 0 {
			round = dispatched + 1
			if why, err := r.overBudget(ctx, jb, rep.Used, round); err != nil {
				return "failed", err
			} else if why != "" {
				return r.endJob(ctx, n, rep, state.JobExhausted, why)
			}
		}
		if why := r.cannotPromote(ctx, n); why != "" {
			return r.endJob(ctx, n, rep, state.JobUnresolved, why)
		}
		if err := db.StartRound(ctx, jb.ID, round, src.Name(), r.runID); err != nil {
			return "failed", err
		}
		kind, err := r.runRound(ctx, n, jb, src, round, resume, rep)
		resume, dispatched = state.Round{}, max(dispatched, round)
		if kind == "" && err == nil {
			r.fault(FaultRoundFinished, n.Address)
			continue
		}
		var end *jobEnd
		if errors.As(err, &end) {
			return r.endJob(ctx, n, rep, end.status, end.why)
		}
		return kind, err
	}
}

// jobEnd is how runRound says the job cannot go on.
type jobEnd struct {
	status state.JobStatus
	why    string
}

func (e *jobEnd) Error() string { return e.why }

// runRound runs round of job jb: a proposal, charged; its candidate, evaluated and charged.
// Each part is reserved before it is dispatched and charged when it ends, releasing the
// reservation. prior is the round as an earlier apply left it when it died in it (zero for a
// round dispatched first now): a part it charged is not charged again, a reservation it left
// open is spent, and a candidate it evaluated is settled from the signed results, never
// evaluated again. It returns "" to go on to the next round (the round failed or was
// rejected, and rep has its failure), "built" once the candidate is admitted, or an error: a
// *jobEnd when the job cannot go on, any other when the apply cannot (the round then stays
// running, for the next apply to resume).
func (r *runner) runRound(ctx context.Context, n *graph.Node, jb state.Job, src ProposalSource, round int, prior state.Round, rep *ReconstructionError) (string, error) {
	db := r.ws.State
	who := "the builder"
	if _, ok := src.(*externalSource); ok {
		who = "a proposal sent from outside"
	}
	r.emit(event.Event{Type: "reconstruct_round", Node: n.Address, Recipe: roundLabel(round), Job: jb.ID,
		Message: fmt.Sprintf("round %d of %d: %s proposes a candidate from %d counterexample(s)", round, jb.Budget.Candidates, who, len(rep.Rounds))})
	wctx := context.WithoutCancel(ctx)
	// charge charges u, what part of the round used, releasing its reservation; with end,
	// the round ends in the same transaction.
	charge := func(part state.Part, u state.Usage, end *state.RoundEnd) error {
		rep.Used = rep.Used.Add(u)
		r.reconWall.Add(int64(u.Wall))
		return db.Charge(wctx, jb.ID, round, part, u, end)
	}
	// fail ends the round with rej as its failure, charging u to part.
	fail := func(part state.Part, u state.Usage, status state.RoundStatus, builder, candidate digest.Digest, rej evaluate.Rejection) (string, error) {
		b, err := json.Marshal(rej)
		if err != nil {
			return "failed", err
		}
		rep.Rounds = append(rep.Rounds, rej)
		return "", charge(part, u, &state.RoundEnd{Status: status, Builder: builder, Candidate: candidate, Failure: b})
	}

	started := time.Now()
	brief, err := r.writeJob(n, jb.ID, round, rep.Rounds)
	if err != nil {
		return "failed", fmt.Errorf("%s: writing the job: %w", roundLabel(round), err)
	}
	if err := db.SetBrief(ctx, jb.ID, round, brief.Tree); err != nil {
		return "failed", err
	}
	left := r.wallLeft(jb, rep.Used)
	// The proposal is reserved before it is dispatched: the wall time left, and no more than
	// a command builder may run (its time limit). A round whose apply died in its proposal
	// keeps that apply's reservation, and what the dead apply spent (from its reservation to
	// this dispatch, no more than it reserved) is charged with this one.
	rc := n.Capability.Reconstruct
	reserve := left
	if _, ok := src.(*commandBuilder); ok {
		most := graph.EffectiveLimits(rc.Builder.Limits).Time
		if rc.Build != nil {
			most += graph.EffectiveLimits(rc.Build.Limits).Time
		}
		reserve = min(left, time.Since(started)+most)
	}
	var res state.Reservation
	if !prior.ProposalCharged {
		if res, err = db.Reserve(wctx, jb.ID, round, state.Reservation{Part: state.PartProposal, Wall: reserve, At: started}); err != nil {
			return "failed", err
		}
	}
	// earlier adds to u what a dispatch of the proposal that an apply died in spent.
	earlier := func(u state.Usage) state.Usage {
		if res.Part != "" && res.At.Before(started) {
			u = u.Add(res.Spent(started))
		}
		return u
	}
	// ran is what the proposal part used when it ended without a candidate: its wall time,
	// and what the runs that ended (the builder's, the build's) used.
	var proposed *Proposal  // set once the build runs over it
	var built *cache.Result // the build's run over the proposal, with a build block
	var builtCached bool
	ran := func(err error) state.Usage {
		d := time.Since(started)
		u := state.Usage{Wall: d, BuilderWall: d}
		if p := proposed; p != nil {
			u = p.Usage
			u.Wall = d
			u.BuildWall = max(d-p.Usage.BuilderWall, 0)
		}
		var se *StepError
		if errors.As(err, &se) {
			u.CPU += se.CPU
			u.PeakMemory = max(u.PeakMemory, se.PeakMemory)
		}
		return earlier(u)
	}
	// The proposal and, with a build block, the build over it, within the wall time left.
	pctx, cancel := context.WithTimeoutCause(ctx, left, errWallSpent)
	p, err := src.Propose(pctx, brief)
	if _, ok := src.(*commandBuilder); ok {
		if lerr := r.roundLog(wctx, jb.ID, round, "builder", resultOf(p), err); lerr != nil {
			cancel()
			return "failed", lerr
		}
	}
	building := false
	if err == nil && rc.Build != nil {
		building, proposed = true, p
		built, builtCached, err = r.buildProposal(pctx, n, jb.ID, round, p)
		if lerr := r.roundLog(wctx, jb.ID, round, "build", built, err); lerr != nil {
			cancel()
			return "failed", lerr
		}
	}
	cancel()
	var se *StepError
	switch {
	case err != nil && ctx.Err() != nil:
		// The reservation stays open: the apply that resumes the round counts it as spent.
		return "failed", interruptedError(ctx)
	case err != nil && errors.Is(context.Cause(pctx), errWallSpent):
		if _, ferr := fail(state.PartProposal, ran(err), state.RoundFailed, "", "", r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round), Reason: "stopped: " + errWallSpent.Error()})); ferr != nil {
			return "failed", ferr
		}
		return "failed", &jobEnd{state.JobExhausted, wallSpentWhy(jb)}
	case building && errors.As(err, &se) && !se.NotRun:
		// The build failed over the proposal: a round spent, as a failing builder's, and
		// the next builder reads why.
		return fail(state.PartProposal, ran(err), state.RoundFailed, p.Key, "", r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round),
			Reason: fmt.Sprintf("the build over the proposal failed: %v%s", err, tailOf(se))}))
	case errors.As(err, &se) && !se.NotRun:
		// The builder failed, or made no proposal: a round spent, nothing to evaluate.
		return fail(state.PartProposal, ran(err), state.RoundFailed, "", "", r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round), Reason: err.Error()}))
	case err != nil:
		if _, ferr := fail(state.PartProposal, ran(err), state.RoundFailed, "", "", r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round), Reason: err.Error()})); ferr != nil {
			return "failed", ferr
		}
		what := src.Name()
		if building {
			what = lang.BuildAddress(n.Capability.Name)
		}
		return "failed", &jobEnd{state.JobUnresolved, fmt.Sprintf("%s cannot run: %v", what, err)}
	}
	c, err := r.candidateOf(ctx, n, jb.ID, round, p, built)
	if err != nil {
		return "failed", fmt.Errorf("%s: packaging the proposal: %w", roundLabel(round), err)
	}
	u := p.Usage
	if built != nil {
		// The build's run is the proposal part's too, as its record says: when it ran now, or
		// when the builder's run was taken from the cache too (the apply that ran both died
		// before charging them). A build taken from the cache after a fresh builder run (a
		// proposal built before) ran in no part of this round: only its output is counted.
		bw, err := r.written(built)
		if err != nil {
			return "failed", err
		}
		bu := state.Usage{Written: bw}
		if !builtCached || p.Cached {
			bu.CPU, bu.PeakMemory, bu.BuildWall = built.CPU, built.PeakMemory, built.Duration
		}
		u = u.Add(bu)
	}
	if !prior.ProposalCharged {
		if p.Cached {
			// The builder ran in an apply that died before charging it: its record says what
			// it used, in place of that apply's reservation (and the build's, if it ran then).
			u.Wall = p.Usage.BuilderWall + time.Since(started)
			if builtCached {
				u.Wall += built.Duration
			}
		} else {
			u.Wall = time.Since(started)
			u = earlier(u)
		}
		if err := charge(state.PartProposal, u, nil); err != nil {
			return "failed", err
		}
	}
	r.fault(FaultRoundProposed, n.Address)
	if u.Written > jb.Budget.Scratch {
		what := "the proposal is"
		if built != nil {
			what = "the proposal and its build's outputs are"
		}
		return fail("", state.Usage{}, state.RoundFailed, p.Key, "", r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round),
			Reason: fmt.Sprintf("%s %d bytes, over the scratch budget of %d bytes", what, u.Written, jb.Budget.Scratch)}))
	}

	// What the proposal cost is known once it is made (its sender reports it): one that takes
	// the job past its spend budget, or all jobs past the project's ceiling, is not evaluated.
	if why, err := r.overSpend(ctx, jb, rep.Used); err != nil {
		return "failed", err
	} else if why != "" {
		if _, ferr := fail("", state.Usage{}, state.RoundFailed, p.Key, c.Tree, r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round),
			Reason: fmt.Sprintf("not evaluated: its proposal cost %g, and %s", p.Usage.Spend, why)})); ferr != nil {
			return "failed", ferr
		}
		return "failed", &jobEnd{state.JobExhausted, why}
	}

	// The evaluation. A round whose apply died after its candidate met the sealed suite is
	// settled from the signed results: the candidate is never evaluated again.
	evStart := time.Now()
	rej, err := r.refuseQuarantined(ctx, n, c)
	if err != nil {
		return "failed", err
	}
	var ev evaluate.Result
	u = state.Usage{}
	switch recorded, ok, err := r.recordedEvaluation(ctx, n, c, prior, rej); {
	case err != nil:
		return "failed", err
	case rej != nil: // refused before evaluation
	case ok:
		ev = *recorded
		if prior.Reserved != nil && prior.Reserved.Part == state.PartEvaluation {
			u = prior.Reserved.Spent(time.Now()) // the evaluation that apply died in ran its cases
		}
	default:
		need, err := r.eval.Probes(ctx, n)
		if err != nil {
			return "failed", err
		}
		if left := jb.Budget.Probes - rep.Used.Probes; need > left {
			_, ferr := fail("", state.Usage{}, state.RoundFailed, p.Key, c.Tree, r.rejected(n, evaluate.Rejection{Recipe: roundLabel(round),
				Reason: fmt.Sprintf("not evaluated: its %d dev and repair case run(s) would exceed the probes budget (%d of %d left)", need, left, jb.Budget.Probes)}))
			if ferr != nil {
				return "failed", ferr
			}
			return "failed", &jobEnd{state.JobExhausted, fmt.Sprintf("the probes budget is spent: %d of %d used, and a candidate needs %d", rep.Used.Probes, jb.Budget.Probes, need)}
		}
		eres, err := db.Reserve(wctx, jb.ID, round, state.Reservation{Part: state.PartEvaluation, Wall: r.wallLeft(jb, rep.Used), Probes: need, At: evStart})
		if err != nil {
			return "failed", err
		}
		res, err := r.eval.Evaluate(ctx, n, c.Recipe, c.Tree, c.Base)
		if err != nil {
			// The reservation stays open: the apply that resumes the round counts it as spent.
			return "failed", fmt.Errorf("evaluating %s for %s: %w", c.Recipe, n.Address, err)
		}
		ev = *res
		u = state.Usage{Wall: time.Since(evStart), Probes: ev.Probes, CasesWall: ev.CasesWall}
		if eres.At.Before(evStart) {
			u = u.Add(eres.Spent(evStart)) // what the apply that died in it spent stays spent
		}
	}
	if rej == nil && ev.Rejection != nil {
		rej = r.rejectCandidate(n, c, *ev.Rejection)
	}
	if rej != nil {
		if _, err := fail(state.PartEvaluation, u, state.RoundRejected, p.Key, c.Tree, *rej); err != nil {
			return "failed", err
		}
		r.fault(FaultRoundEvaluated, n.Address)
		return "", nil
	}
	if err := charge(state.PartEvaluation, u, nil); err != nil {
		return "failed", err
	}
	r.fault(FaultRoundEvaluated, n.Address)
	if rej, err := r.admitCandidate(ctx, n, c, ev.Tests); err != nil {
		return "failed", err
	} else if rej != nil {
		return fail("", state.Usage{}, state.RoundRejected, p.Key, c.Tree, *rej)
	}
	if err := db.FinishRound(ctx, jb.ID, round, state.RoundAdmitted, p.Key, c.Tree, nil); err != nil {
		return "failed", err
	}
	r.fault(FaultRoundAdmitted, n.Address)
	// The rounds rejected before this one go to the apply's report, as a recipe's do.
	r.mu.Lock()
	r.rejections = append(r.rejections, rep.Rounds...)
	r.mu.Unlock()
	report := fmt.Sprintf("admitted in round %d of %d as %s; spent %s", round, jb.Budget.Candidates, c.Ref, spendOf(rep.Used))
	return "built", db.SetJobStatus(ctx, jb.ID, state.JobAdmitted, report, c.Ref)
}

// recordedEvaluation is candidate c's evaluation as the signed results recorded it, when
// prior, the round as an earlier apply left it, was dispatched before (its apply may have
// died after the candidate met the sealed suite) and c was not refused (rej); ok is false
// when c must be evaluated.
func (r *runner) recordedEvaluation(ctx context.Context, n *graph.Node, c *admit.Candidate, prior state.Round, rej *evaluate.Rejection) (*evaluate.Result, bool, error) {
	if prior.N == 0 || rej != nil {
		return nil, false, nil
	}
	res, ok, err := r.eval.Recorded(ctx, n, c.Recipe, c.Tree, c.Base)
	if err != nil {
		return nil, false, fmt.Errorf("the recorded evaluation of %s for %s: %w", c.Recipe, n.Address, err)
	}
	return res, ok, nil
}

// errWallSpent is the cause of a proposal stopped at the job's wall-time budget, or at the
// project's ceiling on all jobs' wall time in one apply.
var errWallSpent = errors.New("the job's wall-time budget (or the project's reconstruct_deadline) ran out")

// wallLeft is the wall time a round of jb may take: what its budget has left, and no more
// than what the project's ceiling has left for this apply.
func (r *runner) wallLeft(jb state.Job, used state.Usage) time.Duration {
	return max(min(jb.Budget.Wall-used.Wall, r.deadline()-time.Duration(r.reconWall.Load())), 0)
}

// deadline is the project's ceiling on the wall time of all jobs in one apply.
func (r *runner) deadline() time.Duration {
	if d := r.g.Config.Project.ReconstructDeadline; d > 0 {
		return d
	}
	return lang.DefaultReconstructDeadline
}

func wallSpentWhy(jb state.Job) string {
	return fmt.Sprintf("the wall-time budget is spent: the job's is %s, and the project's reconstruct_deadline bounds all jobs of one apply", jb.Budget.Wall)
}

// candidatesSpent is overBudget's reason when every candidate was tried: the report's
// headline says that already.
const candidatesSpent = "every candidate was tried"

// overBudget says why round may not be dispatched within jb's budget, having used used, or
// within the project's ceiling; "" when it may.
func (r *runner) overBudget(ctx context.Context, jb state.Job, used state.Usage, round int) (string, error) {
	b := jb.Budget
	switch {
	case round > b.Candidates:
		return candidatesSpent, nil
	case used.Probes >= b.Probes:
		return fmt.Sprintf("the probes budget is spent: %d of %d used", used.Probes, b.Probes), nil
	case used.Wall >= b.Wall || r.wallLeft(jb, used) <= 0:
		return wallSpentWhy(jb), nil
	}
	return r.overSpend(ctx, jb, used)
}

// overSpend says why jb, having spent used.Spend, is past its spend budget, or all jobs
// together past the project's reconstruct_spend; "" when neither is. A round is dispatched
// only within both, and its candidate evaluated only if its proposal kept within both.
func (r *runner) overSpend(ctx context.Context, jb state.Job, used state.Usage) (string, error) {
	if used.Spend > jb.Budget.Spend {
		return fmt.Sprintf("the spend budget is spent: %g of %g", used.Spend, jb.Budget.Spend), nil
	}
	all, err := r.ws.State.JobsSpend(ctx)
	if err != nil {
		return "", err
	}
	if ceiling := r.g.Config.Project.ReconstructSpend; all > ceiling {
		return fmt.Sprintf("the project's reconstruct_spend is spent: all jobs together spent %g of %g", all, ceiling), nil
	}
	return "", nil
}

// cannotPromote says why no candidate of n could be promoted however good it is: the sealed
// set is used up (every sealed case but fewer than promotion needs was shown to a builder);
// "" when one could.
func (r *runner) cannotPromote(ctx context.Context, n *graph.Node) string {
	su := evaluate.SealedNow(ctx, r.ws, r.g.Config.Dir, r.opt.TrustedKeys)(n)
	if need := evaluate.MinUndisclosed(r.g.Config.Project); su != nil && su.Undisclosed < need {
		return fmt.Sprintf("the sealed set is used up: %d undisclosed sealed case(s) left, and promotion needs %d; add sealed cases", su.Undisclosed, need)
	}
	return ""
}

// endJob records the end of a job that admitted nothing, reports it and returns the
// capability's failure.
func (r *runner) endJob(ctx context.Context, n *graph.Node, rep *ReconstructionError, status state.JobStatus, why string) (string, error) {
	rep.Status, rep.Why = status, why
	if err := r.ws.State.SetJobStatus(context.WithoutCancel(ctx), rep.Job, status, rep.Error(), ""); err != nil {
		return "failed", err
	}
	typ := "reconstruct_exhausted"
	if status == state.JobUnresolved {
		typ = "reconstruct_unresolved"
	}
	r.emit(event.Event{Type: typ, Node: n.Address, Job: rep.Job, Message: rep.headline()})
	return "failed", rep
}

// spendOf says what a job used, for its reports.
func spendOf(u state.Usage) string {
	return fmt.Sprintf("%d probe(s), %s wall, %s CPU, %g spend", u.Probes, u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond), u.Spend)
}

// roundLabel names a round's candidate where a recipe's address names a recipe's.
func roundLabel(round int) string { return fmt.Sprintf("reconstruct round %d", round) }

// ReconstructionError is a reconstruction job that ended without an admission: exhausted
// (its budget spent) or unresolved (it cannot go on), with every round's failure in order.
type ReconstructionError struct {
	Capability string
	Job        string
	Status     state.JobStatus
	Why        string
	Budget     state.JobBudget
	Used       state.Usage
	Rounds     []evaluate.Rejection
}

func (e *ReconstructionError) headline() string {
	verb := "exhausted its budget"
	if e.Status == state.JobUnresolved {
		verb = "is unresolved"
	}
	s := fmt.Sprintf("reconstruction %s (job %s): %d of %d candidates tried, none admitted", verb, e.Job, len(e.Rounds), e.Budget.Candidates)
	if e.Why != candidatesSpent {
		s += "; " + e.Why
	}
	return s
}

// Error is the report without the capability's address, which the walk puts before it.
func (e *ReconstructionError) Error() string {
	s := e.headline() + "\n  spent: " + spendOf(e.Used)
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

// A ProposalSource proposes the candidates of a job, a round at a time. The command builder
// of a reconstruct block is one (commandBuilder); a source that waits for proposals sent
// from outside, by a person or a model over MCP, is another (externalSource). Whatever it proposes is untrusted: it becomes
// a candidate only through the package block, and is admitted only by the evaluator.
type ProposalSource interface {
	// Name is what a round records as its source.
	Name() string
	// Propose makes a round's proposal from its brief. A *StepError (not NotRun) is a round
	// without a proposal, spent; any other error means the source cannot run, and the job
	// is unresolved. It must stop when ctx is done: the job's wall time is its deadline.
	Propose(ctx context.Context, b Brief) (*Proposal, error)
}

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
type commandBuilder struct {
	r *runner
	n *graph.Node
}

func (b *commandBuilder) Name() string { return lang.BuilderAddress(b.n.Capability.Name) }

func (b *commandBuilder) Propose(ctx context.Context, br Brief) (*Proposal, error) {
	r, rc := b.r, b.n.Capability.Reconstruct
	img := r.result(rc.Builder.Image.Node)
	if img == nil {
		return nil, fmt.Errorf("image %s is not built", rc.Builder.Image.Node)
	}
	job := input{mount: executors.Mount{Source: br.Dir, Target: lang.JobDir},
		// The provenance names the job and the round by the URI of what /job held.
		dep: provenance.Dependency{Name: lang.JobDir, URI: jobURI(b.n, br.Job, br.Round), Digest: string(br.Tree)}}
	bn, key, keyDef, err := builderNode(b.n, img.image, job, func(a string) digest.Digest {
		if res := r.result(a); res != nil {
			return res.tree
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	p := &Proposal{Key: key}
	res, hit, err := r.ws.Cache.Lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	if hit && r.usable(res) {
		r.emit(event.Event{Type: "node_cached", Node: bn.Address, Action: bn.Digest})
		p.Cached = true
	} else if res, err = r.runAction(ctx, bn, key, keyDef, roundLabel(br.Round), job); err != nil {
		return nil, err
	}
	p.Result = res
	p.Usage = state.Usage{CPU: res.CPU, PeakMemory: res.PeakMemory, BuilderWall: res.Duration}
	if p.Usage.Written, err = r.written(res); err != nil {
		return nil, err
	}
	return p, nil
}

// resultOf is p's result, nil when there is no proposal.
func resultOf(p *Proposal) *cache.Result {
	if p == nil {
		return nil
	}
	return p.Result
}

// tailOf is the last lines of a failed run's log, to show with its failure ("" when none).
func tailOf(se *StepError) string {
	if len(se.LogTail) == 0 {
		return ""
	}
	return "\n" + strings.Join(se.LogTail, "\n")
}

// written is the number of bytes a step's outputs hold: a file's size, a tree's files'.
func (r *runner) written(res *cache.Result) (int64, error) {
	var n int64
	for _, o := range res.Outputs {
		if o.Kind != cache.Tree {
			n += o.Size
			continue
		}
		m, err := r.ws.Store.ReadManifest(o.Digest)
		if err != nil {
			return 0, err
		}
		for _, e := range m.Entries {
			n += e.Size
		}
	}
	return n, nil
}

// buildProposal runs the build of n's reconstruct block over round's proposal p: the
// proposal's files, each at ProposalDir and its path under /out, mounted read-only and
// checked by content like any mount (never a sealed case's), and nothing else the engine
// holds (no /job). The same proposal for the same build is the same action, taken from the
// action cache; cached says so. A *StepError is a build that failed.
func (r *runner) buildProposal(ctx context.Context, n *graph.Node, job string, round int, p *Proposal) (res *cache.Result, cached bool, err error) {
	rc := n.Capability.Reconstruct
	bn := lang.BuilderAddress(n.Capability.Name)
	r.setResult(bn, &nodeResult{step: p.Result})
	files := map[string]*lang.Artifact{}
	for _, o := range rc.ProposalOutputs() {
		files[strings.TrimPrefix(o, "/out")] = &lang.Artifact{Kind: lang.ArtifactStepOutput, Node: bn, Path: o}
	}
	tree, err := r.assemble(ctx, files)
	if err != nil {
		return nil, false, fmt.Errorf("the proposal for its build: %w", err)
	}
	man, err := r.ws.Store.ReadManifest(tree)
	if err != nil {
		return nil, false, err
	}
	if err := r.refuseSealed("the proposal", man); err != nil {
		return nil, false, &StepError{Node: lang.BuildAddress(n.Capability.Name), Reason: err.Error()}
	}
	src, err := r.ws.MaterializeTree(tree)
	if err != nil {
		return nil, false, err
	}
	img := r.result(rc.Build.Image.Node)
	if img == nil {
		return nil, false, fmt.Errorf("image %s is not built", rc.Build.Image.Node)
	}
	prop := input{mount: executors.Mount{Source: src, Target: lang.ProposalDir, Digest: string(tree)},
		dep: provenance.Dependency{Name: lang.ProposalDir, URI: roundURI(bn, job, round), Digest: string(tree)}}
	node, key, keyDef, err := reconstructNode(n, rc.Build, lang.BuildAddress(n.Capability.Name), img.image, prop, func(a string) digest.Digest {
		if res := r.result(a); res != nil {
			return res.tree
		}
		return ""
	})
	if err != nil {
		return nil, false, err
	}
	res, hit, err := r.ws.Cache.Lookup(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if hit && r.usable(res) {
		r.emit(event.Event{Type: "node_cached", Node: node.Address, Action: node.Digest})
		return res, true, nil
	}
	res, err = r.runAction(ctx, node, key, keyDef, roundLabel(round), prop)
	return res, false, err
}

// roundLog records the logs of run (builder or build) of round of job: res's when it
// succeeded, the failure's (err, a *StepError) when it did not. A failure that is not a run
// of the step (the apply was interrupted, say) records nothing.
func (r *runner) roundLog(ctx context.Context, job string, round int, run string, res *cache.Result, err error) error {
	l := state.RunLog{Run: run}
	var se *StepError
	switch {
	case err == nil && res != nil:
		l.Stdout, l.Stderr = res.Stdout.Digest, res.Stderr.Digest
	case errors.As(err, &se):
		l.Stdout, l.Stderr, l.Error = se.Stdout, se.Stderr, err.Error()
	default:
		return nil
	}
	return r.ws.State.AddRoundLog(ctx, job, round, l)
}

// candidateOf packages round's proposal p (or, when n's reconstruct block has a build,
// built, the build's run over it) into a candidate of n on the package's base. Its
// provenance, an input of the admission, is the proposal's, the build's and the earlier
// rounds' proposals', each under the job and round that made it.
func (r *runner) candidateOf(ctx context.Context, n *graph.Node, job string, round int, p *Proposal, built *cache.Result) (*admit.Candidate, error) {
	rc := n.Capability.Reconstruct
	bn := lang.BuilderAddress(n.Capability.Name)
	// The package's files name the builder's outputs, or the build's: this round's are
	// their results.
	r.setResult(bn, &nodeResult{step: p.Result})
	if built != nil {
		r.setResult(lang.BuildAddress(n.Capability.Name), &nodeResult{step: built})
	}
	tree, err := r.assemble(ctx, rc.Package.Files)
	if err != nil {
		return nil, err
	}
	var base executors.Image
	if b := rc.Package.Base; b != nil {
		br := r.result(b.Node)
		if br == nil {
			return nil, fmt.Errorf("base %s is not built", b.Node)
		}
		base = br.image
	}
	// Every earlier round's proposal is there too, under its round: the admission names the
	// job and the rounds that led to the candidate.
	steps := map[string]*cache.Result{fmt.Sprintf("%s (%s, round %d)", bn, job, round): p.Result}
	if built != nil {
		steps[fmt.Sprintf("%s (%s, round %d)", lang.BuildAddress(n.Capability.Name), job, round)] = built
	}
	rounds, err := r.ws.State.Rounds(ctx, job)
	if err != nil {
		return nil, err
	}
	for _, rd := range rounds {
		if rd.N == round || rd.Builder == "" {
			continue
		}
		if res, hit, err := r.ws.Cache.Lookup(ctx, rd.Builder); err != nil {
			return nil, err
		} else if hit && r.ranFor(res, n, job, rd.N) {
			steps[fmt.Sprintf("%s (%s, round %d)", bn, job, rd.N)] = res
		}
	}
	return &admit.Candidate{Recipe: roundLabel(round), Tree: tree, Base: base, Steps: steps, Output: r.recordedOutput}, nil
}

// jobURI names round of job for capability n: the URI of the /job its builder read, in
// the builder's provenance.
func jobURI(n *graph.Node, job string, round int) string {
	return roundURI(n.Address, job, round)
}

// roundURI names what node addr read in round of job (the capability's /job, the
// builder's proposal), in the provenance of the run that read it.
func roundURI(addr, job string, round int) string {
	return fmt.Sprintf("foundry:%s#%s/round-%d", addr, job, round)
}

// ranFor reports whether res, the builder run a row of round of job names, is that round's
// of capability n: its signed provenance names the job and round (jobURI). The row names an
// action; only the signed statement says what ran, so a row naming another action binds
// nothing to the admission.
func (r *runner) ranFor(res *cache.Result, n *graph.Node, job string, round int) bool {
	for _, d := range res.Attestations {
		b, err := r.ws.Store.Get(d)
		if err != nil {
			continue
		}
		if c, err := provenance.OpenExecution(b, r.keys); err == nil && c.Inputs[lang.JobDir] == jobURI(n, job, round) {
			return true
		}
	}
	return false
}

// builderNode is the builder of capability n as a step node of its own (it is not in the
// graph), keyed by its definition, its image, what it mounts (a capability by the tree
// admitted or pinned for it, in trees) and this round's job: the same job for the same
// builder is the same action.
func builderNode(n *graph.Node, img executors.Image, job input, trees func(node string) digest.Digest) (*graph.Node, digest.Digest, []byte, error) {
	return reconstructNode(n, n.Capability.Reconstruct.Builder, lang.BuilderAddress(n.Capability.Name), img, job, trees)
}

// reconstructNode is step st of capability n's reconstruct block (its builder, or its
// build), at address addr, as a step node of its own, keyed by its kind (builder or build),
// its definition, its image, what it mounts and extra, what apply mounts besides (the job,
// or the proposal).
func reconstructNode(n *graph.Node, st *lang.Step, addr string, img executors.Image, extra input, trees func(node string) digest.Digest) (*graph.Node, digest.Digest, []byte, error) {
	bn := &graph.Node{Address: addr, Kind: graph.KindStep, Step: st, Range: st.DeclRange}
	mounts := map[string]string{extra.mount.Target: extra.dep.Digest}
	for target, a := range st.Mounts {
		d := a.Digest
		switch a.Kind {
		case lang.ArtifactInline:
			d = digest.FromBytes(a.Inline)
		case lang.ArtifactCapability:
			if d = trees(a.Node); d == "" {
				return nil, "", nil, fmt.Errorf("%s is not settled", a.Node)
			}
		}
		mounts[target] = string(d)
	}
	key, def, err := digest.Of(map[string]any{"kind": st.Kind, "v": graph.DefinitionVersion, "contract": n.Digest,
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

// writeJob writes round's job and returns its brief, the files to mount read-only at /job:
//
//	contract.json                 the contract (the capability's definition)
//	schemas/input.json, output.json
//	cases/dev/*.json, cases/repair/*.json   the cases builders may see, as written
//	counterexamples/N.json        round N's failure, for every earlier round
//	round.json                    {"capability", "job", "round", "candidates"}
//
// Never a sealed case: the dev and repair suites cannot match one (lang), disclosed sealed
// cases reach the builder only as the counterexample that disclosed them, and the job is
// refused, like any mount, if a file of it has a sealed case's content.
func (r *runner) writeJob(n *graph.Node, job string, round int, earlier []evaluate.Rejection) (Brief, error) {
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
				return Brief{}, err
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
			return Brief{}, err
		}
		files[fmt.Sprintf("counterexamples/%d.json", i+1)] = append(b, '\n')
	}
	b, err := json.Marshal(map[string]any{"capability": capb.Name, "job": job, "round": round, "candidates": capb.Reconstruct.Budget.Candidates})
	if err != nil {
		return Brief{}, err
	}
	files["round.json"] = append(b, '\n')

	dir := filepath.Join(r.scratch, "job-"+workspace.NewID())
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
	d, man, err := r.ws.Store.PutDir(dir)
	if err != nil {
		return Brief{}, err
	}
	if err := r.refuseSealed("the job", man); err != nil {
		return Brief{}, err
	}
	src, err := r.ws.MaterializeTree(d)
	if err != nil {
		return Brief{}, err
	}
	return Brief{Capability: capb.Name, Job: job, Round: round, Tree: d, Dir: src}, nil
}
