package reconstruct

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// round is one round of a job, run in phases: propose (and build over the proposal),
// package, evaluate, admit. Each part of it (the proposal, the evaluation) is reserved
// before it is dispatched and charged when it ends, releasing the reservation.
//
// prior is the round as an earlier apply left it when it died in it (zero for a round
// dispatched first now): a part it charged is not charged again, a reservation it left open
// is spent, and a candidate it evaluated is settled from the signed results, never
// evaluated again.
//
// A phase returns done when the round has ended without an admission (it failed or was
// rejected, charged, and the job's report has its failure: the job goes on to the next
// round), or an error: a *jobEnd when the job cannot go on, any other when the apply
// cannot (the round then stays running, for the next apply to resume).
type round struct {
	*job
	num   int // the round's number, from 1
	prior state.Round

	started  time.Time
	brief    Brief
	left     time.Duration     // the wall time the round may take
	reserved state.Reservation // the proposal's reservation, when this apply made one

	proposal    *Proposal
	building    bool          // the proposal was made, and the build runs over it
	built       *cache.Result // the build's run over the proposal, with a build block
	builtCached bool
	candidate   *admit.Candidate
	evaluation  evaluate.Result
}

// run runs the round's phases; admitted is set once its candidate is admitted.
func (rd *round) run(ctx context.Context) (admitted bool, err error) {
	if err := rd.begin(ctx); err != nil {
		return false, err
	}
	span := trace.Start(ctx, "round "+strconv.Itoa(rd.num), "reconstruction")
	defer func() {
		span.Set("admitted", admitted)
		span.Set("job_spent", spendOf(rd.rep.Used)) // the job's spend as this round ended
		span.End()
	}()
	phases := []struct {
		name string
		fn   func(context.Context) (bool, error)
	}{{"propose", rd.propose}, {"pack", rd.pack}, {"oracle", rd.oracle}, {"evaluate", rd.evaluate}}
	for _, phase := range phases {
		sp := trace.Start(ctx, phase.name, "reconstruction")
		done, err := phase.fn(ctx)
		sp.End()
		if done || err != nil {
			return false, err
		}
	}
	sp := trace.Start(ctx, "admit", "reconstruction")
	defer sp.End()
	return rd.admit(ctx)
}

func (rd *round) label() string { return roundLabel(rd.num) }

// db is the state database the job and its rounds are kept in. A part's reservation and
// charge are written without ctx's cancellation: what a part spent is charged even as the
// apply is interrupted.
func (rd *round) db() *state.DB { return rd.rc.Workspace.State }

// begin reports the round, writes its brief, and reserves its proposal: the wall time
// left, and no more than a source that runs may take (its time limit, and the build's).
// A round whose apply died in its proposal keeps that apply's reservation, and what the
// dead apply spent (from its reservation to this dispatch, no more than it reserved) is
// charged with this one.
func (rd *round) begin(ctx context.Context) error {
	rd.rc.emit(event.Event{Type: "reconstruct_round", Node: rd.n.Address, Recipe: rd.label(), Job: rd.state.ID,
		Message: fmt.Sprintf("round %d of %d: %s proposes a candidate from %d counterexample(s)", rd.num, rd.state.Budget.Candidates, rd.src.Who(), len(rd.rep.Rounds))})
	rd.started = time.Now()
	var err error
	if rd.brief, err = rd.writeBrief(ctx, rd.num); err != nil {
		return fmt.Errorf("%s: writing the job: %w", rd.label(), err)
	}
	if err := rd.db().SetBrief(ctx, rd.state.ID, rd.num, rd.brief.Tree); err != nil {
		return err
	}
	rd.left = rd.wallLeft(rd.rep.Used)
	reserve := rd.left
	if _, limit, ok := rd.src.Run(); ok {
		most := limit
		if rd.block.Build != nil {
			most += graph.EffectiveLimits(rd.block.Build.Limits).Time
		}
		reserve = min(rd.left, time.Since(rd.started)+most)
	}
	if !rd.prior.ProposalCharged {
		rd.reserved, err = rd.db().Reserve(context.WithoutCancel(ctx), rd.state.ID, rd.num, state.Reservation{Part: state.PartProposal, Wall: reserve, At: rd.started})
	}
	return err
}

// propose has the source make the round's proposal and, with a build block, runs the build
// over it, both within the wall time left.
func (rd *round) propose(ctx context.Context) (done bool, err error) {
	pctx, cancel := context.WithTimeoutCause(ctx, rd.left, errWallSpent)
	defer cancel()
	rd.proposal, err = rd.src.Propose(pctx, rd.brief)
	if name, _, ok := rd.src.Run(); ok {
		if lerr := rd.log(ctx, name, resultOf(rd.proposal), err); lerr != nil {
			return false, lerr
		}
	}
	if err == nil && rd.block.Build != nil {
		rd.building = true
		rd.built, rd.builtCached, err = rd.build(pctx)
		if lerr := rd.log(ctx, "build", rd.built, err); lerr != nil {
			return false, lerr
		}
	}
	if err == nil {
		return false, nil
	}
	var re *RunError
	switch {
	case ctx.Err() != nil:
		// The reservation stays open: the apply that resumes the round counts it as spent.
		return false, fmt.Errorf("stopped: %w", context.Cause(ctx))
	case errors.Is(context.Cause(pctx), errWallSpent):
		if ferr := rd.fail(ctx, state.PartProposal, rd.ran(err), state.RoundFailed, "", "", rd.reject("stopped: "+errWallSpent.Error())); ferr != nil {
			return false, ferr
		}
		return false, &jobEnd{state.JobExhausted, rd.wallSpentWhy()}
	case rd.building && errors.As(err, &re) && !re.NotRun:
		// The build failed over the proposal: a round spent, as a failing builder's, and
		// the next builder reads why.
		return true, rd.fail(ctx, state.PartProposal, rd.ran(err), state.RoundFailed, rd.proposal.Key, "",
			rd.reject(fmt.Sprintf("the build over the proposal failed: %v%s", err, tailOf(re))))
	case errors.As(err, &re) && !re.NotRun:
		// The builder failed, or made no proposal: a round spent, nothing to evaluate.
		return true, rd.fail(ctx, state.PartProposal, rd.ran(err), state.RoundFailed, "", "", rd.reject(err.Error()))
	}
	if ferr := rd.fail(ctx, state.PartProposal, rd.ran(err), state.RoundFailed, "", "", rd.reject(err.Error())); ferr != nil {
		return false, ferr
	}
	what := rd.src.Name()
	if rd.building {
		what = lang.BuildAddress(rd.n.Capability.Name)
	}
	return false, &jobEnd{state.JobUnresolved, fmt.Sprintf("%s cannot run: %v", what, err)}
}

// build runs the build of the reconstruct block over the round's proposal: the proposal's
// files, each at ProposalDir and its path under /out, mounted read-only and checked by
// content like any mount (never a sealed case's), and nothing else the engine holds (no
// /job). The same proposal for the same build is the same action, taken from the action
// cache; cached says so. A *RunError is a build that failed.
func (rd *round) build(ctx context.Context) (res *cache.Result, cached bool, err error) {
	ap, bl := rd.rc.Apply, rd.block.Build
	builder := lang.BuilderAddress(rd.n.Capability.Name)
	files := map[string]*lang.Artifact{}
	for _, o := range rd.block.ProposalOutputs() {
		files[strings.TrimPrefix(o, "/out")] = &lang.Artifact{Kind: lang.ArtifactStepOutput, Node: builder, Path: o}
	}
	tree, err := ap.Assemble(ctx, files, map[string]*cache.Result{builder: rd.proposal.Result})
	if err != nil {
		return nil, false, fmt.Errorf("the proposal for its build: %w", err)
	}
	ws := rd.rc.Workspace
	man, err := ws.Store.ReadManifest(tree)
	if err != nil {
		return nil, false, err
	}
	if err := ap.RefuseSealed("the proposal", man); err != nil {
		return nil, false, &RunError{Err: fmt.Errorf("%s: %w", lang.BuildAddress(rd.n.Capability.Name), err)}
	}
	src, err := ws.MaterializeTree(tree)
	if err != nil {
		return nil, false, err
	}
	img, ok := ap.Image(bl.Image.Node)
	if !ok {
		return nil, false, fmt.Errorf("image %s is not built", bl.Image.Node)
	}
	node, err := graph.ReconstructStep(rd.n, bl, img.Digest, map[string]digest.Digest{lang.ProposalDir: tree}, ap.Tree)
	if err != nil {
		return nil, false, err
	}
	in := Input{Mount: executors.Mount{Source: src, Target: lang.ProposalDir, Digest: string(tree)},
		Dep: provenance.Dependency{Name: lang.ProposalDir, URI: roundURI(builder, rd.state.ID, rd.num), Digest: string(tree)}}
	return ap.Run(ctx, node, rd.label(), in)
}

// log records the logs of run (builder or build): res's when it succeeded, the failure's
// (err, a *RunError) when it did not. A failure that is not a run's (the apply was
// interrupted, say) records nothing.
func (rd *round) log(ctx context.Context, run string, res *cache.Result, err error) error {
	l := state.RunLog{Run: run}
	var re *RunError
	switch {
	case err == nil && res != nil:
		l.Stdout, l.Stderr = res.Stdout.Digest, res.Stderr.Digest
	case errors.As(err, &re):
		l.Stdout, l.Stderr, l.Error = re.Stdout, re.Stderr, err.Error()
	default:
		return nil
	}
	return rd.db().AddRoundLog(context.WithoutCancel(ctx), rd.state.ID, rd.num, l)
}

// pack packages the proposal (or the build's outputs) into the round's candidate and
// charges the proposal part. A proposal over the scratch budget spends the round; one that
// takes the job past its spend budget, or all jobs past the project's ceiling, ends the job
// (what it cost is known only once it is made: its sender reports it).
func (rd *round) pack(ctx context.Context) (done bool, err error) {
	p := rd.proposal
	if rd.candidate, err = rd.candidateOf(ctx); err != nil {
		return false, fmt.Errorf("%s: packaging the proposal: %w", rd.label(), err)
	}
	u, err := rd.proposalUsage()
	if err != nil {
		return false, err
	}
	if !rd.prior.ProposalCharged {
		if err := rd.charge(ctx, state.PartProposal, u, nil); err != nil {
			return false, err
		}
	}
	rd.rc.fault(FaultRoundProposed, rd.n.Address)
	if u.Written > rd.state.Budget.Scratch {
		what := "the proposal is"
		if rd.built != nil {
			what = "the proposal and its build's outputs are"
		}
		return true, rd.fail(ctx, "", state.Usage{}, state.RoundFailed, p.Key, "",
			rd.reject(fmt.Sprintf("%s %d bytes, over the scratch budget of %d bytes", what, u.Written, rd.state.Budget.Scratch)))
	}
	if why, err := rd.overSpend(ctx); err != nil {
		return false, err
	} else if why != "" {
		if err := rd.fail(ctx, "", state.Usage{}, state.RoundFailed, p.Key, rd.candidate.Tree,
			rd.reject(fmt.Sprintf("not evaluated: its proposal cost %g, and %s", p.Usage.Spend, why))); err != nil {
			return false, err
		}
		return false, &jobEnd{state.JobExhausted, why}
	}
	return false, nil
}

// proposalUsage is what the proposal part used, to be charged once the candidate is
// packaged: the proposal's usage, the build's run over it, and the part's wall time.
func (rd *round) proposalUsage() (state.Usage, error) {
	p := rd.proposal
	u := p.Usage
	if rd.built != nil {
		// The build's run is the proposal part's too, as its record says: when it ran now, or
		// when the builder's run was taken from the cache too (the apply that ran both died
		// before charging them). A build taken from the cache after a fresh builder run (a
		// proposal built before) ran in no part of this round: only its output is counted.
		bw, err := written(rd.rc.Workspace, rd.built)
		if err != nil {
			return state.Usage{}, err
		}
		bu := state.Usage{Written: bw}
		if !rd.builtCached || p.Cached {
			bu.CPU, bu.PeakMemory, bu.BuildWall = rd.built.CPU, rd.built.PeakMemory, rd.built.Duration
		}
		u = u.Add(bu)
	}
	if p.Cached {
		// The builder ran in an apply that died before charging it: its record says what it
		// used, in place of that apply's reservation (and the build's, if it ran then).
		u.Wall = p.Usage.BuilderWall + time.Since(rd.started)
		if rd.builtCached {
			u.Wall += rd.built.Duration
		}
	} else {
		u.Wall = time.Since(rd.started)
		u = rd.earlier(u)
	}
	return u, nil
}

// ran is what the proposal part used when it ended without a candidate (err): its wall
// time, and what the runs that ended (the builder's, the build's) used.
func (rd *round) ran(err error) state.Usage {
	d := time.Since(rd.started)
	u := state.Usage{Wall: d, BuilderWall: d}
	if p := rd.proposal; rd.building {
		u = p.Usage
		u.Wall = d
		u.BuildWall = max(d-p.Usage.BuilderWall, 0)
	}
	var re *RunError
	if errors.As(err, &re) {
		u.CPU += re.CPU
		u.PeakMemory = max(u.PeakMemory, re.PeakMemory)
	}
	return rd.earlier(u)
}

// earlier adds to u what a dispatch of the proposal that an apply died in spent: from the
// reservation it left open to this round's start.
func (rd *round) earlier(u state.Usage) state.Usage {
	if rd.reserved.Part != "" && rd.reserved.At.Before(rd.started) {
		u = u.Add(rd.reserved.Spent(rd.started))
	}
	return u
}

// evaluate evaluates the candidate (dev and repair, then sealed once) within the probes
// budget, unless it is refused; a round whose apply died after its candidate met the
// sealed suite is settled from the signed results: the candidate is never evaluated
// again. A rejection ends the round.
func (rd *round) evaluate(ctx context.Context) (done bool, err error) {
	c, n := rd.candidate, rd.n
	evStart := time.Now()
	rej, err := rd.rc.Apply.Refuse(ctx, n, c)
	if err != nil {
		return false, err
	}
	var u state.Usage
	switch recorded, ok, err := rd.recordedEvaluation(ctx, rej); {
	case err != nil:
		return false, err
	case rej != nil: // refused before evaluation
	case ok:
		rd.evaluation = *recorded
		if r := rd.prior.Reserved; r != nil && r.Part == state.PartEvaluation {
			u = r.Spent(time.Now()) // the evaluation that apply died in ran its cases
		}
	default:
		ev := rd.rc.Evaluator
		need, err := ev.Probes(ctx, n)
		if err != nil {
			return false, err
		}
		b := rd.state.Budget
		if left := b.Probes - rd.rep.Used.Probes; need > left {
			if err := rd.fail(ctx, "", state.Usage{}, state.RoundFailed, rd.proposal.Key, c.Tree,
				rd.reject(fmt.Sprintf("not evaluated: its %d dev and repair case run(s) would exceed the probes budget (%d of %d left)", need, left, b.Probes))); err != nil {
				return false, err
			}
			return false, &jobEnd{state.JobExhausted, fmt.Sprintf("the probes budget is spent: %d of %d used, and a candidate needs %d", rd.rep.Used.Probes, b.Probes, need)}
		}
		// Shrinking a counterexample may take the probes left after the cases, up to the
		// evaluator's default. It is not reserved: a reservation an apply never charged is
		// spent whole, and the cases are all a rejected candidate must run; shrinking runs
		// are charged with the evaluation, and lost, like a run no record holds, when the
		// apply dies while shrinking.
		shrinkRuns := min(evaluate.DefaultShrinkRuns, b.Probes-rd.rep.Used.Probes-need)
		eres, err := rd.db().Reserve(context.WithoutCancel(ctx), rd.state.ID, rd.num,
			state.Reservation{Part: state.PartEvaluation, Wall: rd.wallLeft(rd.rep.Used), Probes: need, At: evStart})
		if err != nil {
			return false, err
		}
		res, err := ev.EvaluateShrinking(ctx, n, c.Recipe, c.Tree, c.Base, shrinkRuns)
		var dis *evaluate.Disagreement
		if errors.As(err, &dis) {
			// The reference cannot judge the candidate: the job stops, and says why.
			u := state.Usage{Wall: time.Since(evStart)}
			if ferr := rd.fail(ctx, state.PartEvaluation, u, state.RoundFailed, rd.proposal.Key, c.Tree, rd.reject("not judged: "+dis.Error())); ferr != nil {
				return false, ferr
			}
			return false, &jobEnd{state.JobUnresolved, dis.Error()}
		}
		if err != nil {
			// The reservation stays open: the apply that resumes the round counts it as spent.
			return false, fmt.Errorf("evaluating %s for %s: %w", c.Recipe, n.Address, err)
		}
		rd.evaluation = *res
		c.Evidence = res.Evidence
		c.Dossier = dossierDigest(res.Dossier)
		u = state.Usage{Wall: time.Since(evStart), Probes: res.Probes, CasesWall: res.CasesWall}
		if eres.At.Before(evStart) {
			u = u.Add(eres.Spent(evStart)) // what the apply that died in it spent stays spent
		}
	}
	if rej == nil && rd.evaluation.Rejection != nil {
		rj := *rd.evaluation.Rejection
		rj.Recipe = c.Recipe
		rd.rc.emit(rj.Event(n.Address))
		rej = &rj
	}
	if rej != nil {
		if err := rd.fail(ctx, state.PartEvaluation, u, state.RoundRejected, rd.proposal.Key, c.Tree, *rej); err != nil {
			return false, err
		}
		rd.rc.fault(FaultRoundEvaluated, n.Address)
		return true, nil
	}
	if err := rd.charge(ctx, state.PartEvaluation, u, nil); err != nil {
		return false, err
	}
	rd.rc.fault(FaultRoundEvaluated, n.Address)
	return false, nil
}

// recordedEvaluation is the candidate's evaluation as the signed results recorded it, when
// the round was dispatched before (its apply may have died after the candidate met the
// sealed suite) and the candidate was not refused (rej); ok is false when it must be
// evaluated.
func (rd *round) recordedEvaluation(ctx context.Context, rej *evaluate.Rejection) (*evaluate.Result, bool, error) {
	if rd.prior.N == 0 || rej != nil {
		return nil, false, nil
	}
	c := rd.candidate
	res, ok, err := rd.rc.Evaluator.Recorded(ctx, rd.n, c.Recipe, c.Tree, c.Base)
	if err != nil {
		return nil, false, fmt.Errorf("the recorded evaluation of %s for %s: %w", c.Recipe, rd.n.Address, err)
	}
	return res, ok, nil
}

// admit admits and publishes the candidate, which passed its evaluation, and ends the
// round; a candidate whose manifest is quarantined is rejected.
func (rd *round) admit(ctx context.Context) (admitted bool, err error) {
	c := rd.candidate
	if rej, err := rd.rc.Apply.Admit(ctx, rd.n, c, rd.evaluation.Tests); err != nil {
		return false, err
	} else if rej != nil {
		return false, rd.fail(ctx, "", state.Usage{}, state.RoundRejected, rd.proposal.Key, c.Tree, *rej)
	}
	if err := rd.db().FinishRound(ctx, rd.state.ID, rd.num, state.RoundAdmitted, rd.proposal.Key, c.Tree, nil); err != nil {
		return false, err
	}
	rd.rc.fault(FaultRoundAdmitted, rd.n.Address)
	return true, nil
}

// charge charges u, what part of the round used, releasing its reservation; with end, the
// round ends in the same transaction.
func (rd *round) charge(ctx context.Context, part state.Part, u state.Usage, end *state.RoundEnd) error {
	rd.rep.Used = rd.rep.Used.Add(u)
	rd.rc.wall.Add(int64(u.Wall))
	return rd.db().Charge(context.WithoutCancel(ctx), rd.state.ID, rd.num, part, u, end)
}

// fail ends the round with status and rej as its failure, charging u to part ("" for
// none); builder and candidate are what it got as far as, when it did.
func (rd *round) fail(ctx context.Context, part state.Part, u state.Usage, status state.RoundStatus, builder, candidate digest.Digest, rej evaluate.Rejection) error {
	b, err := json.Marshal(rej)
	if err != nil {
		return err
	}
	rd.rep.Rounds = append(rd.rep.Rounds, rej)
	return rd.charge(ctx, part, u, &state.RoundEnd{Status: status, Builder: builder, Candidate: candidate, Failure: b})
}

// reject reports the round's candidate as rejected for reason (candidate_rejected), and
// returns the rejection.
func (rd *round) reject(reason string) evaluate.Rejection {
	rej := evaluate.Rejection{Recipe: rd.label(), Reason: reason}
	rd.rc.emit(rej.Event(rd.n.Address))
	return rej
}

// candidateOf packages the round's proposal (or, when the reconstruct block has a build,
// the build's run over it) into a candidate on the package's base. Its provenance, an
// input of the admission, is the proposal's, the build's and the earlier rounds'
// proposals', each under the job and round that made it.
func (rd *round) candidateOf(ctx context.Context) (*admit.Candidate, error) {
	ap, capName, jobID := rd.rc.Apply, rd.n.Capability.Name, rd.state.ID
	builder, build := lang.BuilderAddress(capName), lang.BuildAddress(capName)
	// The package's files name the builder's outputs, or the build's: this round's are
	// their results.
	results := stepResults{builder: rd.proposal.Result}
	if rd.built != nil {
		results[build] = rd.built
	}
	tree, err := ap.Assemble(ctx, rd.block.Package.Files, results)
	if err != nil {
		return nil, err
	}
	var base executors.Image
	if b := rd.block.Package.Base; b != nil {
		var ok bool
		if base, ok = ap.Image(b.Node); !ok {
			return nil, fmt.Errorf("base %s is not built", b.Node)
		}
	}
	// Every earlier round's proposal is there too, under its round: the admission names the
	// job and the rounds that led to the candidate.
	steps := map[string]*cache.Result{fmt.Sprintf("%s (%s, round %d)", builder, jobID, rd.num): rd.proposal.Result}
	if rd.built != nil {
		steps[fmt.Sprintf("%s (%s, round %d)", build, jobID, rd.num)] = rd.built
	}
	ws := rd.rc.Workspace
	rounds, err := ws.State.Rounds(ctx, jobID)
	if err != nil {
		return nil, err
	}
	for _, r := range rounds {
		if r.N == rd.num || r.Builder == "" {
			continue
		}
		if res, hit, err := ws.Cache.Lookup(ctx, r.Builder); err != nil {
			return nil, err
		} else if hit && rd.ranFor(res, r.N) {
			steps[fmt.Sprintf("%s (%s, round %d)", builder, jobID, r.N)] = res
		}
	}
	return &admit.Candidate{Recipe: rd.label(), Tree: tree, Base: base, Steps: steps, Output: results.output}, nil
}

// ranFor reports whether res, the builder run that a row of round n of the job names, is
// that round's: its signed provenance names the job and round (the URI of its /job). The
// row names an action; only the signed statement says what ran, so a row naming another
// action binds nothing to the admission.
func (rd *round) ranFor(res *cache.Result, n int) bool {
	for _, d := range res.Attestations {
		b, err := rd.rc.Workspace.Store.Get(d)
		if err != nil {
			continue
		}
		if c, err := provenance.OpenExecution(b, rd.rc.Keys); err == nil && c.Inputs[lang.JobDir] == roundURI(rd.n.Address, rd.state.ID, n) {
			return true
		}
	}
	return false
}

// stepResults are a round's runs (its builder's, its build's) by address.
type stepResults map[string]*cache.Result

// output is the recorded output that a, a step output of one of the runs, refers to, and
// the run's action digest.
func (s stepResults) output(a *lang.Artifact) (*cache.Output, digest.Digest, error) {
	res := s[a.Node]
	if res == nil {
		return nil, "", fmt.Errorf("%s has no result", a.Node)
	}
	if o := res.Output(a.Path); o != nil {
		return o, res.Action, nil
	}
	return nil, "", fmt.Errorf("%s did not record output %s", a.Node, a.Path)
}

// resultOf is p's result, nil when there is no proposal.
func resultOf(p *Proposal) *cache.Result {
	if p == nil {
		return nil
	}
	return p.Result
}

// tailOf is the last lines of a failed run's log, to show with its failure ("" when none).
func tailOf(re *RunError) string {
	if len(re.Tail) == 0 {
		return ""
	}
	return "\n" + strings.Join(re.Tail, "\n")
}
