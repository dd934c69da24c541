package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Options configure one apply.
type Options struct {
	// Executor runs steps and evaluations. An executors.Opener (executors.Lazy) is opened
	// when the first of them is about to run, and never by an apply with nothing to run.
	Executor executors.Executor
	// Steps, when set, runs steps and reconstruction builders in place of Executor: the
	// Temporal engine, whose workers run them (spec/temporal.md). Evaluations and acceptance
	// stay on Executor, this machine's sandbox, so sealed cases never leave it.
	Steps executors.Executor
	// Shared, when set, is a cache shared with other machines (the Temporal engine's records
	// in the registry): looked up when this workspace's cache misses, given every success.
	Shared      SharedCache
	Parallelism int               // steps run at once; default 4
	Events      func(event.Event) // progress, called from many goroutines one at a time; may be nil
	Args        []string          // the command line, recorded with the run
	Faults      FaultInjector     // test hook: kill the process at named points; nil in production
	// Signer signs the provenance of every executed step. Required: an execution without
	// evidence is not something Foundry produces.
	Signer *provenance.Signer
	// Version is this Foundry's version, recorded in provenance.
	Version string
	// Registry is where admitted capabilities are published and pinned versions pulled.
	Registry registry.Store
	// TrustedKeys verify what is pulled from the registry.
	TrustedKeys []*provenance.Verifier
	// Trace records the apply's trace; when nil, Apply records one of its own. Either is
	// kept with the run (workspace.TracePaths) when the apply ends.
	Trace *trace.Recorder
	// Rebuild are the -rebuild addresses: steps or checks whose cached result is checked by
	// running them again in a fresh sandbox with empty caches (rebuild.go). Each must have
	// a cached result; the apply fails a step that does not, or whose rebuild differs.
	Rebuild []string
}

// SharedCache is an action cache beyond this workspace. Lookup verifies what it finds and
// stores it in the workspace's cache before returning it; a record it will not take is
// refused (with why), never an error. Record shares a success; failing to is not the step's
// failure.
type SharedCache interface {
	Lookup(ctx context.Context, key digest.Digest) (res *cache.Result, refused string, err error)
	Record(ctx context.Context, res *cache.Result) error
}

// FaultInjector is called at named points of an apply (see faultPoints); a test build of the
// CLI sets one that kills the process to prove crash safety.
type FaultInjector func(point, node string)

// Fault points, in the order a step passes them (a publish and a delivery have their own:
// outbox.FaultBeforeDispatch, FaultAfterDispatch, FaultAfterCommit, FaultBeforeRecord).
const (
	FaultBeforeExec    = "before-exec"     // attempt recorded, container not yet created
	FaultAfterExec     = "after-exec"      // process finished, outputs not yet stored
	FaultAfterOutputs  = "after-outputs"   // outputs in the store, cache entry not yet written
	FaultAfterCachePut = "after-cache-put" // cache entry written, node not yet marked done
)

// StepError is a failed step: what ran, how it ended, and where its full log is.
type StepError struct {
	Node      string
	Action    digest.Digest
	Argv      []string
	ExitCode  int
	TimedOut  bool
	OOMKilled bool
	Reason    string   // for failures that are not a process exit (missing output, bad input)
	NotRun    bool     // the executor could not run it at all (Reason says why)
	LogTail   []string // the last lines of stderr (or stdout when stderr is empty)
	Stdout    digest.Digest
	Stderr    digest.Digest
	// CPU and PeakMemory are what the process used, when it ran and exited (a reconstruction
	// charges a failing builder's or build's run as a succeeding one's).
	CPU        time.Duration
	PeakMemory int64
}

func (e *StepError) Error() string {
	switch {
	case e.Reason != "":
		return fmt.Sprintf("%s: %s", e.Node, e.Reason)
	case e.TimedOut:
		return fmt.Sprintf("%s: killed at its time limit", e.Node)
	case e.OOMKilled:
		return fmt.Sprintf("%s: killed at its memory limit", e.Node)
	}
	return fmt.Sprintf("%s: exited with code %d", e.Node, e.ExitCode)
}

// Panic is a panic raised while a node was being settled on one of an apply's goroutines,
// with the stack where it was raised. The walk raises it again on the goroutine that drives
// it, so that the caller of Apply can recover every panic of an apply, not only those of its
// own goroutine (a panic nobody recovers ends the process with Go's exit status 2).
type Panic struct {
	Node  string // the node being settled
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack, from where it was recovered
}

func (p *Panic) Error() string { return fmt.Sprintf("panic while settling %s: %v", p.Node, p.Value) }

// Result summarizes an apply.
type Result struct {
	RunID    string
	Executed int
	Cached   int
	Built    int // seeds, packages
	Fetched  int // sources fetched in this apply (those already stored count as cached)
	Failed   []*StepError
	Skipped  []string // nodes not run because something they need failed
	// Interrupted are the nodes that were running when the apply's context was cancelled:
	// their executor killed them. They are not failures; the next apply runs them again.
	Interrupted []string
	Elapsed     time.Duration
	// Rejections are candidates turned down before a capability was admitted.
	Rejections []evaluate.Rejection
	// Delivered are the products delivered, in the order they were.
	Delivered []Delivered
	// Accepted maps each product whose acceptance passed in this apply to its acceptance
	// evidence: the envelope digest of the signed acceptance result (see acceptanceOf).
	Accepted map[string]digest.Digest
}

// runner carries one apply.
type runner struct {
	ws      *workspace.Workspace
	att     *workspace.Attester // signs with opt.Signer
	g       *graph.Graph
	plan    *plan.Plan
	planned planIndex // the plan's nodes and capabilities by address
	opt     Options
	runID   string
	scratch string

	evMu sync.Mutex

	mu      sync.Mutex
	results map[string]*nodeResult
	// precached are the steps the plan found in the action cache; they are settled without
	// touching the database again.
	precached map[string]*plan.Keyed
	// nested are the results of recipe walks driven by capability nodes; rejections the
	// candidates turned down on the way to an admission.
	nested     []*Result
	rejections []evaluate.Rejection

	// caps records what happens to capabilities in this run, for foundry status.
	caps *capabilityLog
	// trace records the apply's spans, kept with the run (keepTrace).
	trace *trace.Recorder

	sealedOnce sync.Once
	sealed     map[digest.Digest]string
	sealedErr  error
	// sealedImages memoizes refuseSealedImage by seed: a seed's files do not change within
	// an apply, and every step that runs in it would hash them again.
	sealedImagesMu sync.Mutex
	sealedImages   map[string]error
	// keys verify this apply's own signatures and the trusted keys' (the delivery's receipts,
	// a reconstruction's earlier rounds).
	keys []*provenance.Verifier

	// eval evaluates the candidates of the capabilities this run builds, and adm admits
	// those that pass and pulls the pinned ones; rec settles those it reconstructs.
	eval *evaluate.Evaluator
	adm  *admit.Admitter
	rec  *reconstruct.Reconstructor
	// dlv delivers the products whose checks passed; delivered are those it delivered.
	dlv       *deliver.Deliverer
	delivered []Delivered

	// The executor, opened and cleaned up after dead runs on first use (recover.go). fatal
	// is set when that fails, or when the state database cannot be written (stop), and
	// stops the walk. sweptAgain is closed when the second sweep of dead runs' leftovers is
	// done.
	exeOnce    sync.Once
	exe        executors.Executor
	exeErr     error
	fatal      atomic.Pointer[error]
	sweptAgain chan struct{}
}

// containerPrefix starts the ID of every container of this run: the next apply cleans up
// after a dead run by this prefix.
func (r *runner) containerPrefix() string { return ContainerPrefixOf(r.runID) }

// ContainerPrefixOf starts the ID of every container, snapshot and bundle of run runID:
// "foundry-", the run ID's random part (its last eight hex digits) and "-". Runtimes are
// shared by every project on the machine (one runc root, one containerd namespace), so the
// prefix must name one run only: the leftovers of a dead run are removed by it, and must
// not take another project's running steps with them.
func ContainerPrefixOf(runID string) string {
	tag := runID
	if i := strings.LastIndexByte(runID, '-'); i >= 0 {
		tag = runID[i+1:]
	}
	return ContainerPrefix + tag + "-"
}

// nodeResult is what a finished node produced, for the nodes that use it.
type nodeResult struct {
	image  executors.Image // seeds
	step   *cache.Result   // steps and checks
	tree   digest.Digest   // packages and capabilities: the artifact tree; an accepted product's service; a source's tree
	source *cache.Result   // sources: the record of the fetch (source.go)

	// accepted is an accepted product's evidence: the envelope digest of its signed
	// acceptance result, and the envelope (see acceptanceOf).
	accepted   digest.Digest
	acceptance []byte
}

// Apply runs every node of the plan that has work to do, in dependency order and in
// parallel, and records everything in the workspace. A node whose dependency failed is
// skipped, and reported once as skipped rather than as another failure. It holds the
// workspace's apply lock throughout, waiting (until ctx ends) while another process has it.
func Apply(ctx context.Context, ws *workspace.Workspace, g *graph.Graph, p *plan.Plan, opt Options) (*Result, error) {
	if opt.Parallelism <= 0 {
		opt.Parallelism = 4
	}
	if opt.Signer == nil {
		return nil, errors.New("apply needs a signing key: every executed step gets signed provenance")
	}
	for _, a := range opt.Rebuild {
		if n := g.Nodes[a]; n == nil || (n.Kind != graph.KindStep && n.Kind != graph.KindCheck) {
			return nil, fmt.Errorf("-rebuild %s: no such step or check in the project", a)
		}
		if p.Replaced(a) {
			return nil, fmt.Errorf("-rebuild %s: it is also -replace'd; a rebuild checks a cached result, a replace discards it", a)
		}
	}
	start := time.Now()
	unlock, err := ws.LockContext(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r := &runner{ws: ws, att: ws.Attester(opt.Signer), g: g, plan: p, planned: indexPlan(p), opt: opt, results: map[string]*nodeResult{}}
	if r.trace = opt.Trace; r.trace == nil {
		r.trace = trace.New(start)
	}
	ctx = trace.With(ctx, r.trace)
	if err := r.recoverRuns(ctx); err != nil {
		return nil, err
	}
	// The executor half of recovery runs when the first step or evaluation is about to
	// (r.executor); its second sweep ends with the apply.
	defer r.finishCleanup()
	run, err := ws.State.BeginRun(ctx, p.Digest, opt.Args)
	if err != nil {
		return nil, err
	}
	r.runID = run.ID
	r.caps = newCapabilityLog(ws.State, run.ID)
	r.scratch = filepath.Join(ws.Dir, "runs", run.ID)
	r.eval = &evaluate.Evaluator{Workspace: ws, Attester: r.att, TrustedKeys: opt.TrustedKeys, Config: g.Config,
		Executor: r.executor, Scratch: r.scratch, ContainerPrefix: r.containerPrefix(), Emit: r.emit, Fault: r.fault}
	r.eval.Images = rounds{r}.Image
	r.adm = &admit.Admitter{Workspace: ws, Attester: r.att, Graph: g, Registry: opt.Registry, TrustedKeys: opt.TrustedKeys,
		Version: opt.Version, RunID: run.ID, Scratch: r.scratch, Emit: r.emit, Fault: r.fault}
	own, err := opt.Signer.Verifier("signing key " + opt.Signer.KeyID())
	if err != nil {
		return nil, err
	}
	r.keys = append([]*provenance.Verifier{own}, opt.TrustedKeys...)
	r.dlv = &deliver.Deliverer{Workspace: ws, Attester: r.att, Keys: r.keys,
		Project: g.Config.Project.Name, RunID: run.ID, Emit: r.emit, Fault: r.fault}
	r.rec = &reconstruct.Reconstructor{Workspace: ws, Graph: g, Apply: rounds{r}, Evaluator: r.eval,
		TrustedKeys: opt.TrustedKeys, Keys: r.keys, RunID: run.ID, Scratch: r.scratch, Emit: r.emit, Fault: r.fault}
	// The scratch directory marks the run's leftovers for the next apply (recover.go) when
	// they could not all be removed.
	keepScratch := false
	defer func() {
		if !keepScratch {
			os.RemoveAll(r.scratch)
		}
	}()

	active, deps := r.activeNodes()
	keys, err := p.Keys(ctx, ws, g)
	if err != nil {
		return nil, err
	}
	steps, err := r.prefetch(ctx, active, keys)
	if err != nil {
		return nil, err
	}
	building := 0
	for _, a := range active {
		if c := r.planned.capabilities[a]; c != nil && (c.Status == plan.StatusBuild || c.Status == plan.StatusReconstruct) {
			building++
		}
	}
	r.emit(event.Event{Type: "run_started", Run: run.ID, Total: steps, Capabilities: building})
	res := r.walk(ctx, active, deps)
	for _, nr := range r.nested {
		res.Executed += nr.Executed
		res.Cached += nr.Cached
		res.Built += nr.Built
		res.Skipped = append(res.Skipped, nr.Skipped...)
		// A recipe that failed to build is reported through its capability, which failed
		// or fell through to another recipe; its step errors are kept for the report.
		res.Failed = append(res.Failed, nr.Failed...)
	}
	res.Rejections = r.rejections
	res.Delivered = r.delivered
	res.Accepted = r.accepted()
	res.RunID = run.ID
	res.Elapsed = time.Since(start)
	status := state.RunSucceeded
	switch {
	case ctx.Err() != nil:
		// Cancelled (the CLI cancels on SIGINT, SIGTERM and SIGHUP): nothing new was
		// started once it was, and the executor killed what ran; what the daemon created
		// for requests in flight is swept by the run's prefix.
		status = state.RunInterrupted
		if !r.sweepInterrupted(ctx) {
			keepScratch = true
		}
	case len(res.Failed) > 0 || r.fatalErr() != nil:
		status = state.RunFailed
	}
	if err := ws.State.FinishRun(context.WithoutCancel(ctx), run.ID, status); err != nil {
		return res, err
	}
	if err := r.keepTrace(status, start.Add(res.Elapsed)); err != nil {
		// The run is recorded and its results stored: a trace not kept loses no work.
		r.emit(event.Event{Type: "trace_not_kept", Run: run.ID, Message: err.Error()})
	}
	r.emit(event.Event{Type: "run_finished", Run: run.ID, Elapsed: res.Elapsed,
		Message: fmt.Sprintf("%d executed, %d cached, %d failed, %d skipped", res.Executed, res.Cached, len(res.Failed), len(res.Skipped))})
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	if err := r.fatalErr(); err != nil {
		return res, err
	}
	return res, r.caps.failure()
}

// keepTrace ends the apply's trace at end and writes it, with the run's summary, where
// `foundry trace` and `foundry report` read it (workspace.TracePaths).
func (r *runner) keepTrace(status state.RunStatus, end time.Time) error {
	f, sum := r.trace.Finish(r.runID, string(status), end)
	events, summary := r.ws.TracePaths(r.runID)
	if err := trace.WriteFile(events, f); err != nil {
		return err
	}
	return trace.WriteFile(summary, sum)
}

// interruptedError is the error of a node that the cancellation of ctx stopped: "stopped:
// " and the cancellation's cause ("interrupted by SIGHUP" from the CLI).
func interruptedError(ctx context.Context) error {
	return fmt.Errorf("stopped: %w", context.Cause(ctx))
}

// prefetch records the run's steps, those the plan found in the action cache (keys) as
// cached with their definitions, in one transaction: a no-op apply then costs a handful of
// database writes, not several per node. It returns the number of steps.
func (r *runner) prefetch(ctx context.Context, active []string, keys map[string]*plan.Keyed) (int, error) {
	var pending, hits []state.NodeRef
	var defs []state.Definition
	r.precached = map[string]*plan.Keyed{}
	for _, a := range active {
		n := r.g.Nodes[a]
		if n.Kind != graph.KindStep && n.Kind != graph.KindCheck {
			continue
		}
		k := keys[a]
		// A step to rebuild settles through runStep, which finds its cached result again.
		if k == nil || k.Result == nil || !r.usable(k.Result) || slices.Contains(r.opt.Rebuild, a) {
			pending = append(pending, state.NodeRef{Address: a, Action: n.Digest})
			continue
		}
		hits = append(hits, state.NodeRef{Address: a, Action: k.Key})
		defs = append(defs, state.Definition{Address: a, Action: n.Digest, JSON: n.Definition})
		r.precached[a] = k
		r.results[a] = &nodeResult{step: k.Result}
	}
	return len(pending) + len(hits), r.ws.State.StartNodes(ctx, r.runID, pending, hits, defs)
}

// precachedHit reports whether the result the plan found for step n is the one to settle
// it with: its key, computed again from what its producers did settle with, is the same
// (a pinned capability may have fallen through to a recipe since).
func (r *runner) precachedHit(n *graph.Node) bool {
	k := r.precached[n.Address]
	if k == nil {
		return false
	}
	key, _, ok, err := r.g.CacheKey(n, r.content)
	return err == nil && ok && key == k.Key
}

// content is what a step output or capability mounted in this apply holds, from the
// results its producers settled with.
func (r *runner) content(a *lang.Artifact) (graph.Content, bool) {
	prod := r.result(a.Node)
	switch {
	case prod == nil:
		return graph.Content{}, false
	case a.Kind == lang.ArtifactCapability || a.Kind == lang.ArtifactSource:
		return graph.TreeContent(prod.tree), prod.tree != ""
	case prod.step == nil:
		return graph.Content{}, false
	}
	o := prod.step.Output(a.Path)
	if o == nil {
		return graph.Content{}, false
	}
	return plan.OutputContent(o), true
}

func (r *runner) setResult(a string, nr *nodeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[a] = nr
}

func (r *runner) result(a string) *nodeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[a]
}

func (r *runner) emit(e event.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if r.caps != nil {
		r.caps.event(e)
	}
	if r.opt.Events == nil {
		return
	}
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.opt.Events(e)
}

// buildSeed builds a seed's image. The seed's node digest is its build key: it covers the
// content of every host file and directory, so an unchanged seed is not re-read.
func (r *runner) buildSeed(ctx context.Context, n *graph.Node) (executors.Image, error) {
	s := n.Seed
	spec := &seed.Spec{Name: s.Name, Env: s.Env, User: s.User, Workdir: s.Workdir, Platform: s.Platform, Key: string(n.Digest)}
	switch {
	case s.Image != "":
		spec.Import = &seed.Import{Ref: s.Image}
	case s.OCILayout != nil:
		spec.Import = &seed.Import{OCILayout: r.hostPath(s.OCILayout)}
	case s.Tarball != nil:
		spec.Import = &seed.Import{Tarball: r.hostPath(s.Tarball)}
	default:
		for _, l := range s.Layers {
			switch {
			case l.From != nil:
				base := r.result(l.From.Node)
				if base == nil {
					return executors.Image{}, fmt.Errorf("%s is not built", l.From.Node)
				}
				img := base.image
				spec.Layers = append(spec.Layers, seed.Layer{From: &img})
			case l.Files != nil:
				files := map[string]string{}
				for p, a := range l.Files {
					hp, err := r.fileSource(a)
					if err != nil {
						return executors.Image{}, err
					}
					files[p] = hp
				}
				spec.Layers = append(spec.Layers, seed.Layer{Files: files, Symlinks: l.Symlinks})
			case l.Dir != nil && l.Dir.Kind == lang.ArtifactSource:
				dir, err := r.sourceTree(l.Dir)
				if err != nil {
					return executors.Image{}, err
				}
				spec.Layers = append(spec.Layers, seed.Layer{Dir: dir, At: l.At})
			case l.Dir != nil:
				spec.Layers = append(spec.Layers, seed.Layer{Dir: r.hostPath(l.Dir), At: l.At})
			}
		}
	}
	return r.ws.Seeds.Build(ctx, spec)
}

// hostPath is where a file or directory artifact read at plan time lives on this machine.
func (r *runner) hostPath(a *lang.Artifact) string {
	if a.Kind == lang.ArtifactProjectDir || a.Kind == lang.ArtifactProjectFile {
		return filepath.Join(r.g.Config.Dir, filepath.FromSlash(a.Path))
	}
	return a.Path
}

// fileSource returns a host path holding a file artifact's bytes: the host file itself, or
// for inline text a store blob.
func (r *runner) fileSource(a *lang.Artifact) (string, error) {
	if a.Kind == lang.ArtifactInline {
		d, err := r.ws.Store.PutBytes(a.Inline)
		if err != nil {
			return "", err
		}
		return r.ws.Store.Path(d), nil
	}
	return r.hostPath(a), nil
}

// ContainerPrefix is the prefix of every container, snapshot and bundle Foundry creates.
const ContainerPrefix = "foundry-"

func (r *runner) fault(point, node string) {
	if r.opt.Faults != nil {
		r.opt.Faults(point, node)
	}
}

// shortAddr makes a node address safe and short for container IDs.
func shortAddr(a string) string {
	var b strings.Builder
	dash := false // runs of other characters become one dash: containerd refuses "--" in an ID
	for _, c := range strings.ToLower(a) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if len(s) > 30 {
		s = s[len(s)-30:]
	}
	return strings.Trim(s, "-")
}
