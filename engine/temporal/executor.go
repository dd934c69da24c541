package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/store"
)

// Options configure an apply's Temporal engine.
type Options struct {
	Address   string // the Temporal frontend, HOST:PORT
	Namespace string // "default" when empty
	TaskQueue string // the workflows' queue; DefaultTaskQueue when empty
	// Registry is the shared content store, a remote registry every worker can reach.
	Registry registry.Store
	// Store is the apply's content store: what steps mount is put here and pushed, and
	// what they make is fetched into it.
	Store            *store.Store
	Project          string
	HeartbeatTimeout time.Duration // DefaultHeartbeatTimeout when zero
	MaxHistory       int           // DefaultMaxHistory when zero
	// Log receives notes for the operator (no worker polls the queue yet); nil for none.
	Log func(format string, args ...any)
}

// Executor hands an apply's steps to Temporal workers. It dials Temporal and starts the
// apply's workflow when the first step runs, and signals the workflow done on Close.
type Executor struct {
	opt        Options
	workflowID string
	replyQueue string

	openOnce sync.Once
	openErr  error
	idleOnce sync.Once
	client   client.Client
	replies  worker.Worker

	mu      sync.Mutex
	waiting map[string]chan Reply
	images  map[digest.Digest]bool // pushed to the registry by this apply
}

// New returns the executor; it contacts nothing until a step runs.
func New(opt Options) (*Executor, error) {
	if opt.Address == "" {
		return nil, errors.New("the Temporal engine needs -temporal-address HOST:PORT")
	}
	if opt.Registry == nil || opt.Store == nil {
		return nil, errors.New("the Temporal engine needs a registry and a content store")
	}
	if opt.Namespace == "" {
		opt.Namespace = "default"
	}
	if opt.TaskQueue == "" {
		opt.TaskQueue = DefaultTaskQueue
	}
	id := workspace.NewID()
	return &Executor{
		opt: opt, workflowID: "foundry-apply-" + id, replyQueue: opt.TaskQueue + "-reply-" + id,
		waiting: map[string]chan Reply{}, images: map[digest.Digest]bool{},
	}, nil
}

// WorkflowID is the ID of this apply's workflow.
func (e *Executor) WorkflowID() string { return e.workflowID }

func (e *Executor) Name() string      { return "temporal" }
func (e *Executor) Isolation() string { return executors.IsolationContainer }

// Cleanup does nothing: each worker removes its own leftovers when it starts.
func (e *Executor) Cleanup(context.Context, string) error { return nil }

// quietLogger keeps the SDK's chatter out of the apply's output: errors only.
func quietLogger(level slog.Level) sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}

func (e *Executor) open(ctx context.Context) error {
	e.openOnce.Do(func() {
		c, err := client.DialContext(ctx, client.Options{
			HostPort: e.opt.Address, Namespace: e.opt.Namespace, Logger: quietLogger(slog.LevelError),
		})
		if err != nil {
			e.openErr = fmt.Errorf("temporal at %s: %w", e.opt.Address, err)
			return
		}
		w := worker.New(c, e.replyQueue, worker.Options{Identity: "foundry-apply " + e.workflowID})
		w.RegisterActivityWithOptions(e.reply, activity.RegisterOptions{Name: ReplyName})
		if err := w.Start(); err != nil {
			c.Close()
			e.openErr = fmt.Errorf("temporal at %s: %w", e.opt.Address, err)
			return
		}
		e.client, e.replies = c, w
		e.logf("steps run on Temporal at %s: workflow %s, namespace %s, queue %s", e.opt.Address, e.workflowID, e.opt.Namespace, e.opt.TaskQueue)
	})
	return e.openErr
}

func (e *Executor) logf(format string, args ...any) {
	if e.opt.Log != nil {
		e.opt.Log(format, args...)
	}
}

// noteIdleQueue tells the operator, once, when a step has waited a while and no worker polls
// its queue: the apply is not stuck, it waits for a worker.
func (e *Executor) noteIdleQueue(ctx context.Context, queue string) {
	resp, err := e.client.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil || len(resp.GetPollers()) > 0 {
		return
	}
	e.idleOnce.Do(func() {
		e.logf("no worker polls task queue %s yet; steps wait until one does (foundry worker -temporal-address %s -namespace %s -task-queue %s)",
			queue, e.opt.Address, e.opt.Namespace, e.opt.TaskQueue)
	})
}

// reply is the ReplyName activity: the workflow hands one action's outcome back. An
// outcome nobody waits for (delivered twice, or for an action given up) is dropped.
func (e *Executor) reply(_ context.Context, r Reply) error {
	e.mu.Lock()
	ch := e.waiting[r.ID]
	delete(e.waiting, r.ID)
	e.mu.Unlock()
	if ch != nil {
		ch <- r
	}
	return nil
}

// Run sends a to the apply's workflow and waits for a worker to have run it.
func (e *Executor) Run(ctx context.Context, a *executors.Action) (*executors.Result, error) {
	if a.Attach != nil || a.Stdin != nil {
		return nil, errors.New("the Temporal engine runs steps; services and evaluations run on the apply's machine")
	}
	if a.Name == "" {
		return nil, errors.New("the action has no logical name")
	}
	if err := e.open(ctx); err != nil {
		return nil, err
	}
	req, err := e.request(ctx, a)
	if err != nil {
		return nil, err
	}
	ch := make(chan Reply, 1)
	e.mu.Lock()
	if _, dup := e.waiting[req.ID]; dup {
		e.mu.Unlock()
		return nil, fmt.Errorf("action %s is already running", req.ID)
	}
	e.waiting[req.ID] = ch
	e.mu.Unlock()
	_, err = e.client.SignalWithStartWorkflow(ctx, e.workflowID, SignalRun, req,
		client.StartWorkflowOptions{ID: e.workflowID, TaskQueue: e.opt.TaskQueue},
		WorkflowName, Input{Project: e.opt.Project, ReplyQueue: e.replyQueue,
			HeartbeatTimeout: e.opt.HeartbeatTimeout, MaxHistory: e.opt.MaxHistory})
	if err != nil {
		e.forget(req.ID)
		return nil, fmt.Errorf("temporal: starting %s: %w", req.ID, err)
	}
	var r Reply
	idle := time.AfterFunc(10*time.Second, func() { e.noteIdleQueue(ctx, ActivityQueue(e.opt.TaskQueue, req.Platform)) })
	defer idle.Stop()
	check := time.NewTicker(checkEvery)
	defer check.Stop()
	var unreachable time.Time // since when Temporal has not answered
wait:
	for {
		select {
		case r = <-ch:
			break wait
		case <-check.C:
			// A reply can only come from a running workflow on a reachable cluster: say so
			// rather than wait for ever.
			err := e.workflowRunning(ctx)
			switch {
			case err == nil:
				unreachable = time.Time{}
				continue
			case errors.Is(err, errUnreachable) && unreachable.IsZero():
				unreachable = time.Now()
				continue
			case errors.Is(err, errUnreachable) && time.Since(unreachable) < giveUpAfter:
				continue
			}
			e.forget(req.ID)
			return nil, err
		case <-ctx.Done():
			break wait
		}
	}
	if ctx.Err() != nil && r.ID == "" {
		// Stop it on its worker, and give the worker a moment to say it did.
		e.client.SignalWorkflow(context.WithoutCancel(ctx), e.workflowID, "", SignalCancel, req.ID)
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			e.forget(req.ID)
		}
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if r.Error != "" {
		if r.NotStarted {
			return nil, fmt.Errorf("%w: %s", executors.ErrNotStarted, r.Error)
		}
		return nil, fmt.Errorf("on Temporal: %s", r.Error)
	}
	return e.collect(ctx, a, r.Result)
}

// How often a waiting step checks that its workflow runs, and how long Temporal may be
// unreachable before the step fails.
const (
	checkEvery  = 15 * time.Second
	giveUpAfter = 2 * time.Minute
)

var errUnreachable = errors.New("temporal is unreachable")

// workflowRunning reports why the apply's workflow cannot answer: it has ended, or Temporal
// does not answer (wrapping errUnreachable); nil while it runs.
func (e *Executor) workflowRunning(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	desc, err := e.client.DescribeWorkflowExecution(dctx, e.workflowID, "")
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("on Temporal: workflow %s is gone", e.workflowID)
		}
		return fmt.Errorf("%w at %s: %v", errUnreachable, e.opt.Address, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("on Temporal: workflow %s ended (%s) before the step was answered", e.workflowID, st)
	}
	return nil
}

func (e *Executor) forget(id string) {
	e.mu.Lock()
	delete(e.waiting, id)
	e.mu.Unlock()
}

// request names everything a needs by content, pushing what the registry lacks: the image
// and each mount.
func (e *Executor) request(ctx context.Context, a *executors.Action) (Request, error) {
	platform := a.Platform
	if platform == "" {
		platform = runtime.GOOS + "/" + runtime.GOARCH
	}
	network := a.Network
	if network == "" {
		network = executors.NetworkNone
	}
	req := Request{
		ID: a.Name, Platform: platform, Registry: e.opt.Registry.String(), Image: a.Image.Digest,
		Argv: a.Argv, Env: a.Env, Workdir: a.Workdir, User: a.User, Network: network,
		Limits: Limits{MemoryBytes: a.Limits.MemoryBytes, CPUs: a.Limits.CPUs, Pids: a.Limits.Pids, Timeout: a.Limits.Timeout,
			DiskBytes: a.Limits.DiskBytes, Inodes: a.Limits.Inodes},
		LogBytes: 64 << 20,
	}
	if err := e.pushImage(ctx, a.Image); err != nil {
		return req, fmt.Errorf("pushing image %s: %w", digest.Digest(a.Image.Digest).Short(), err)
	}
	for _, m := range a.Mounts {
		if m.Writable {
			return req, fmt.Errorf("mount %s is writable; steps' inputs are read-only", m.Target)
		}
		c, mode, err := e.push(ctx, m.Source, digest.Digest(m.Digest))
		if err != nil {
			return req, fmt.Errorf("input %s: %w", m.Target, err)
		}
		req.Mounts = append(req.Mounts, Mount{Target: m.Target, Content: c, Mode: mode})
	}
	return req, nil
}

func (e *Executor) pushImage(ctx context.Context, img executors.Image) error {
	d := digest.Digest(img.Digest)
	e.mu.Lock()
	done := e.images[d]
	e.mu.Unlock()
	if done {
		return nil
	}
	layout, err := registry.OpenLayout(img.LayoutPath)
	if err != nil {
		return err
	}
	if err := registry.CopyImage(ctx, e.opt.Registry, layout, d); err != nil {
		return err
	}
	e.mu.Lock()
	e.images[d] = true
	e.mu.Unlock()
	return nil
}

// push pushes what is at the host path src (a file or a directory), whose digest is known
// when known is set: content the apply's store already holds (step outputs, capabilities,
// earlier steps' inputs) is pushed from there, anything else is stored first.
func (e *Executor) push(ctx context.Context, src string, known digest.Digest) (Content, uint32, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return Content{}, 0, err
	}
	d := known
	if ok, _ := e.opt.Store.Has(d); d == "" || !ok {
		if fi.IsDir() {
			d, _, err = e.opt.Store.PutDir(src)
		} else {
			d, err = e.putFile(src)
		}
		if err != nil {
			return Content{}, 0, err
		}
	}
	if fi.IsDir() {
		size, err := registry.PushTree(ctx, e.opt.Registry, e.opt.Store, d)
		return Content{Digest: d, Size: size, Tree: true}, 0, err
	}
	size, err := registry.PushBlob(ctx, e.opt.Registry, e.opt.Store, d)
	return Content{Digest: d, Size: size}, uint32(fi.Mode().Perm()), err
}

func (e *Executor) putFile(src string) (digest.Digest, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	d, _, err := e.opt.Store.Put(f)
	return d, err
}

// collect brings a worker's result home: its logs to a.Stdout and a.Stderr, its /out into
// a.OutDir, every blob checked against the digest the worker reported.
func (e *Executor) collect(ctx context.Context, a *executors.Action, r *Result) (*executors.Result, error) {
	if r == nil {
		return nil, errors.New("on Temporal: an empty result")
	}
	for _, l := range []struct {
		c Content
		w io.Writer
	}{{r.Stdout, a.Stdout}, {r.Stderr, a.Stderr}} {
		if l.c.Digest == "" || l.w == nil {
			continue
		}
		if err := registry.FetchBlob(ctx, e.opt.Registry, e.opt.Store, l.c.Digest, l.c.Size); err != nil {
			return nil, fmt.Errorf("fetching a log: %w", err)
		}
		f, err := e.opt.Store.Open(l.c.Digest)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(l.w, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if r.Out.Digest != "" && a.OutDir != "" {
		if err := registry.FetchTree(ctx, e.opt.Registry, e.opt.Store, r.Out.Digest, r.Out.Size); err != nil {
			return nil, fmt.Errorf("fetching /out: %w", err)
		}
		// OutDir was made empty by the engine; the tree takes its place.
		if err := os.Remove(a.OutDir); err != nil {
			return nil, err
		}
		if err := e.opt.Store.Materialize(r.Out.Digest, a.OutDir); err != nil {
			return nil, err
		}
	}
	xr := &executors.Result{
		ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, OOMKilled: r.OOMKilled,
		Started: r.Started, Finished: r.Finished,
		Usage:  executors.Usage{CPU: r.CPU, PeakMemoryBytes: r.PeakMemory},
		Remote: &executors.Remote{Executor: r.Executor, Isolation: r.Isolation, Worker: r.Worker},
	}
	if r.Full != nil {
		xr.Full = &executors.Full{Limit: r.Full.Limit, Bound: r.Full.Bound, Where: r.Full.Where}
	}
	return xr, nil
}

// Close tells the workflow that the apply is done, waits a moment for it to end (so that an
// apply that has returned leaves no workflow open), and disconnects.
func (e *Executor) Close() error {
	if e.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.client.SignalWorkflow(ctx, e.workflowID, "", SignalDone, nil)
	if err == nil {
		// Every reply has been taken, so the workflow ends at once; a workflow no worker
		// runs just now ends later, when one does (the wait gives up at the timeout).
		e.client.GetWorkflow(ctx, e.workflowID, "").Get(ctx, nil)
	}
	e.replies.Stop()
	e.client.Close()
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("temporal: ending workflow %s: %w", e.workflowID, err)
	}
	return nil
}

// isNotFound reports a workflow that has already ended (idle, or never started).
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
