package run

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// runStep settles a step: from the action cache when its action digest has a result this
// apply may use (see usable), else by executing it. Only a success observed by the executor
// is cached.
func (r *runner) runStep(ctx context.Context, n *graph.Node) (outcome, error) {
	key, keyDef, ok, err := r.g.CacheKey(n, r.content)
	if err == nil && !ok {
		err = fmt.Errorf("%s: what it mounts was not built", n.Address)
	}
	if err != nil {
		return 0, err
	}
	sp := trace.Start(ctx, "cache lookup", "phase")
	res, hit, err := r.ws.Cache.Lookup(ctx, key)
	if err != nil {
		sp.End()
		return 0, err
	}
	shared := ""
	if !hit && r.opt.Shared != nil && !r.plan.Replaced(n.Address) {
		res, shared, hit = r.lookupShared(ctx, key)
	}
	sp.End()
	rerun := ""
	switch {
	case r.plan.Replaced(n.Address):
		hit, rerun = false, "replaced (-replace): running it again"
	case hit && !r.usable(res):
		hit, rerun = false, unsandboxedRerun
	}
	if slices.Contains(r.opt.Rebuild, n.Address) {
		if !hit {
			return 0, fmt.Errorf("%s: -rebuild: it has no cached result to rebuild; it was never built (or not with these inputs): apply it first, then rebuild it", n.Address)
		}
		if err := r.rebuildStep(ctx, n, key, keyDef, res); err != nil {
			return 0, err
		}
		r.setResult(n.Address, &nodeResult{step: res})
		return executed, nil
	}
	if hit {
		r.setResult(n.Address, &nodeResult{step: res})
		if err := r.ws.State.NodesCached(ctx, r.runID, []state.NodeRef{{Address: n.Address, Action: key}}); err != nil {
			return 0, err
		}
		if err := r.ws.State.RecordDefinition(ctx, n.Address, n.Digest, n.Definition); err != nil {
			return 0, err
		}
		r.emit(event.Event{Type: "node_cached", Node: n.Address, Action: n.Digest, Message: shared})
		trace.Instant(ctx, n.Address, "cache", map[string]any{"hit": cmp.Or(shared, "action cache"), "key": string(key)})
		return cached, nil
	}
	if rerun == "" && shared != "" {
		rerun = shared
	}
	res, err = r.runAction(ctx, n, key, keyDef, rerun)
	if err != nil {
		return 0, err
	}
	r.setResult(n.Address, &nodeResult{step: res})
	return executed, nil
}

// lookupShared looks key up in the shared cache. It says where a hit came from, or why the
// record found was refused (the step then runs); an unreachable shared cache is a miss.
func (r *runner) lookupShared(ctx context.Context, key digest.Digest) (*cache.Result, string, bool) {
	res, refused, err := r.opt.Shared.Lookup(ctx, key)
	switch {
	case err != nil:
		return nil, "the shared cache could not be read (" + err.Error() + "): running it", false
	case refused != "":
		return nil, "the shared record was refused (" + refused + "): running it", false
	case res == nil:
		return nil, "", false
	}
	return res, "from the shared cache", true
}

// runAction executes n, a step or a reconstruction's builder, in the sandbox under its
// cache key, and reports it: node_started (with note), then node_done, or node_failed with
// the failure recorded in the state database. extra are inputs mounted besides its own
// (see execute).
func (r *runner) runAction(ctx context.Context, n *graph.Node, key digest.Digest, keyDef []byte, note string, extra ...input) (*cache.Result, error) {
	return r.runActionMode(ctx, n, key, keyDef, note, nil, extra...)
}

// runActionMode is runAction, or with rb a rebuild of its cached result (rebuild.go).
func (r *runner) runActionMode(ctx context.Context, n *graph.Node, key digest.Digest, keyDef []byte, note string, rb *rebuildMode, extra ...input) (*cache.Result, error) {
	if r.opt.Executor == nil {
		return nil, fmt.Errorf("%s must run, but no executor is configured", n.Address)
	}
	exe := r.opt.Steps
	// A fixed-output step's broker runs beside its sandbox, and a step's cache volumes are
	// this machine's: such a step runs on this machine.
	if exe == nil || n.Step.Network == lang.NetworkEgress || len(n.Step.Caches) > 0 {
		var err error
		if exe, err = r.executor(ctx, n.Address); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	r.emit(event.Event{Type: "node_started", Node: n.Address, Action: n.Digest, Message: note})
	res, err := r.execute(ctx, n, exe, key, keyDef, rb, extra...)
	if err != nil && ctx.Err() != nil {
		err = interruptedError(ctx)
	}
	if err != nil {
		var se *StepError
		if errors.As(err, &se) {
			se.Node, se.Action, se.Argv = n.Address, n.Digest, n.Step.Run
		}
		code := -1
		if se != nil {
			code = se.ExitCode
		}
		ferr := r.ws.State.NodeFinished(context.WithoutCancel(ctx), r.runID, n.Address, state.NodeResult{Status: state.NodeFailed, ExitCode: &code, Error: err.Error()})
		r.emit(event.Event{Type: "node_failed", Node: n.Address, Action: n.Digest, Elapsed: time.Since(start), ExitCode: &code, Message: err.Error()})
		if ferr != nil {
			return nil, errors.Join(err, ferr)
		}
		return nil, err
	}
	zero := 0
	done := event.Event{Type: "node_done", Node: n.Address, Action: n.Digest, Elapsed: time.Since(start), ExitCode: &zero}
	if rb != nil {
		done.Message = rb.reproduced(r.ws.Store)
	}
	r.emit(done)
	return res, nil
}

// unsandboxedRerun is the message of a step that runs although its action has a cached
// result, because the local executor produced it.
const unsandboxedRerun = "its cached result ran unsandboxed (-executor local): running it in the sandbox"

// usable reports whether a cached result may settle a step in this apply. An apply that runs
// steps in a sandbox does not take a result the local executor produced on the host (its
// provenance says isolation "none"): it runs the step again, and the sandboxed record then
// replaces that one. Any apply takes a sandboxed result.
func (r *runner) usable(res *cache.Result) bool {
	return res.Isolation != executors.IsolationNone || r.opt.Executor == nil || r.opt.Executor.Isolation() == executors.IsolationNone
}

// execute runs the step once and, if it succeeded, stores its outputs and its cache record
// under key, the digest of keyDef. extra are inputs the engine mounts besides the step's
// own (a reconstruction's /job); they are in its provenance like the others.
//
// A rebuild (rb not nil) mounts an empty directory for each cache, stores the outputs but
// caches nothing, compares them with rb's cached result, and signs provenance that names the
// execution it reproduced only when every output is identical.
func (r *runner) execute(ctx context.Context, n *graph.Node, exe executors.Executor, key digest.Digest, keyDef []byte, rb *rebuildMode, extra ...input) (*cache.Result, error) {
	st := n.Step
	if err := r.ws.State.NodeStarted(ctx, r.runID, n.Address, key); err != nil {
		return nil, err
	}
	base := r.result(st.Image.Node)
	if base == nil {
		return nil, fmt.Errorf("image %s is not built", st.Image.Node)
	}
	if err := r.refuseSealedImage(st.Image.Node); err != nil {
		return nil, &StepError{Reason: err.Error()}
	}
	sp := trace.Start(ctx, "inputs", "phase")
	inputs, err := r.mounts(ctx, st)
	sp.End()
	if err != nil {
		return nil, &StepError{Reason: err.Error()}
	}
	inputs = append(inputs, extra...)
	var mounts []executors.Mount
	for _, in := range inputs {
		if in.mount.Source != "" { // else named in the provenance only (a reference dossier)
			mounts = append(mounts, in.mount)
		}
	}
	scratch := filepath.Join(r.scratch, shortAddr(n.Address)+"-"+workspace.NewID())
	outDir := filepath.Join(scratch, "out")
	if err := os.MkdirAll(outDir, 0o777); err != nil {
		return nil, err
	}
	// The sandbox user is not root: it must be able to write /out.
	if err := os.Chmod(outDir, 0o777); err != nil {
		return nil, err
	}
	lim := graph.EffectiveLimits(st.Limits)
	stdout, err := newCappedFile(filepath.Join(scratch, "stdout"), lim.OutputBytes)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := newCappedFile(filepath.Join(scratch, "stderr"), lim.OutputBytes)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()

	id := r.containerPrefix() + shortAddr(n.Address) + "-" + workspace.NewID()
	id = strings.ToLower(id)
	if len(id) > 64 {
		id = id[:64]
	}
	attempt, err := r.ws.State.AttemptStarted(ctx, r.runID, n.Address, exe.Name(), id)
	if err != nil {
		return nil, err
	}
	r.fault(FaultBeforeExec, n.Address)
	action := &executors.Action{
		ID: id, Name: n.Address + "@" + string(key), Platform: st.Platform, Image: base.image, Argv: st.Run, Env: envList(base.image.Env, st.Env), Workdir: st.Workdir,
		User: st.User, Mounts: mounts, OutDir: outDir, Network: executors.NetworkNone,
		Limits: executors.Limits{MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs, Pids: lim.Pids, Timeout: lim.Time,
			DiskBytes: lim.DiskBytes, Inodes: lim.Inodes},
		Stdout: stdout, Stderr: stderr,
	}
	fixed, err := r.fixedOutputFor(n, action)
	if err != nil {
		r.attemptFinished(context.WithoutCancel(ctx), n, attempt, state.OutcomeError, err.Error())
		return nil, err
	}
	var leases []cacheLease
	if rb != nil {
		leases, err = emptyCacheDirs(n, scratch)
	} else {
		leases, err = r.acquireCaches(ctx, n, base.image)
	}
	if err != nil {
		r.attemptFinished(context.WithoutCancel(ctx), n, attempt, state.OutcomeError, err.Error())
		if ctx.Err() != nil {
			return nil, interruptedError(ctx)
		}
		return nil, &StepError{Reason: err.Error(), ExitCode: -1, NotRun: true}
	}
	for _, c := range leases {
		action.Mounts = append(action.Mounts, executors.Mount{Source: c.source(), Target: c.target, Writable: true})
	}
	ran := time.Now()
	xr, err := exe.Run(ctx, action)
	var fullVolume *cacheLease
	if err == nil {
		fullVolume = fullCache(leases)
	}
	releaseCaches(leases)
	if err == nil {
		// The executor's times of the process: before it, the sandbox was being started.
		trace.Phase(ctx, "sandbox start", "phase", ran, xr.Started, ran)
		trace.Phase(ctx, "run", "phase", xr.Started, xr.Finished, ran)
	}
	// Once the process has ended, its result is recorded even if the apply is being
	// interrupted: that takes milliseconds, and a step that finished stays finished.
	bg := context.WithoutCancel(ctx)
	if err != nil && ctx.Err() != nil {
		// The executor killed it; its container is removed by the time the executor closes.
		r.attemptFinished(bg, n, attempt, state.OutcomeInterrupted, interruptedError(ctx).Error())
		return nil, interruptedError(ctx)
	}
	if err != nil {
		r.attemptFinished(bg, n, attempt, state.OutcomeError, err.Error())
		return nil, &StepError{Reason: fmt.Sprintf("the %s executor could not run it: %v", exe.Name(), err), ExitCode: -1, NotRun: true}
	}
	r.fault(FaultAfterExec, n.Address)
	sp = trace.Start(ctx, "store outputs", "phase")
	defer func() { sp.End() }() // ended as the phases below begin; a failure ends it here
	outLog, err := stdout.store(r)
	if err != nil {
		return nil, err
	}
	errLog, err := stderr.store(r)
	if err != nil {
		return nil, err
	}
	res := &cache.Result{
		Action: key, ExitCode: xr.ExitCode, TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled, Signal: xr.Signal,
		Stdout: outLog, Stderr: errLog, Started: xr.Started, Finished: xr.Finished, Duration: xr.Finished.Sub(xr.Started),
		CPU: xr.Usage.CPU, PeakMemory: xr.Usage.PeakMemoryBytes, Executor: exe.Name(), Isolation: exe.Isolation(),
	}
	if xr.Remote != nil {
		// It ran on a worker: its executor there is the builder, and the worker says where.
		res.Executor, res.Isolation, res.Worker = xr.Remote.Executor, xr.Remote.Isolation, xr.Remote.Worker
	}
	// A step that filled its writable space fails whatever its exit status: what it left in
	// /out may be cut short, and the bound, not its own message, says why.
	if xr.Full != nil {
		se := &StepError{Reason: fullReason(xr.Full), ExitCode: xr.ExitCode, Stdout: outLog.Digest, Stderr: errLog.Digest,
			CPU: xr.Usage.CPU, PeakMemory: xr.Usage.PeakMemoryBytes}
		se.LogTail = r.logTail(errLog, outLog, 10)
		r.attemptFinished(bg, n, attempt, state.OutcomeFailed, se.Reason+"; "+logDetail(outLog, errLog))
		return nil, se
	}
	if err := res.Success(); err != nil {
		se := &StepError{ExitCode: xr.ExitCode, TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled, Stdout: outLog.Digest, Stderr: errLog.Digest,
			CPU: xr.Usage.CPU, PeakMemory: xr.Usage.PeakMemoryBytes}
		se.LogTail = r.logTail(errLog, outLog, 10)
		fixed.explain(se)
		outcome := state.OutcomeFailed
		if xr.TimedOut {
			outcome = state.OutcomeTimedOut
		}
		detail := logDetail(outLog, errLog)
		// A step that failed with a cache volume full met ENOSPC there: the bound says why.
		// One that succeeded all the same (a tool that copes with a full cache) succeeds.
		if fullVolume != nil && !xr.TimedOut && !xr.OOMKilled {
			se.Reason = fullVolume.fullReason()
			detail = se.Reason + "; " + detail
		}
		r.attemptFinished(bg, n, attempt, outcome, detail)
		return nil, se
	}
	err = fixed.check(outDir)
	var outputs []cache.Output
	if err == nil {
		outputs, err = r.collectOutputs(outDir, st.Outputs, st.Optional)
	}
	if err == nil && rb != nil {
		if diff := rb.compare(r.ws.Store, outputs); diff != "" {
			err = fmt.Errorf("not reproducible: the rebuild, in a fresh sandbox with empty caches, made other outputs than the cached result (%s):\n%s", rb.orig.Action.Short(), strings.TrimRight(diff, "\n"))
		}
	}
	if err != nil {
		r.attemptFinished(bg, n, attempt, state.OutcomeFailed, err.Error())
		return nil, &StepError{Reason: err.Error(), Stdout: outLog.Digest, Stderr: errLog.Digest, CPU: xr.Usage.CPU, PeakMemory: xr.Usage.PeakMemoryBytes}
	}
	res.Outputs = outputs
	def, err := r.ws.Store.PutBytes(keyDef)
	if err != nil {
		return nil, err
	}
	res.Definition = def
	// Provenance is minted here, from what the executor reported and what was collected,
	// and stored before the cache record that names it: a result is never cached without
	// its evidence. It is about what a step made; a check makes its passing result, named
	// by the cache key it is recorded under: the acceptance evidence a delivery names. A
	// step that makes nothing has no subject for it.
	sp.End()
	sp = nil
	if len(res.Outputs) > 0 || n.Kind == graph.KindCheck {
		sign := trace.Start(ctx, "sign", "phase")
		env, err := r.attest(n, attempt, base.image, inputs, leases, res, lim, fixed, rb)
		if err != nil {
			return nil, fmt.Errorf("%s: provenance: %w", n.Address, err)
		}
		sign.End()
		res.Attestations = []digest.Digest{env}
	}
	if rb != nil {
		// The cached result stays what dependents use; the rebuild's evidence is in the
		// attestation directory, found by the outputs it names.
		if err := r.ws.State.AttemptFinished(bg, r.runID, n.Address, attempt, state.OutcomeSucceeded, logDetail(outLog, errLog)); err != nil {
			return nil, err
		}
		zero := 0
		if err := r.ws.State.NodeFinished(bg, r.runID, n.Address, state.NodeResult{Status: state.NodeDone, ExitCode: &zero}); err != nil {
			return nil, err
		}
		os.RemoveAll(scratch)
		return rb.orig, nil
	}
	r.fault(FaultAfterOutputs, n.Address)
	sp = trace.Start(ctx, "cache write", "phase")
	if err := r.ws.Cache.Put(bg, res); err != nil {
		return nil, err
	}
	if r.opt.Shared != nil {
		// Other machines can do without it: a record not shared only means they run the step.
		if err := r.opt.Shared.Record(bg, res); err != nil {
			r.emit(event.Event{Type: "record_not_shared", Node: n.Address, Action: n.Digest, Message: err.Error()})
		}
	}
	sp.End()
	sp = nil
	r.fault(FaultAfterCachePut, n.Address)
	if err := r.ws.State.AttemptFinished(bg, r.runID, n.Address, attempt, state.OutcomeSucceeded, logDetail(outLog, errLog)); err != nil {
		return nil, err
	}
	zero := 0
	if err := r.ws.State.NodeFinished(bg, r.runID, n.Address, state.NodeResult{Status: state.NodeDone, ExitCode: &zero}); err != nil {
		return nil, err
	}
	if err := r.ws.State.RecordDefinition(bg, n.Address, n.Digest, n.Definition); err != nil {
		return nil, err
	}
	os.RemoveAll(scratch)
	return res, nil
}

// fullReason says which bound of its writable space a step reached.
func fullReason(f *executors.Full) string {
	if f.Limit == "inodes" {
		return fmt.Sprintf("made more than limits.inodes = %d files, directories and links in %s (/out and /tmp together are bounded while the step runs; raise limits.inodes if it needs more)", f.Bound, f.Where)
	}
	return fmt.Sprintf("wrote more than limits.disk = %s to %s (/out and /tmp together are bounded while the step runs; raise limits.disk, and limits.memory with it, if it needs more)", lang.FormatSize(f.Bound), f.Where)
}

// attemptFinished records how attempt of n ended when it did not succeed. The step's
// failure does not wait on it: an apply whose state database cannot be written stops
// (stop), and fails with that error.
func (r *runner) attemptFinished(ctx context.Context, n *graph.Node, attempt int, outcome state.Outcome, detail string) {
	if err := r.ws.State.AttemptFinished(ctx, r.runID, n.Address, attempt, outcome, detail); err != nil {
		r.stop(fmt.Errorf("recording attempt %d of %s: %w", attempt, n.Address, err))
	}
}

// logDetail records an attempt's log blobs in its detail, for `foundry logs`.
func logDetail(out, errl cache.Log) string {
	return fmt.Sprintf("stdout=%s stderr=%s", out.Digest, errl.Digest)
}

// envList merges the image's environment with the step's (the step wins), sorted.
func envList(image []string, step map[string]string) []string {
	m := seed.EnvMap(image)
	for k, v := range step {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// input is one materialized input: where it is mounted, and what it is for provenance.
type input struct {
	mount executors.Mount
	dep   provenance.Dependency
}

// mounts materializes a step's inputs on this machine and returns the read-only mounts.
func (r *runner) mounts(ctx context.Context, st *lang.Step) ([]input, error) {
	var out []input
	for _, target := range slices.Sorted(maps.Keys(st.Mounts)) {
		a := st.Mounts[target]
		var src string
		var err error
		dep := provenance.Dependency{Name: target, Digest: string(a.Digest)}
		switch a.Kind {
		case lang.ArtifactProjectDir:
			// Mounted in place, after checking that it still has the content the action
			// digest was computed from.
			src = r.hostPath(a)
			man, d, herr := digest.Dir(src)
			if herr != nil {
				return nil, fmt.Errorf("input %s: %v", a.Path, herr)
			}
			if d != a.Digest {
				return nil, fmt.Errorf("input %s changed since it was planned (%s, now %s); plan again", a.Path, a.Digest.Short(), d.Short())
			}
			// The compiler refused sealed cases in any mount by path; check again by content,
			// right before the sandbox sees the files, so that a copy or a hard link of a
			// sealed case under another name is refused too.
			if err := r.refuseSealed(a.Path, man); err != nil {
				return nil, err
			}
			dep.URI = "project:" + a.Path
		case lang.ArtifactInline:
			// Text (inline, or a file's by file()) is checked by content as a tree is: the
			// compiler's check by path cannot see a copy of a sealed case read by file().
			if err := r.refuseSealedText(target, a.Inline); err != nil {
				return nil, err
			}
			var d digest.Digest
			src, d, err = r.inlineFile(a.Inline)
			dep.URI, dep.Digest = "inline:", string(d)
		case lang.ArtifactStepOutput:
			var o *cache.Output
			var producer digest.Digest
			if src, o, producer, err = r.stepOutput(a); err != nil {
				return nil, fmt.Errorf("input %s: %w", target, err)
			}
			dep.URI = "foundry:" + a.Node + "#" + a.Path
			dep.Digest, dep.Producer = string(o.Digest), string(producer)
		case lang.ArtifactCapability:
			prod := r.result(a.Node)
			if prod == nil || prod.tree == "" {
				return nil, fmt.Errorf("input %s: capability %s was not resolved", target, a.Node)
			}
			src, err = r.ws.MaterializeTree(prod.tree)
			dep.URI, dep.Digest = "foundry:"+a.Node, string(prod.tree)
		case lang.ArtifactSource:
			src, dep, err = r.sourceInput(a, target) // source.go
		default:
			return nil, fmt.Errorf("input %s: cannot mount %s", target, a)
		}
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", target, err)
		}
		md := dep.Digest // what the mount holds: for a source, its tree, not its pin
		if dep.Tree != "" {
			md = dep.Tree
		}
		out = append(out, input{mount: executors.Mount{Source: src, Target: target, Digest: md}, dep: dep})
	}
	return out, nil
}

// attest mints, signs and stores the provenance of one execution, and returns the digest of
// the envelope's exact bytes.
func (r *runner) attest(n *graph.Node, attempt int, img executors.Image, inputs []input, caches []cacheLease, res *cache.Result, lim lang.Limits, fixed *fixedOutput, rb *rebuildMode) (digest.Digest, error) {
	view, err := json.Marshal(plan.StepViewOf(n))
	if err != nil {
		return "", err
	}
	user := n.Step.User
	if user == "" {
		user = sandboxDefaultUser
	}
	e := &provenance.Execution{
		InvocationID: fmt.Sprintf("%s/%s/%d", r.runID, n.Address, attempt),
		Executor:     res.Executor, Isolation: res.Isolation,
		Versions:     r.builderVersions(res),
		Step:         view,
		ActionDigest: string(n.Digest), CacheKey: string(res.Action), Platform: n.Step.Platform, User: user,
		Limits: provenance.Limits{MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs, Pids: lim.Pids,
			TimeoutMillis: lim.Time.Milliseconds(), OutputBytes: lim.OutputBytes, EgressBytes: graph.EgressBytes(n.Step)},
		Image:      provenance.Dependency{Name: "image", URI: "foundry:" + n.Step.Image.Node, Digest: img.Digest},
		StartedOn:  res.Started,
		FinishedOn: res.Finished,
	}
	e.Network, e.Egress = fixed.network()
	for _, in := range inputs {
		e.Inputs = append(e.Inputs, in.dep)
	}
	if n.Step.Image != nil {
		if e.ImageSources, err = r.imageSources(n.Step.Image.Node); err != nil {
			return "", err
		}
	}
	for _, c := range caches {
		if c.lease == nil {
			// A rebuild's: an empty directory no other step saw, hermetic.
			e.Caches = append(e.Caches, provenance.CacheMount{Path: c.target, Name: c.name, Empty: true})
			continue
		}
		e.Caches = append(e.Caches, provenance.CacheMount{Path: c.target, Name: c.name, Sharing: c.lease.Sharing, Volume: c.lease.Key, Instance: c.lease.Instance})
	}
	if rb != nil {
		e.Reproduces = &provenance.Reproduction{Attestation: string(rb.orig.Attestations[0]), CacheKey: string(rb.orig.Action)}
	}
	for _, o := range res.Outputs {
		e.Outputs = append(e.Outputs, provenance.Artifact{Name: o.Path, Digest: string(o.Digest)})
	}
	if n.Kind == graph.KindCheck {
		// Provenance is minted only for an execution that succeeded: for a check, that it
		// passed, on the inputs its dependencies name.
		e.Outputs = append(e.Outputs, provenance.Artifact{Name: provenance.CheckResultSubject, Digest: string(res.Action)})
	}
	for name, l := range map[string]cache.Log{"stdout": res.Stdout, "stderr": res.Stderr} {
		if l.Digest != "" {
			e.Logs = append(e.Logs, provenance.Artifact{Name: name, Digest: string(l.Digest)})
		}
	}
	sort.Slice(e.Logs, func(i, j int) bool { return e.Logs[i].Name < e.Logs[j].Name })
	env, err := r.att.Sign(provenance.NewProvenance(e))
	if err != nil {
		return "", err
	}
	return digest.FromBytes(env), nil
}

// builderVersions are the builder.version entries of a step's provenance: this Foundry's
// version and, for a step a Temporal worker ran, the worker's identity.
func (r *runner) builderVersions(res *cache.Result) map[string]string {
	v := map[string]string{"foundry": r.opt.Version}
	if res.Worker != "" {
		v["worker"] = res.Worker
	}
	return v
}

// recordedOutput finds the recorded output that a refers to (step.X.output["/out/Y"]) and
// the producer's action digest.
func (r *runner) recordedOutput(a *lang.Artifact) (*cache.Output, digest.Digest, error) {
	prod := r.result(a.Node)
	if prod == nil || prod.step == nil {
		return nil, "", fmt.Errorf("%s has no result", a.Node)
	}
	if o := prod.step.Output(a.Path); o != nil {
		return o, prod.step.Action, nil
	}
	return nil, "", fmt.Errorf("%s did not record output %s", a.Node, a.Path)
}

// stepOutput is recordedOutput, materialized for mounting or packaging.
func (r *runner) stepOutput(a *lang.Artifact) (string, *cache.Output, digest.Digest, error) {
	o, action, err := r.recordedOutput(a)
	if err != nil {
		return "", nil, "", err
	}
	var src string
	if o.Kind == cache.Tree {
		src, err = r.ws.MaterializeTree(o.Digest)
	} else {
		src, err = r.ws.MaterializeFile(o.Digest, o.MountMode())
	}
	return src, o, action, err
}

// inlineFile stores text written in the configuration and materializes it as a file.
func (r *runner) inlineFile(b []byte) (string, digest.Digest, error) {
	d, err := r.ws.Store.PutBytes(b)
	if err != nil {
		return "", "", err
	}
	src, err := r.ws.MaterializeFile(d, 0o644)
	return src, d, err
}

// collectOutputs stores each declared output: a file as a blob, a directory as a tree.
// A declared output the step did not produce fails the step; an optional one is left out.
func (r *runner) collectOutputs(outDir string, declared, optional []string) ([]cache.Output, error) {
	var outs []cache.Output
	for i, p := range slices.Concat(declared, optional) {
		host := filepath.Join(outDir, filepath.FromSlash(strings.TrimPrefix(p, "/out/")))
		fi, err := os.Lstat(host)
		if err != nil && i >= len(declared) && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("declared output %s was not produced", p)
		}
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(host)
			if err != nil {
				return nil, err
			}
			d, size, err := r.ws.Store.Put(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("storing output %s: %w", p, err)
			}
			mode := uint32(0o644)
			if fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			outs = append(outs, cache.Output{Path: p, Kind: cache.File, Digest: d, Size: size, Mode: mode})
		case fi.IsDir():
			d, _, err := r.ws.Store.PutDir(host)
			if err != nil {
				return nil, fmt.Errorf("storing output %s: %w", p, err)
			}
			size, _ := r.ws.Store.Stat(d)
			outs = append(outs, cache.Output{Path: p, Kind: cache.Tree, Digest: d, Size: size})
		default:
			return nil, fmt.Errorf("declared output %s is a %s; outputs are files or directories", p, fi.Mode().Type())
		}
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].Path < outs[j].Path })
	return outs, nil
}

// assemble builds an artifact tree from files (package, accepted service and delivery
// contents). Every file is written inside the tree's directory (treePath).
func (r *runner) assemble(ctx context.Context, files map[string]*lang.Artifact) (digest.Digest, error) {
	dir := filepath.Join(r.scratch, "pkg-"+workspace.NewID())
	defer os.RemoveAll(dir)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		a := files[p]
		dst, err := treePath(dir, p)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		var src string
		switch a.Kind {
		case lang.ArtifactStepOutput:
			src, _, _, err = r.stepOutput(a)
		case lang.ArtifactProjectDir:
			src = r.hostPath(a)
		case lang.ArtifactSource:
			src, err = r.sourceTree(a)
		case lang.ArtifactInline:
			src, _, err = r.inlineFile(a.Inline)
		case lang.ArtifactCapability:
			// A capability's files, as a product delivers them: its tree, as settled.
			prod := r.result(a.Node)
			if prod == nil || prod.tree == "" {
				return "", fmt.Errorf("%s is not settled", a.Node)
			}
			if err := r.ws.Store.Materialize(prod.tree, dst); err != nil {
				return "", err
			}
			continue
		default:
			return "", fmt.Errorf("cannot package %s", a)
		}
		if err != nil {
			return "", err
		}
		if err := copyTree(src, dst); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	d, _, err := r.ws.Store.PutDir(dir)
	return d, err
}

// treePath is where file p of a tree assembled in root goes. It refuses a p that is not a
// lang.ValidArtifactPath (the loader refuses those; a key such as "/../x" would be written
// outside root), and a p reached through a symlink that an earlier file of the tree put
// there (a step output holding srv/x -> /etc, then a file at /srv/x/y): either would write
// outside the tree, anywhere on the host.
func treePath(root, p string) (string, error) {
	if !lang.ValidArtifactPath(p) {
		return "", fmt.Errorf("file %q: not an absolute, clean path; it would be written outside the tree", p)
	}
	at := root
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		at = filepath.Join(at, part)
		fi, err := os.Lstat(at)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			rel, _ := filepath.Rel(root, at)
			return "", fmt.Errorf("file %q: /%s is a symlink an earlier file of the tree made; writing through it would leave the tree", p, filepath.ToSlash(rel))
		}
	}
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, "/"))), nil
}

// copyTree copies a file or directory (symlinks as symlinks) from src to dst.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, t)
		case fi.IsDir():
			return os.MkdirAll(t, 0o755)
		case fi.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(t, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm()|0o200)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return fmt.Errorf("%s: unsupported file type %s", p, fi.Mode().Type())
	})
}

// logTail returns the last n lines of the stderr log, or of stdout when stderr is empty.
func (r *runner) logTail(errLog, outLog cache.Log, n int) []string {
	for _, l := range []cache.Log{errLog, outLog} {
		if l.Digest == "" || l.Size == 0 {
			continue
		}
		b, err := r.ws.Store.Get(l.Digest)
		if err != nil {
			continue
		}
		return capped.TailLines(b, n)
	}
	return nil
}

// cappedFile keeps at most limit bytes of a stream in a file, then a truncation marker.
type cappedFile struct {
	capped.Writer
	f *os.File
}

func newCappedFile(path string, limit int64) (*cappedFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	return &cappedFile{Writer: capped.Writer{W: f, Limit: limit}, f: f}, nil
}

// store puts the captured log in the content store, with a marker if it was truncated.
func (c *cappedFile) store(r *runner) (cache.Log, error) {
	if c.Truncated {
		fmt.Fprintf(c.f, "\n[foundry: output truncated after %d bytes; raise limits.output to keep more]\n", c.Limit)
	}
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return cache.Log{}, err
	}
	d, size, err := r.ws.Store.Put(c.f)
	if err != nil {
		return cache.Log{}, err
	}
	return cache.Log{Digest: d, Size: size, Truncated: c.Truncated}, nil
}

func (c *cappedFile) Close() error { return c.f.Close() }

// sandboxDefaultUser is the user the sandboxed executors run a step as when it names none
// (nobody:nogroup; see executors/runc DefaultUser), recorded in provenance.
const sandboxDefaultUser = "65534:65534"

// refuseSealed fails when a tree about to be mounted into a builder step holds a file with
// the content of a sealed case of any capability.
func (r *runner) refuseSealed(name string, man *digest.Manifest) error {
	sealed, err := r.sealedDigests()
	if err != nil {
		return err
	}
	for _, e := range man.Entries {
		if _, ok := sealed[e.Digest]; ok && e.Type == digest.TypeFile {
			return fmt.Errorf("refusing to mount %s: its file %s has the content of a sealed case", name, e.Path)
		}
	}
	return nil
}

// refuseSealedImage fails when the image a step is about to run in was packed, by seed
// (the seed itself or one its layers build on), from a file with the content of a sealed
// case of any capability: the project's files, inline text, host files, and host
// directories inside the project. Those are the ways the project's bytes enter an image;
// an imported image, and a host directory elsewhere (a toolchain), are not the project's
// and are not hashed. It is checked once per seed and apply.
func (r *runner) refuseSealedImage(seedAddr string) error {
	r.sealedImagesMu.Lock()
	defer r.sealedImagesMu.Unlock()
	if err, ok := r.sealedImages[seedAddr]; ok {
		return err
	}
	err := r.sealedImage(seedAddr)
	if r.sealedImages == nil {
		r.sealedImages = map[string]error{}
	}
	r.sealedImages[seedAddr] = err
	return err
}

func (r *runner) sealedImage(seedAddr string) error {
	for addr := seedAddr; addr != ""; {
		n := r.g.Nodes[addr]
		if n == nil || n.Seed == nil {
			return nil
		}
		what := func(path string) string { return fmt.Sprintf("to run in image %s: its file %s", seedAddr, path) }
		addr = ""
		for _, l := range n.Seed.Layers {
			switch {
			case l.From != nil:
				addr = l.From.Node
			case l.Files != nil:
				for _, target := range slices.Sorted(maps.Keys(l.Files)) {
					a := l.Files[target]
					d := digest.FromBytes(a.Inline)
					if a.Kind != lang.ArtifactInline {
						var err error
						if d, _, err = digest.File(r.hostPath(a)); err != nil {
							return fmt.Errorf("image %s: %s: %w", seedAddr, target, err)
						}
					}
					if err := r.refuseSealedFile(what(target), d); err != nil {
						return err
					}
				}
			case l.Dir != nil && r.inProject(r.hostPath(l.Dir)):
				man, _, err := digest.Dir(r.hostPath(l.Dir))
				if err != nil {
					return fmt.Errorf("image %s: %s: %w", seedAddr, l.Dir.Path, err)
				}
				for _, e := range man.Entries {
					if e.Type != digest.TypeFile {
						continue
					}
					if err := r.refuseSealedFile(what(path.Join(l.At, e.Path)), e.Digest); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// inProject reports whether host path p is the project directory or inside it.
func (r *runner) inProject(p string) bool {
	rel, err := filepath.Rel(r.g.Config.Dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// refuseSealedText fails when text about to be mounted at target has the content of a
// sealed case of any capability.
func (r *runner) refuseSealedText(target string, text []byte) error {
	return r.refuseSealedFile("to mount the text at "+target, digest.FromBytes(text))
}

// refuseSealedFile fails when the file with digest d, which a step is about to see, has the
// content of a sealed case of any capability; what says how it would see it.
func (r *runner) refuseSealedFile(what string, d digest.Digest) error {
	sealed, err := r.sealedDigests()
	if err != nil {
		return err
	}
	if _, ok := sealed[d]; ok {
		return fmt.Errorf("refusing %s: it has the content of a sealed case", what)
	}
	return nil
}

// sealedDigests maps the content digest of every sealed case file to its name, read once.
func (r *runner) sealedDigests() (map[digest.Digest]string, error) {
	r.sealedOnce.Do(func() {
		r.sealed = map[digest.Digest]string{}
		for _, c := range r.g.Config.Capabilities {
			s := c.Suites["sealed"]
			if s == nil {
				continue
			}
			for _, f := range s.Files {
				d, _, err := digest.File(filepath.Join(r.g.Config.Dir, filepath.FromSlash(f)))
				if err != nil {
					r.sealedErr = fmt.Errorf("reading sealed case %s: %w", f, err)
					return
				}
				r.sealed[d] = fmt.Sprintf("%s of capability %q", f, c.Name)
			}
		}
	})
	return r.sealed, r.sealedErr
}
