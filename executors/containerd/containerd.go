// Package containerd is the default executor: each action is a containerd task in the
// "foundry" namespace, on a writable overlayfs snapshot of the imported image with a read-only
// root in the spec (a read-only snapshot view fails when the image lacks mount points), under
// the same OCI runtime spec as the runc executor (runc.Spec).
//
// Images are imported from Image.LayoutPath once per digest (only the blobs the manifest
// needs, with the GC labels containerd's own import sets) and unpacked into the snapshotter;
// later actions reuse them. Per action the executor prepares a snapshot under a lease named
// after the action ID, creates the container and task, captures output, waits with the
// deadline (killing every process of the task when it passes), reads the OOM counter of the
// task's cgroup, and deletes task, container, snapshot and lease. Cleanup(prefix) removes what
// a crashed earlier run left.
//
// What does not need to be on a step's critical path is not:
//   - tasks share a few long-lived runc shims (keeper.go), instead of starting and stopping
//     a shim per task;
//   - the task, container, snapshot and lease of a finished action are deleted in the
//     background once every process is gone and the output is captured; Close waits for it;
//   - the snapshot's mounts go straight into the task request, with the overlay marked
//     "volatile" so that unmounting it does not sync the host's whole root filesystem.
//
// Result.Usage is read with runc.Usage from the task's cgroup files once every process of the
// step is gone and before the task is deleted, so it covers every process of the step, runc's
// own init among them, and is the same counters the runc executor reports (see package runc).
// It is read directly rather than through the task's metrics: that call is a round trip to
// the shim that reads every controller's statistics, on the critical path of every action.
//
// Setting FOUNDRY_EXEC_TRACE=1 prints the time of each phase of every action to stderr.
package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/remotes"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/runc"
)

const (
	// DefaultAddress is the private containerd that scripts/containerd.sh starts.
	DefaultAddress = "/run/foundry-containerd/containerd.sock"
	// DefaultNamespace keeps Foundry's containers, images and snapshots apart from anything
	// else using the same daemon.
	DefaultNamespace = "foundry"
	snapshotter      = "overlayfs"
	runtimeName      = "io.containerd.runc.v2"
	// leaseTTL bounds how long a crashed run's lease protects its snapshot from GC.
	leaseTTL = 24 * time.Hour
	// maxBackgroundDeletes bounds finished actions whose runtime objects are still being
	// deleted; beyond it Run waits, so deletion cannot fall ever further behind.
	maxBackgroundDeletes = 8
	// killGrace bounds the wait for a killed task to exit.
	killGrace = time.Minute
	// ioGrace bounds the wait for the shim to close a finished task's output FIFOs.
	ioGrace = 5 * time.Second
)

// Options configure the executor. Zero values pick the defaults.
type Options struct {
	// Address is the containerd socket (the CLI's --containerd-address or
	// FOUNDRY_CONTAINERD_ADDRESS). Default DefaultAddress.
	Address string
	// Namespace is the containerd namespace. Default "foundry".
	Namespace string
	// NoSeccomp drops the default seccomp profile.
	NoSeccomp bool
	// NoSharedShim gives every task its own shim instead of one shim per executor (see
	// keeper.go); slower, for runtimes without shim groups.
	NoSharedShim bool
	// Root holds each action's writable space (executors.Writable), under the namespace's
	// name. Default DefaultRoot. The daemon's shims must see the mounts made there: foundry
	// and containerd share the mount namespace (as scripts/containerd.sh runs them).
	Root string
}

// DefaultRoot is where the executor mounts actions' writable spaces.
const DefaultRoot = "/run/foundry-containerd-actions"

// Executor runs actions as containerd tasks. It is safe for concurrent use.
type Executor struct {
	client  *containerd.Client
	ns      string
	seccomp bool
	root    string // the namespace's directory under Options.Root

	mu     sync.Mutex
	images map[string]*imageEntry // by manifest digest

	bg      sync.WaitGroup // background deletions of finished actions
	bgSlots chan struct{}  // bounds the deletions in flight
	bgMu    sync.Mutex
	bgErrs  []error // deletion failures, reported by Close

	shims shimPool // shared shims (keeper.go)
}

var _ executors.Executor = (*Executor)(nil)

type imageEntry struct {
	ready   chan struct{} // closed when chainID/err are set
	chainID string
	err     error
}

// Available reports whether a containerd daemon answers at address (for choosing the default
// executor and for tests).
func Available(ctx context.Context, address string) bool {
	if address == "" {
		address = DefaultAddress
	}
	if _, err := os.Stat(address); err != nil {
		return false
	}
	c, err := containerd.New(address, containerd.WithTimeout(2*time.Second))
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ok, err := c.IsServing(ctx)
	return err == nil && ok
}

// New connects to containerd.
func New(ctx context.Context, o Options) (*Executor, error) {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	// Without a socket, or with one nobody listens on (a stopped daemon), the client would
	// retry until its timeout; say so at once.
	if _, err := os.Stat(o.Address); err != nil {
		return nil, fmt.Errorf("containerd executor: no socket at %s (is containerd running? scripts/containerd.sh start, or use -executor runc): %w", o.Address, err)
	}
	conn, err := net.DialTimeout("unix", o.Address, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: nothing answers at %s (is containerd running? scripts/containerd.sh start, or use -executor runc): %w", o.Address, err)
	}
	conn.Close()
	c, err := containerd.New(o.Address, containerd.WithDefaultNamespace(o.Namespace), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("containerd executor: connect %s: %w", o.Address, err)
	}
	if _, err := c.Version(namespaces.WithNamespace(ctx, o.Namespace)); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd executor: %s does not answer: %w", o.Address, err)
	}
	root := filepath.Join(o.Root, o.Namespace)
	if err := os.MkdirAll(root, 0o700); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd executor: %w", err)
	}
	e := &Executor{
		client:  c,
		root:    root,
		ns:      o.Namespace,
		seccomp: !o.NoSeccomp,
		images:  map[string]*imageEntry{},
		bgSlots: make(chan struct{}, maxBackgroundDeletes),
	}
	e.shims.init(e, o.NoSharedShim)
	return e, nil
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return "containerd" }

// Isolation implements executors.Executor.
func (e *Executor) Isolation() string { return executors.IsolationContainer }

// Close waits for background deletions, stops the executor's keepers and removes those of
// dead processes (keeper.go), closes the connection and reports deletions that failed
// (Cleanup with the action IDs' prefix removes what they left).
func (e *Executor) Close() error {
	e.bg.Wait()
	e.bgMu.Lock()
	err := errors.Join(e.bgErrs...)
	e.bgErrs = nil
	e.bgMu.Unlock()
	if kerr := e.shims.close(e.nsCtx(context.Background())); kerr != nil {
		err = errors.Join(err, kerr)
	}
	if !e.shims.disabled {
		e.removeStaleKeepers(e.nsCtx(context.Background()))
	}
	if cerr := e.client.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("containerd executor: %w", err)
	}
	return nil
}

func (e *Executor) bgErr(err error) {
	e.bgMu.Lock()
	e.bgErrs = append(e.bgErrs, err)
	e.bgMu.Unlock()
}

func (e *Executor) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, e.ns)
}

// Run implements executors.Executor.
func (e *Executor) Run(ctx context.Context, a *executors.Action) (*executors.Result, error) {
	if err := runc.Validate(a); err != nil {
		return nil, fmt.Errorf("containerd executor: %w", err)
	}
	ctx = e.nsCtx(ctx)
	chainID, err := e.image(ctx, a.Image)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: action %s: image %s: %w", a.ID, a.Image.Digest, err)
	}
	cgroupsPath := "/" + e.ns + "/" + a.ID
	// An egress action's network is made, and its broker listening, before it starts.
	egress, err := executors.StartEgress(a)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: %w", err)
	}
	defer egress.Stop()
	wdir := filepath.Join(e.root, a.ID)
	// Inputs are bound from overlays of them, and the root from an overlay of the snapshot's
	// layers named by descriptors, so that the sandbox's mountinfo does not show where they
	// are on the host (executors/neutral.go).
	indir, rootdir := wdir+"-in", wdir+"-root"
	release := sync.OnceValue(func() error {
		return errors.Join(executors.UnmountWritable(wdir), executors.UnstageInputs(indir), executors.UnmountWritable(rootdir))
	})
	// Released with the rest once the action is over: in the background once it ran, here
	// if it never got that far.
	inBackground := false
	defer func() {
		if !inBackground {
			release()
		}
	}()
	staged, err := executors.StageInputs(indir, a.Mounts)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: action %s: %w", a.ID, err)
	}
	sa := *a
	sa.Mounts = staged
	so := runc.SpecOptions{RootPath: "rootfs", CgroupsPath: cgroupsPath, Seccomp: e.seccomp, Egress: egress, Writable: wdir}
	// A shared shim serves one task creation at a time (its Create holds a lock across
	// `runc create`), so an action holds its shim only until its task exists.
	shim := e.shims.acquire()
	defer func() { e.shims.release(shim) }()
	if shim != nil {
		so.Annotations = map[string]string{shimGroupAnnotation: shim.group}
	}
	spec, err := runc.Spec(&sa, so)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: %w", err)
	}
	lim := runc.EffectiveLimits(a.Limits)
	w, err := executors.MountWritable(wdir, lim.DiskBytes, lim.Inodes, spec.Process.User.UID, spec.Process.User.GID)
	if err != nil {
		return nil, fmt.Errorf("containerd executor: action %s: %w", a.ID, err)
	}

	// Cleanup must run even when ctx is cancelled.
	cctx := context.WithoutCancel(ctx)
	tr := executors.NewTrace(a.ID)
	defer tr.Done()
	lctx, doneLease, err := e.client.WithLease(ctx, leases.WithID(a.ID), leases.WithExpiration(leaseTTL))
	if err != nil {
		return nil, fmt.Errorf("containerd executor: action %s: lease: %w", a.ID, err)
	}
	var container containerd.Container
	cleanup := func() error {
		var errs []error
		if container != nil {
			if err := container.Delete(cctx); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete container: %w", err))
			}
		}
		if err := e.client.SnapshotService(snapshotter).Remove(cctx, a.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove snapshot: %w", err))
		}
		if err := doneLease(cctx); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete lease: %w", err))
		}
		if err := release(); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	fail := func(what string, err error) (*executors.Result, error) {
		if cerr := cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("containerd executor: action %s: %s: %w", a.ID, what, err)
	}

	tr.Mark("lease")
	// The snapshot is held by the action's lease, not referenced from the container record,
	// and its mounts go straight into the task request: that saves the client three
	// round trips per action (snapshot lookup at container creation, mounts and spec reads at
	// task creation).
	mounts, err := e.client.SnapshotService(snapshotter).Prepare(lctx, a.ID, chainID)
	if err != nil {
		return fail("prepare snapshot", err)
	}
	// The snapshot is removed after the step, so its overlay need not be durable; without
	// "volatile" the shim's unmount syncs the whole upper filesystem (the host's root, usually)
	// once per step. See runc.OverlayVolatile.
	if runc.OverlayVolatile() {
		for i := range mounts {
			if mounts[i].Type == "overlay" {
				mounts[i].Options = append(append([]string(nil), mounts[i].Options...), "volatile")
			}
		}
	}
	if mounts, err = neutralRoot(rootdir, mounts); err != nil {
		return fail("mount rootfs", err)
	}
	// The spec is read when the container is created: the retry below creates it again
	// after changing the spec.
	newContainer := func() (containerd.Container, error) {
		return e.client.NewContainer(lctx, a.ID,
			containerd.WithSnapshotter(snapshotter),
			containerd.WithRuntime(runtimeName, nil),
			containerd.WithSpec(spec),
			containerd.WithContainerLabels(map[string]string{"foundry.action": a.ID}),
		)
	}
	container, err = newContainer()
	if err != nil {
		container = nil
		return fail("create container", err)
	}

	tr.Mark("container")
	stdout, stderr := writerOr(a.Stdout), writerOr(a.Stderr)
	// A step's stdin (the evaluator's case input) is copied into the task's stdin fifo; when
	// it is exhausted the fifo must be closed through the shim (CloseIO), or the process
	// never sees end of input.
	var stdin io.Reader
	var stdinDone chan struct{}
	if a.Stdin != nil {
		stdinDone = make(chan struct{})
		stdin = &eofNotifier{r: a.Stdin, done: stdinDone}
	}
	task, err := container.NewTask(lctx, cio.NewCreator(cio.WithStreams(stdin, stdout, stderr)), containerd.WithRootFS(mounts))
	if err != nil && shim != nil && ctx.Err() == nil && shimFailure(err) {
		// The shared shim may be gone (killed, or its keeper lost): retire it and retry once
		// with a shim of the task's own, which needs the spec without the group.
		e.shims.retire(shim)
		shim = nil
		if derr := container.Delete(cctx); derr != nil && !errdefs.IsNotFound(derr) {
			return fail("create task", errors.Join(err, derr))
		}
		container = nil
		spec.Annotations = nil
		container, err = newContainer()
		if err != nil {
			container = nil
			return fail("create container", err)
		}
		task, err = container.NewTask(lctx, cio.NewCreator(cio.WithStreams(stdin, stdout, stderr)), containerd.WithRootFS(mounts))
	}
	e.shims.release(shim)
	shim = nil
	if err != nil {
		if executors.ExecFailure(err.Error()) {
			err = fmt.Errorf("%w: %w", executors.ErrNotStarted, err)
		}
		return fail("create task", err)
	}
	tr.Mark("newtask")
	// Wait before Start, or a fast exit can be missed.
	statusC, err := task.Wait(cctx)
	if err != nil {
		task.Delete(cctx, containerd.WithProcessKill)
		return fail("wait task", err)
	}
	res := &executors.Result{Started: time.Now()}
	if err := task.Start(lctx); err != nil {
		task.Delete(cctx, containerd.WithProcessKill)
		return fail("start task", err)
	}
	if stdinDone != nil {
		go func() {
			select {
			case <-stdinDone:
				task.CloseIO(lctx, containerd.WithStdinCloser)
			case <-cctx.Done():
			}
		}()
	}

	tr.Mark("start")
	// The task's pid is its init in the host's pid namespace; its network namespace is the
	// sandbox's.
	at := executors.StartAttach(a, func(context.Context) (executors.Dialer, func() error, error) {
		return executors.NetnsDialer(int(task.Pid()))
	})
	// Every return path ends Attach; the explicit Stop below reports its error.
	defer at.Stop()
	st, killedBy := executors.Await(ctx, statusC, runc.EffectiveLimits(a.Limits).Timeout, at, res)
	if killedBy != nil {
		// WithKillAll signals every process in the task's cgroup, not just init.
		if err := task.Kill(cctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
			task.Delete(cctx, containerd.WithProcessKill)
			return fail("kill task", err)
		}
		select {
		case st = <-statusC:
		case <-time.After(killGrace):
			// A process stuck in the kernel (D state) cannot die; report rather than hang.
			return nil, fmt.Errorf("containerd executor: action %s: task still running %v after SIGKILL", a.ID, killGrace)
		}
	}
	res.Finished = time.Now()
	if err := at.Stop(); err != nil {
		task.Delete(cctx, containerd.WithProcessKill)
		return fail("attach", err)
	}
	if err := egress.Stop(); err != nil {
		task.Delete(cctx, containerd.WithProcessKill)
		return fail("egress", err)
	}
	tr.Mark("exit")
	code, _, serr := st.Result()
	if serr != nil {
		task.Delete(cctx, containerd.WithProcessKill)
		return fail("task status", serr)
	}
	// The output is complete once the shim closes the FIFOs, which it does when the step's
	// last process exits. Bounded in case a shim misbehaves; Delete closes them anyway.
	if tio := task.IO(); tio != nil {
		ioDone := make(chan struct{})
		go func() { tio.Wait(); close(ioDone) }()
		select {
		case <-ioDone:
		case <-time.After(ioGrace):
		}
	}
	// The cgroup lives until the task is deleted.
	oom, oomErr := runc.OOMKills(cgroupsPath)
	tr.Mark("io+oom")
	res.Usage = runc.Usage(cgroupsPath)
	tr.Mark("usage")
	// Every process of the step is gone: what it left in /out is final.
	var outErr error
	if res.Full, outErr = w.Full(); outErr == nil {
		outErr = w.CopyOut(a.OutDir)
	}
	tr.Mark("out")
	// Every process of the step is gone (the pid namespace died with its init, or the
	// kill-all above ended them) and its output is captured: deleting the task (runc delete,
	// shim shutdown), container, snapshot and lease only frees resources, so it happens off
	// the critical path. Close waits for it; bgSlots bounds how far it may lag.
	e.bgSlots <- struct{}{}
	e.bg.Add(1)
	inBackground = true
	go func() {
		defer func() { <-e.bgSlots; e.bg.Done() }()
		if _, err := task.Delete(cctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			e.bgErr(fmt.Errorf("action %s: delete task: %w", a.ID, err))
		}
		if err := cleanup(); err != nil {
			e.bgErr(fmt.Errorf("action %s: %w", a.ID, err))
		}
	}()
	if oomErr != nil {
		return nil, fmt.Errorf("containerd executor: action %s: %w", a.ID, oomErr)
	}
	if outErr != nil {
		return nil, fmt.Errorf("containerd executor: action %s: %w", a.ID, outErr)
	}
	res.ExitCode = int(code)
	res.OOMKilled = oom
	if (killedBy != nil || oom) && code == 128+uint32(syscall.SIGKILL) {
		res.ExitCode = -1
		res.Signal = "SIGKILL"
	}
	if killedBy != nil && !res.TimedOut && !res.Stopped {
		return res, fmt.Errorf("containerd executor: action %s: cancelled: %w", a.ID, killedBy)
	}
	return res, nil
}

// neutralRoot mounts the snapshot's overlay at dir itself, its layers named by descriptors
// (executors.MountOverlay), and returns the bind of dir the shim mounts as the task's root in
// its place: the overlay's options, which the sandbox reads in /proc/self/mountinfo, then
// name no directory of the host. Mounts of another shape are returned as they are.
func neutralRoot(dir string, ms []mount.Mount) ([]mount.Mount, error) {
	if len(ms) != 1 || ms[0].Type != "overlay" {
		return ms, nil
	}
	var lower []string
	var upper, work string
	var extra []string
	for _, o := range ms[0].Options {
		switch k, v, _ := strings.Cut(o, "="); k {
		case "lowerdir":
			lower = strings.Split(v, ":")
		case "upperdir":
			upper = v
		case "workdir":
			work = v
		default:
			extra = append(extra, o)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := executors.MountOverlay(dir, lower, upper, work, extra, 0); err != nil {
		return nil, err
	}
	return []mount.Mount{{Type: "bind", Source: dir, Options: []string{"rbind", "rw"}}}, nil
}

// shimFailure reports whether err says the shim could not be reached (as opposed to the
// runtime refusing the task, e.g. a missing argv[0]).
func shimFailure(err error) bool {
	m := err.Error()
	return strings.Contains(m, "failed to start shim") || strings.Contains(m, "ttrpc: closed") ||
		errors.Is(err, errdefs.ErrUnavailable)
}

// image imports and unpacks img once and returns the chain ID of its unpacked rootfs.
func (e *Executor) image(ctx context.Context, img executors.Image) (string, error) {
	if img.Digest == "" || img.LayoutPath == "" {
		return "", fmt.Errorf("image needs Digest and LayoutPath")
	}
	e.mu.Lock()
	ent, ok := e.images[img.Digest]
	if !ok {
		ent = &imageEntry{ready: make(chan struct{})}
		e.images[img.Digest] = ent
		e.mu.Unlock()
		ent.chainID, ent.err = e.importImage(ctx, img)
		close(ent.ready)
		if ent.err != nil {
			// Let a later action retry (the layout may be fixed, the daemon back).
			e.mu.Lock()
			delete(e.images, img.Digest)
			e.mu.Unlock()
		}
	} else {
		e.mu.Unlock()
	}
	select {
	case <-ent.ready:
		return ent.chainID, ent.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// imageName names imported images by digest: the layout's tags mean nothing here.
func imageName(d string) string { return "import.foundry.local/image@" + d }

// importImage copies the manifest, config and layers from the layout into the content store
// (with the GC labels that keep children alive), creates the image record and unpacks it.
func (e *Executor) importImage(ctx context.Context, img executors.Image) (string, error) {
	dgst, err := digest.Parse(img.Digest)
	if err != nil {
		return "", err
	}
	ctx, done, err := e.client.WithLease(ctx, leases.WithExpiration(time.Hour))
	if err != nil {
		return "", err
	}
	defer done(context.WithoutCancel(ctx))

	fetcher := layoutFetcher(img.LayoutPath)
	mb, err := os.ReadFile(fetcher.path(dgst))
	if err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return "", fmt.Errorf("manifest %s: %w", dgst, err)
	}
	if m.MediaType == "" {
		m.MediaType = ocispec.MediaTypeImageManifest
	}
	desc := ocispec.Descriptor{MediaType: m.MediaType, Digest: dgst, Size: int64(len(mb))}
	cs := e.client.ContentStore()
	h := images.Handlers(remotes.FetchHandler(cs, fetcher), images.SetChildrenLabels(cs, images.ChildrenHandler(cs)))
	if err := images.Dispatch(ctx, h, nil, desc); err != nil {
		return "", fmt.Errorf("import from %s: %w", img.LayoutPath, err)
	}
	rec := images.Image{Name: imageName(img.Digest), Target: desc}
	is := e.client.ImageService()
	if _, err := is.Create(ctx, rec); err != nil {
		if !errdefs.IsAlreadyExists(err) {
			return "", fmt.Errorf("create image record: %w", err)
		}
		if _, err := is.Update(ctx, rec); err != nil {
			return "", fmt.Errorf("update image record: %w", err)
		}
	}
	i := containerd.NewImageWithPlatform(e.client, rec, platforms.Default())
	if ok, err := i.IsUnpacked(ctx, snapshotter); err != nil || !ok {
		if err := i.Unpack(ctx, snapshotter); err != nil {
			return "", fmt.Errorf("unpack: %w", err)
		}
	}
	diffIDs, err := i.RootFS(ctx)
	if err != nil {
		return "", err
	}
	return identity.ChainID(diffIDs).String(), nil
}

// layoutFetcher reads blobs from an OCI image layout directory.
type layoutFetcher string

func (l layoutFetcher) path(d digest.Digest) string {
	return filepath.Join(string(l), "blobs", d.Algorithm().String(), d.Encoded())
}

func (l layoutFetcher) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if err := desc.Digest.Validate(); err != nil {
		return nil, err
	}
	return os.Open(l.path(desc.Digest))
}

// Cleanup implements executors.Executor: it kills and deletes tasks and containers whose ID
// starts with prefix, and removes their snapshots and leases.
//
// The prefix is a dead client's, whose last requests the daemon may still be completing
// (a container or a task it was asked to create can appear after the client died, and after
// a sweep listed what was there), so Cleanup sweeps until a sweep finds nothing, and each
// sweep is ordered so that what lands meanwhile is found or cannot be made:
//   - leases first: a snapshot prepared under a deleted lease fails, so a Prepare still in
//     flight leaves nothing;
//   - tasks from the task list, not only through their containers: a task whose creation
//     finished after its container was deleted has no container left to find it by (and
//     the daemon deletes a task only through a container, so one is made again for it);
//   - then containers, then snapshots.
//
// The engine sweeps a dead run's prefix a second time when the apply that recovered it
// ends (engine/run/recover.go).
func (e *Executor) Cleanup(ctx context.Context, prefix string) error {
	ctx = e.nsCtx(ctx)
	for pass := 1; ; pass++ {
		found, err := e.sweep(ctx, prefix)
		if err != nil {
			return fmt.Errorf("containerd executor: cleanup %q: %w", prefix, err)
		}
		if found == 0 {
			return nil
		}
		if pass == maxSweeps {
			return fmt.Errorf("containerd executor: cleanup %q: objects keep appearing after %d sweeps (%d in the last)", prefix, pass, found)
		}
	}
}

// maxSweeps bounds Cleanup's sweeps of one prefix.
const maxSweeps = 10

// sweep removes, once, everything with the prefix and reports how much it found.
func (e *Executor) sweep(ctx context.Context, prefix string) (int, error) {
	found := 0
	var errs []error
	ls, err := e.client.LeasesService().List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list leases: %w", err)
	}
	for _, l := range ls {
		if strings.HasPrefix(l.ID, prefix) {
			found++
			if err := e.client.LeasesService().Delete(ctx, l); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete lease %s: %w", l.ID, err))
			}
		}
	}
	found += e.deleteOrphanTasks(ctx, prefix, &errs)
	cs, err := e.client.Containers(ctx)
	if err != nil {
		return 0, errors.Join(append(errs, fmt.Errorf("list containers: %w", err))...)
	}
	for _, c := range cs {
		if !strings.HasPrefix(c.ID(), prefix) {
			continue
		}
		found++
		if err := deleteTask(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("delete task %s: %w", c.ID(), err))
		}
		if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete container %s: %w", c.ID(), err))
		}
	}
	sn := e.client.SnapshotService(snapshotter)
	var keys []string
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if strings.HasPrefix(info.Name, prefix) && info.Kind == snapshots.KindActive {
			keys = append(keys, info.Name)
		}
		return nil
	}); err != nil {
		errs = append(errs, fmt.Errorf("list snapshots: %w", err))
	}
	for _, k := range keys {
		found++
		if err := sn.Remove(ctx, k); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove snapshot %s: %w", k, err))
		}
	}
	// Writable spaces, staged inputs and roots last: their tasks are gone. Removing one is not "found": nothing of
	// the daemon's can make it again.
	ents, _ := os.ReadDir(e.root)
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), prefix) {
			continue
		}
		dir := filepath.Join(e.root, ent.Name())
		undo := executors.UnmountWritable // the writable space, or the root's overlay
		if strings.HasSuffix(dir, "-in") {
			undo = executors.UnstageInputs
		}
		if err := undo(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return found, errors.Join(errs...)
}

// deleteOrphanTasks kills and deletes the tasks with the prefix whose container record is
// gone, and returns how many it found. No live executor leaves a task without its container
// (Run and the keepers delete the task first), so such a task is always garbage: its creation
// finished after a cleanup deleted its container. The daemon reaches a task only through its
// container, so a placeholder record with the task's ID and runtime is made for it first.
func (e *Executor) deleteOrphanTasks(ctx context.Context, prefix string, errs *[]error) int {
	resp, err := e.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		*errs = append(*errs, fmt.Errorf("list tasks: %w", err))
		return 0
	}
	found := 0
	for _, t := range resp.Tasks {
		if !strings.HasPrefix(t.ID, prefix) {
			continue
		}
		if _, err := e.client.LoadContainer(ctx, t.ID); err == nil || !errdefs.IsNotFound(err) {
			continue // it has its container: the container sweep deletes both
		}
		found++
		c, err := e.client.NewContainer(ctx, t.ID, containerd.WithRuntime(runtimeName, nil), containerd.WithSpec(&oci.Spec{}))
		if err != nil && !errdefs.IsAlreadyExists(err) {
			*errs = append(*errs, fmt.Errorf("orphaned task %s: placeholder container: %w", t.ID, err))
			continue
		}
		if c == nil {
			if c, err = e.client.LoadContainer(ctx, t.ID); err != nil {
				*errs = append(*errs, fmt.Errorf("orphaned task %s: %w", t.ID, err))
				continue
			}
		}
		if err := deleteTask(ctx, c); err != nil {
			*errs = append(*errs, fmt.Errorf("delete orphaned task %s: %w", t.ID, err))
		}
		if err := c.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
			*errs = append(*errs, fmt.Errorf("delete placeholder container %s: %w", t.ID, err))
		}
	}
	return found
}

// deleteTask kills and deletes a container's task, if it has one. The executor that ran the
// task may be deleting it at the same moment (its step just died), and its shim may go away
// under us ("ttrpc: closed"): an error counts only if the task is still there afterwards.
func deleteTask(ctx context.Context, c containerd.Container) error {
	var last error
	for i := 0; i < 20; i++ {
		t, err := c.Task(ctx, nil)
		if errdefs.IsNotFound(err) {
			return nil
		}
		if err == nil {
			_ = t.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
			if _, err = t.Delete(ctx, containerd.WithProcessKill); err == nil || errdefs.IsNotFound(err) {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return last
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// eofNotifier closes done when its reader is exhausted (or fails).
type eofNotifier struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofNotifier) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}
