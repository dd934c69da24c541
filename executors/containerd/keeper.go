package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/leases"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/runc"
)

// Shim sharing.
//
// By default every containerd task gets its own shim: a process started for the task and shut
// down with it, which costs a large part of a trivial step. The runc v2 shim can instead serve a
// group of containers (Kubernetes uses this for the containers of a pod): tasks whose spec
// carries the same shimGroupAnnotation share one shim. A shim exits when its last container is
// deleted, and a task created while the previous one's shim is exiting fails ("failed to start
// shim ... connect: no such file"), so each group has a keeper: a task that is created and
// never started (runc init parked before exec, no image needed) and that lives until Close.
//
// A shim creates one task at a time (its Create holds a lock across `runc create`), so the
// executor keeps a pool of groups: an action takes an idle group for the creation of its task
// only; when none is idle it uses a shim of its own and the pool grows (in the background, up
// to maxShimGroups), so the pool ends up as large as the creations that overlap.
//
// A keeper is labelled with the boot ID, pid and start time of the foundry process that made
// it; New deletes keepers whose process is gone, and so does Close, after its own keepers: a
// keeper whose creation the daemon finished after its foundry died (and after New listed the
// keepers) is then removed by the first executor that closes afterwards.
const (
	shimGroupAnnotation = "io.containerd.runc.v2.group"
	keeperLabel         = "foundry.keeper"
	keeperPrefix        = "foundry-keeper-"
)

// maxShimGroups bounds the pool; each group costs one idle shim and one parked runc init.
const maxShimGroups = 8

// shimPool holds the executor's shim groups.
type shimPool struct {
	e        *Executor
	disabled bool
	idle     chan *keeper

	mu       sync.Mutex
	all      []*keeper
	creating int
	failures int
	closed   bool
	wg       sync.WaitGroup // keeper creations in flight
}

func (p *shimPool) init(e *Executor, disabled bool) {
	p.e = e
	p.disabled = disabled
	p.idle = make(chan *keeper, maxShimGroups)
	if !disabled {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			e.removeStaleKeepers(e.nsCtx(context.Background()))
		}()
		p.grow()
	}
}

// acquire returns an idle group, or nil (and grows the pool) when there is none.
func (p *shimPool) acquire() *keeper {
	if p.disabled {
		return nil
	}
	select {
	case k := <-p.idle:
		return k
	default:
		p.grow()
		return nil
	}
}

// release returns k to the idle groups.
func (p *shimPool) release(k *keeper) {
	if k != nil {
		p.idle <- k
	}
}

// retire drops k from the pool (its shim is gone) and deletes what is left of it.
func (p *shimPool) retire(k *keeper) {
	if k == nil {
		return
	}
	p.mu.Lock()
	for i, x := range p.all {
		if x == k {
			p.all = append(p.all[:i], p.all[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = k.stop(p.e.nsCtx(context.Background()))
	}()
}

// grow starts creating one more group, off the critical path.
func (p *shimPool) grow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Three failed keepers mean groups do not work here: stop trying.
	if p.closed || p.failures >= 3 || len(p.all)+p.creating >= maxShimGroups {
		return
	}
	p.creating++
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx := p.e.nsCtx(context.Background())
		k, err := p.e.startKeeper(ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.creating--
		if err != nil {
			p.failures++
			return
		}
		if p.closed {
			_ = k.stop(ctx)
			return
		}
		p.all = append(p.all, k)
		p.idle <- k
	}()
}

// close stops every group; no action may be running.
func (p *shimPool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, k := range p.all {
		if err := k.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	p.all = nil
	return errors.Join(errs...)
}

type keeper struct {
	id     string
	group  string
	outDir string
	done   func(context.Context) error // deletes the lease
	c      containerd.Container
	t      containerd.Task
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// startKeeper creates the keeper task of a new shim group.
func (e *Executor) startKeeper(ctx context.Context) (_ *keeper, err error) {
	k := &keeper{id: keeperPrefix + randHex(6)}
	k.group = k.id
	ctx, k.done, err = e.client.WithLease(ctx, leases.WithID(k.id), leases.WithExpiration(leaseTTL))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			k.stop(context.WithoutCancel(ctx))
		}
	}()
	if k.outDir, err = os.MkdirTemp("", "foundry-keeper-"); err != nil {
		return nil, err
	}
	// The runtime checks that argv[0] exists when it creates the task; /proc/self/exe (runc
	// init itself) exists in any rootfs, and the keeper is never started.
	a := &executors.Action{
		ID:     k.id,
		Argv:   []string{"/proc/self/exe"},
		OutDir: k.outDir,
		Limits: executors.Limits{MemoryBytes: 32 << 20, Pids: 4},
	}
	// The keeper is never started, so its writable space is two plain directories: the
	// runtime only needs its mount sources to exist.
	for _, d := range []string{"out", "tmp"} {
		if err := os.Mkdir(filepath.Join(k.outDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	spec, err := runc.Spec(a, runc.SpecOptions{
		RootPath:    "rootfs",
		CgroupsPath: "/" + e.ns + "/" + k.id,
		Annotations: map[string]string{shimGroupAnnotation: k.group},
		Writable:    k.outDir,
	})
	if err != nil {
		return nil, err
	}
	// An empty snapshot: the keeper needs no image.
	if _, err := e.client.SnapshotService(snapshotter).Prepare(ctx, k.id, ""); err != nil {
		return nil, fmt.Errorf("prepare snapshot: %w", err)
	}
	k.c, err = e.client.NewContainer(ctx, k.id,
		containerd.WithSnapshotter(snapshotter),
		containerd.WithSnapshot(k.id),
		containerd.WithRuntime(runtimeName, nil),
		containerd.WithSpec(spec),
		containerd.WithContainerLabels(map[string]string{keeperLabel: keeperOwner()}),
	)
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	if k.t, err = k.c.NewTask(ctx, cio.NullIO); err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return k, nil
}

// stop deletes the keeper's task, container, snapshot and lease; the group's shim then exits
// with its last task.
func (k *keeper) stop(ctx context.Context) error {
	var errs []error
	if k.t != nil {
		if _, err := k.t.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete keeper task: %w", err))
		}
	}
	if k.c != nil {
		if err := k.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete keeper container: %w", err))
		}
	}
	if k.done != nil {
		if err := k.done(ctx); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete keeper lease: %w", err))
		}
	}
	if k.outDir != "" {
		os.RemoveAll(k.outDir)
	}
	return errors.Join(errs...)
}

// keeperOwner is the keeper label of this process: "BOOTID/PID/START", START being the
// process's start time in clock ticks since boot, so that a reused pid is not taken for the
// keeper's owner.
func keeperOwner() string {
	pid := os.Getpid()
	start, _ := procStart(pid)
	return bootID() + "/" + strconv.Itoa(pid) + "/" + start
}

// procStart returns the start time of process pid (field 22 of /proc/PID/stat) and whether
// the process is alive: it exists and is not a zombie waiting to be reaped (a killed
// foundry whose parent has not waited for it yet).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may contain spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b)[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	return f[19], true
}

// ownerAlive reports whether the foundry process named by a keeper label is still running.
// Labels of older versions have no start time ("BOOTID/PID").
func ownerAlive(label string) bool {
	b, rest, _ := strings.Cut(label, "/")
	pid, start, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(pid)
	if err != nil || b != bootID() {
		return false
	}
	got, alive := procStart(n)
	return alive && (start == "" || got == start)
}

// removeStaleKeepers deletes keepers whose foundry process is gone, and keeper tasks left
// without their container.
func (e *Executor) removeStaleKeepers(ctx context.Context) {
	var errs []error
	e.deleteOrphanTasks(ctx, keeperPrefix, &errs)
	cs, err := e.client.Containers(ctx, fmt.Sprintf("labels.%q", keeperLabel))
	if err != nil {
		return
	}
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue
		}
		if ownerAlive(labels[keeperLabel]) {
			continue
		}
		k := &keeper{id: c.ID(), c: c}
		if t, err := c.Task(ctx, nil); err == nil {
			k.t = t
		}
		k.done = func(ctx context.Context) error {
			return e.client.LeasesService().Delete(ctx, leases.Lease{ID: c.ID()})
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = k.stop(sctx)
		cancel()
	}
}
