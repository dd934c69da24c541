package reconstruct

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
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

// Apply is the apply a job's rounds run in (engine/run's walk): what it settled, how it
// runs a step, and how it refuses and admits a capability's candidate, a recipe's and a
// round's alike.
type Apply interface {
	// Image is the image seed addr was built as in this apply; ok is false when it was not.
	Image(addr string) (img executors.Image, ok bool)
	// Tree is the tree capability addr settled with in this apply, "" when it has not.
	Tree(addr string) digest.Digest
	// Run settles n, a builder or a build (graph.ReconstructStep), under its cache key
	// n.Digest: from the action cache when it holds a result this apply may use (cached),
	// else by running n in the sandbox, reported as a step is, with in mounted besides its
	// own mounts and named in its provenance. A run that failed, or that the executor could
	// not run, is a *RunError; any other error means it could not be attempted, or the
	// apply was interrupted.
	Run(ctx context.Context, n *graph.Node, note string, in ...Input) (res *cache.Result, cached bool, err error)
	// Assemble lays files out as a tree in the store and returns its digest, as a
	// package's files are; a step output of a node in steps (a round's builder or build,
	// which are not in the graph) is taken from its result there.
	Assemble(ctx context.Context, files map[string]*lang.Artifact, steps map[string]*cache.Result) (digest.Digest, error)
	// RefuseSealed fails when tree man, about to be shown to a builder or a build as what,
	// holds a file with the content of a sealed case of any capability.
	RefuseSealed(what string, man *digest.Manifest) error
	// Refuse is candidate c's rejection, reported (candidate_rejected), when its files are
	// quarantined; nil when it may be evaluated.
	Refuse(ctx context.Context, n *graph.Node, c *admit.Candidate) (*evaluate.Rejection, error)
	// Admit admits and publishes candidate c of capability n, which passed its evaluation
	// with the signed test results tests: n then settles with c's tree, c.Ref is the
	// reference it was admitted as, and capability_admitted reports it. It returns the
	// rejection, reported, when c's manifest is quarantined.
	Admit(ctx context.Context, n *graph.Node, c *admit.Candidate, tests [][]byte) (*evaluate.Rejection, error)
}

// Input is what a round mounts in its builder or build besides the step's own mounts
// (the job, the references it may inspect, the proposal), and how the run's provenance
// names it. An Input with no Mount.Source is named in the provenance and mounted nowhere
// (the reference dossier).
type Input struct {
	Mount executors.Mount
	Dep   provenance.Dependency
}

// RunError is a builder's or a build's run that failed: it exited non-zero, was killed at
// a limit, or did not make what it must (and a proposal sent from outside without the
// files it must hold fails as such a run would). Its round is spent, charged with what the
// run used, and the next builder reads why. A run the executor could not run at all
// (NotRun) spends nothing: its source cannot run, and the job is unresolved.
type RunError struct {
	Err    error // the failure, as the apply reports a step's
	NotRun bool
	// CPU and PeakMemory are what the run used, when it ran.
	CPU        time.Duration
	PeakMemory int64
	// Stdout and Stderr are its logs, in the store; Tail their last lines.
	Stdout, Stderr digest.Digest
	Tail           []string
}

func (e *RunError) Error() string { return e.Err.Error() }
func (e *RunError) Unwrap() error { return e.Err }

// Faults of a reconstruction round, in the order a round passes them (see
// run.FaultInjector; the builder's run passes a step's, its evaluation
// evaluate.FaultBeforeSealed and FaultAfterSealed, its publish admit.FaultAfterDispatch).
const (
	FaultRoundProposed  = "round-proposed"  // the proposal is made and charged, not yet evaluated
	FaultOracleAsking   = "oracle-asking"   // the oracle's probes are reserved and a request answered; nothing charged
	FaultRoundAsked     = "round-asked"     // the oracle's answers are recorded and charged; the candidate not yet evaluated
	FaultRoundEvaluated = "round-evaluated" // the evaluation is charged with its outcome: a rejected round has ended with it, a passing candidate is not yet admitted
	FaultRoundAdmitted  = "round-admitted"  // the candidate is admitted and published, its round ended; the job's status not yet written
	FaultRoundFinished  = "round-finished"  // a round ended without an admission; the next not yet dispatched
)

// Reconstructor runs the reconstruction jobs of one apply. It gets what it needs from the
// apply as fields, as evaluate.Evaluator and admit.Admitter do.
type Reconstructor struct {
	Workspace *workspace.Workspace
	Graph     *graph.Graph
	// Apply is the apply the rounds run in.
	Apply Apply
	// Evaluator evaluates the rounds' candidates: the apply's, which evaluates its recipes'.
	Evaluator *evaluate.Evaluator
	// TrustedKeys verify the signed results the sealed suite stands on (evaluate.SealedNow);
	// Keys verify the provenance of a job's earlier rounds: the apply's own signing key's
	// and the trusted keys'.
	TrustedKeys, Keys []*provenance.Verifier
	// RunID is the apply's run; Scratch its scratch directory, where briefs are written.
	RunID, Scratch string
	// Emit reports progress; Fault is called at the fault points (nil-safe: may be nil).
	Emit  func(event.Event)
	Fault func(point, node string)

	// wall is the wall time rounds took in this apply, all jobs together: the project's
	// reconstruct_deadline bounds it.
	wall atomic.Int64
}

// Settle settles capability n, which the plan found no admitted version and no feasible
// recipe for, with its reconstruct block (spec/capability.md §5a), through its job: one
// per contract, target and trust policy (plan.JobIdentity), opened by the first apply that
// needs it and joined by every later one. Each round, while the budget lasts: a proposal is
// made (the builder runs in the sandbox with the job mounted read-only at /job: contract,
// schemas, dev and repair cases, and every earlier round's failure as a counterexample; or
// one is sent from outside), built over by the build step if there is one, packaged on the
// base, and the candidate evaluated and admitted exactly as a recipe's is. A rejection goes
// to the next round's job.
//
// The job and its rounds are in the state database, and each part of a round is charged as
// it ends: an apply killed at any point resumes the job where it stood (a finished round is
// not run again, the round it died in is dispatched again with what it spent so far), and
// the sealed-once rule and the publish outbox see to the rest.
//
// Admitted, Settle returns the rejections of the job's earlier rounds, for the apply's
// report; a job that ends without an admission is an *Error.
func (rc *Reconstructor) Settle(ctx context.Context, n *graph.Node) ([]evaluate.Rejection, error) {
	dossier, err := evaluate.DossierOf(n.Capability, rc.Apply.Image)
	if err != nil {
		return nil, fmt.Errorf("the reference dossier: %w", err)
	}
	jb, err := rc.openJob(ctx, n, dossier)
	if err != nil {
		return nil, fmt.Errorf("opening the reconstruction job: %w", err)
	}
	j := &job{rc: rc, n: n, block: n.Capability.Reconstruct, state: jb, dossier: dossier}
	if j.block.Proposals != nil {
		j.src = externalSource{j}
	} else {
		j.src = commandBuilder{j}
	}
	return j.run(ctx)
}

// openJob opens capability n's job, or joins the one an earlier apply opened, with the
// budget its reconstruct block says now, the nodes that wait for it and its reference
// dossier as this apply froze it. A job that ended
// (exhausted, unresolved, or admitted by an apply whose artifact the plan did not find) is
// reopened: whether anything is left to do is the budget's to say, and what it spent stays.
func (rc *Reconstructor) openJob(ctx context.Context, n *graph.Node, dossier *evaluate.Dossier) (state.Job, error) {
	id, target, policy, err := plan.RecordedJob(ctx, rc.Workspace.State, rc.Graph, n)
	if err != nil {
		return state.Job{}, err
	}
	var waiting []string
	for _, a := range rc.Graph.Order {
		if slices.Contains(rc.Graph.Nodes[a].Deps, n.Address) {
			waiting = append(waiting, a)
		}
	}
	b := n.Capability.Reconstruct.Budget
	db := rc.Workspace.State
	jb, _, err := db.OpenJob(ctx, state.Job{ID: id, Capability: n.Capability.Name, Contract: n.Digest, Target: target, Policy: policy,
		Budget:  state.JobBudget{Candidates: b.Candidates, Probes: b.Probes, Wall: b.Wall, Scratch: b.Scratch, Spend: b.Spend},
		Waiting: waiting, Dossier: dossierDigest(dossier)})
	if err != nil {
		return state.Job{}, err
	}
	if jb.Status != state.JobOpen {
		if err := db.SetJobStatus(ctx, jb.ID, state.JobOpen, "", ""); err != nil {
			return state.Job{}, err
		}
		jb.Status = state.JobOpen
	}
	return jb, nil
}

// AdmittedElsewhere closes capability n's job, if it has one still open, now that the
// registry holds pin, an admitted version: the apply that admitted it died before it
// recorded the admission (or another project's admission reached the shared registry
// first). A round it left running is closed as admitted, with the pinned tree as its
// candidate.
func (rc *Reconstructor) AdmittedElsewhere(ctx context.Context, n *graph.Node, pin *admit.Admitted) error {
	id, _, _, err := plan.RecordedJob(ctx, rc.Workspace.State, rc.Graph, n)
	if err != nil {
		return err
	}
	db := rc.Workspace.State
	jb, err := db.Job(ctx, id)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && jb.Status == state.JobAdmitted) {
		return nil
	}
	if err != nil {
		return err
	}
	rounds, err := db.Rounds(ctx, id)
	if err != nil {
		return err
	}
	for _, rd := range rounds {
		if rd.Status == state.RoundRunning {
			if err := db.FinishRound(ctx, id, rd.N, state.RoundAdmitted, "", pin.Tree, nil); err != nil {
				return err
			}
		}
	}
	return db.SetJobStatus(ctx, id, state.JobAdmitted, "found admitted in the registry as "+pin.Ref, pin.Ref)
}

func (rc *Reconstructor) emit(e event.Event) {
	if rc.Emit != nil {
		rc.Emit(e)
	}
}

func (rc *Reconstructor) fault(point, node string) {
	if rc.Fault != nil {
		rc.Fault(point, node)
	}
}

// job is one capability's reconstruction job, as one apply works on it.
type job struct {
	rc    *Reconstructor
	n     *graph.Node // the capability
	block *lang.Reconstruct
	state state.Job
	src   ProposalSource
	// dossier is the capability's reference dossier as this apply froze it (nil without
	// one): the job records its digest, and every builder's provenance names it.
	dossier *evaluate.Dossier
	// rep is what the job has done so far: what it used, every failed round's failure.
	rep *Error
}

// run runs the job's rounds until a candidate is admitted (it returns the rejections of
// the rounds before), the budget is spent (exhausted) or the job cannot go on (unresolved).
func (j *job) run(ctx context.Context) ([]evaluate.Rejection, error) {
	db := j.rc.Workspace.State
	rounds, err := db.Rounds(ctx, j.state.ID)
	if err != nil {
		return nil, err
	}
	j.rep = &Error{Capability: j.n.Address, Job: j.state.ID, Budget: j.state.Budget}
	var resume state.Round // a round an earlier apply dispatched and did not finish
	for _, rd := range rounds {
		j.rep.Used = j.rep.Used.Add(rd.Used)
		switch rd.Status {
		case state.RoundRunning:
			resume = rd
		case state.RoundFailed, state.RoundRejected:
			var rej evaluate.Rejection
			if err := json.Unmarshal(rd.Failure, &rej); err != nil {
				return nil, fmt.Errorf("job %s: round %d's failure: %w", j.state.ID, rd.N, err)
			}
			j.rep.Rounds = append(j.rep.Rounds, rej)
		}
	}
	dispatched := len(rounds)
	for {
		n := resume.N
		if n == 0 {
			n = dispatched + 1
			if why, err := j.overBudget(ctx, n); err != nil {
				return nil, err
			} else if why != "" {
				return nil, j.end(ctx, state.JobExhausted, why)
			}
		}
		if why := j.cannotPromote(ctx); why != "" {
			return nil, j.end(ctx, state.JobUnresolved, why)
		}
		if err := db.StartRound(ctx, j.state.ID, n, j.src.Name(), j.rc.RunID); err != nil {
			return nil, err
		}
		rd := &round{job: j, num: n, prior: resume}
		admitted, err := rd.run(ctx)
		resume, dispatched = state.Round{}, max(dispatched, n)
		var end *jobEnd
		switch {
		case errors.As(err, &end):
			return nil, j.end(ctx, end.status, end.why)
		case err != nil:
			return nil, err
		case admitted:
			report := fmt.Sprintf("admitted in round %d of %d as %s; spent %s", n, j.state.Budget.Candidates, rd.candidate.Ref, spendOf(j.rep.Used))
			return j.rep.Rounds, db.SetJobStatus(ctx, j.state.ID, state.JobAdmitted, report, rd.candidate.Ref)
		}
		j.rc.fault(FaultRoundFinished, j.n.Address)
	}
}

// jobEnd is how a round says the job cannot go on.
type jobEnd struct {
	status state.JobStatus
	why    string
}

func (e *jobEnd) Error() string { return e.why }

// end records the end of a job that admitted nothing, reports it and returns the
// capability's failure, the job's report.
func (j *job) end(ctx context.Context, status state.JobStatus, why string) error {
	rep := j.rep
	rep.Status, rep.Why = status, why
	if err := j.rc.Workspace.State.SetJobStatus(context.WithoutCancel(ctx), rep.Job, status, rep.Error(), ""); err != nil {
		return err
	}
	typ := "reconstruct_exhausted"
	if status == state.JobUnresolved {
		typ = "reconstruct_unresolved"
	}
	j.rc.emit(event.Event{Type: typ, Node: j.n.Address, Job: rep.Job, Message: rep.Headline()})
	return rep
}

// errWallSpent is the cause of a proposal stopped at the job's wall-time budget, or at the
// project's ceiling on all jobs' wall time in one apply.
var errWallSpent = errors.New("the job's wall-time budget (or the project's reconstruct_deadline) ran out")

// wallLeft is the wall time a round may take, having used used: what the job's budget has
// left, and no more than what the project's ceiling has left for this apply.
func (j *job) wallLeft(used state.Usage) time.Duration {
	return max(min(j.state.Budget.Wall-used.Wall, j.rc.deadline()-time.Duration(j.rc.wall.Load())), 0)
}

// deadline is the project's ceiling on the wall time of all jobs in one apply.
func (rc *Reconstructor) deadline() time.Duration {
	if d := rc.Graph.Config.Project.ReconstructDeadline; d > 0 {
		return d
	}
	return lang.DefaultReconstructDeadline
}

func (j *job) wallSpentWhy() string {
	return fmt.Sprintf("the wall-time budget is spent: the job's is %s, and the project's reconstruct_deadline bounds all jobs of one apply", j.state.Budget.Wall)
}

// candidatesSpent is overBudget's reason when every candidate was tried: the report's
// headline says that already.
const candidatesSpent = "every candidate was tried"

// overBudget says why round n may not be dispatched within the job's budget, with what it
// used so far, or within the project's ceiling; "" when it may.
func (j *job) overBudget(ctx context.Context, n int) (string, error) {
	b, used := j.state.Budget, j.rep.Used
	switch {
	case n > b.Candidates:
		return candidatesSpent, nil
	case used.Probes >= b.Probes:
		return fmt.Sprintf("the probes budget is spent: %d of %d used", used.Probes, b.Probes), nil
	case used.Wall >= b.Wall || j.wallLeft(used) <= 0:
		return j.wallSpentWhy(), nil
	}
	return j.overSpend(ctx)
}

// overSpend says why the job, with what it spent so far, is past its spend budget, or all
// jobs together past the project's reconstruct_spend; "" when neither is. A round is
// dispatched only within both, and its candidate evaluated only if its proposal kept
// within both.
func (j *job) overSpend(ctx context.Context) (string, error) {
	if spent := j.rep.Used.Spend; spent > j.state.Budget.Spend {
		return fmt.Sprintf("the spend budget is spent: %g of %g", spent, j.state.Budget.Spend), nil
	}
	all, err := j.rc.Workspace.State.JobsSpend(ctx)
	if err != nil {
		return "", err
	}
	if ceiling := j.rc.Graph.Config.Project.ReconstructSpend; all > ceiling {
		return fmt.Sprintf("the project's reconstruct_spend is spent: all jobs together spent %g of %g", all, ceiling), nil
	}
	return "", nil
}

// cannotPromote says why no candidate could be promoted however good it is: the sealed set
// is used up (every sealed case but fewer than promotion needs was shown to a builder); ""
// when one could.
func (j *job) cannotPromote(ctx context.Context) string {
	rc := j.rc
	su := evaluate.SealedNow(ctx, rc.Workspace, rc.Graph.Config.Dir, rc.TrustedKeys)(j.n)
	if need := evaluate.MinUndisclosed(rc.Graph.Config.Project); su != nil && su.Undisclosed < need {
		return fmt.Sprintf("the sealed set is used up: %d undisclosed sealed case(s) left, and promotion needs %d; add sealed cases", su.Undisclosed, need)
	}
	return ""
}

// dossierDigest is d's digest, "" without a dossier.
func dossierDigest(d *evaluate.Dossier) digest.Digest {
	if d == nil {
		return ""
	}
	return d.Digest
}

// spendOf says what a job used, for its reports.
func spendOf(u state.Usage) string {
	return fmt.Sprintf("%d probe(s), %s wall, %s CPU, %g spend", u.Probes, u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond), u.Spend)
}

// roundLabel names a round's candidate where a recipe's address names a recipe's.
func roundLabel(round int) string { return fmt.Sprintf("reconstruct round %d", round) }

// roundURI names what node addr read in round of job (the capability's /job, the
// builder's proposal), in the provenance of the run that read it.
func roundURI(addr, job string, round int) string {
	return fmt.Sprintf("foundry:%s#%s/round-%d", addr, job, round)
}

// Error is a reconstruction job that ended without an admission: exhausted (its budget
// spent) or unresolved (it cannot go on), with every round's failure in order.
type Error struct {
	Capability string
	Job        string
	Status     state.JobStatus
	Why        string
	Budget     state.JobBudget
	Used       state.Usage
	Rounds     []evaluate.Rejection
}

// Headline is the report's first line: how the job ended, and why.
func (e *Error) Headline() string {
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
func (e *Error) Error() string {
	s := e.Headline() + "\n  spent: " + spendOf(e.Used)
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
func (e *Error) Smallest() *evaluate.Rejection {
	var best *evaluate.Rejection
	for i := range e.Rounds {
		if c := &e.Rounds[i]; c.Case != "" && (best == nil || len(c.Input) < len(best.Input)) {
			best = c
		}
	}
	return best
}
