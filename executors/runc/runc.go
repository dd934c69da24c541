// Package runc is the daemonless executor: for each action it writes an OCI runtime bundle
// (config.json from Spec, rootfs a per-run overlay over Image.Rootfs) and runs it with
// `runc run`. It also holds Spec, the sandbox's OCI runtime spec, which the containerd
// executor shares so that both sandboxes are identical.
//
// The image rootfs is never written: runc needs to create mount points (/proc, /dev, /sys,
// /tmp, /out and every input target) that an image may lack, so the bundle's rootfs is an
// overlay whose upper layer is private to the run and discarded afterwards; the root is then
// remounted read-only by runc, so the step itself cannot write to it either.
//
// Result.Usage is read from the container's cgroups after `runc run` returns and before they
// are removed, so it covers every process of the step, runc's own init among them. On a v1
// hierarchy CPU is cpuacct.usage and PeakMemoryBytes is memory.max_usage_in_bytes; on v2 they
// are cpu.stat's usage_usec and memory.peak, which kernels before 5.19 lack (PeakMemoryBytes
// is then 0). Both peaks are of all memory charged to the cgroup at once: anonymous memory,
// page cache and the pages of the step's tmpfs mounts. A counter that cannot be read is 0.
package runc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/foundry-build/foundry/executors"
)

// Options configure the runc executor. Zero values pick the defaults.
type Options struct {
	// Runtime is the runc binary (default "runc" on PATH). Other OCI runtimes are not
	// supported: the executor reads runc's state.json (cgroup paths) after a run.
	Runtime string
	// Root holds runc's state (runc --root) and the per-run bundles.
	// Default /run/foundry-runc.
	Root string
	// CgroupParent is the cgroup under which each step gets its own cgroup.
	// Default /foundry-runc.
	CgroupParent string
	// NoSeccomp drops the default seccomp profile (for kernels or runtimes that reject it).
	NoSeccomp bool
}

// Executor runs actions with `runc run`. It is safe for concurrent use.
type Executor struct {
	runtime      string
	stateDir     string
	bundleDir    string
	cgroupParent string
	seccomp      bool

	bg      sync.WaitGroup // background deletions of finished containers
	bgSlots chan struct{}  // bounds the deletions in flight
	bgMu    sync.Mutex
	bgErrs  []error // deletion failures, reported by Close
}

var _ executors.Executor = (*Executor)(nil)

// New checks that the runtime binary exists and prepares the state directories.
func New(o Options) (*Executor, error) {
	if o.Runtime == "" {
		o.Runtime = "runc"
	}
	if o.Root == "" {
		o.Root = "/run/foundry-runc"
	}
	if o.CgroupParent == "" {
		o.CgroupParent = "/foundry-runc"
	}
	bin, err := exec.LookPath(o.Runtime)
	if err != nil {
		return nil, fmt.Errorf("runc executor: runtime %q: %w", o.Runtime, err)
	}
	e := &Executor{
		runtime:      bin,
		stateDir:     filepath.Join(o.Root, "state"),
		bundleDir:    filepath.Join(o.Root, "bundles"),
		cgroupParent: "/" + strings.Trim(o.CgroupParent, "/"),
		seccomp:      !o.NoSeccomp,
		bgSlots:      make(chan struct{}, maxBackgroundDeletes),
	}
	for _, d := range []string{e.stateDir, e.bundleDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runc executor: %w", err)
		}
	}
	return e, nil
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return "runc" }

// Isolation implements executors.Executor.
func (e *Executor) Isolation() string { return executors.IsolationContainer }

// maxBackgroundDeletes bounds finished containers still being deleted; beyond it Run waits.
const maxBackgroundDeletes = 8

// Close waits for background deletions and reports those that failed (Cleanup with the action
// IDs' prefix removes what they left).
func (e *Executor) Close() error {
	e.bg.Wait()
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	err := errors.Join(e.bgErrs...)
	e.bgErrs = nil
	if err != nil {
		return fmt.Errorf("runc executor: %w", err)
	}
	return nil
}

// Run implements executors.Executor.
func (e *Executor) Run(ctx context.Context, a *executors.Action) (*executors.Result, error) {
	if err := Validate(a); err != nil {
		return nil, fmt.Errorf("runc executor: %w", err)
	}
	if a.Image.Rootfs == "" || !filepath.IsAbs(a.Image.Rootfs) {
		return nil, fmt.Errorf("runc executor: action %s: image rootfs %q must be an absolute directory", a.ID, a.Image.Rootfs)
	}
	if fi, err := os.Stat(a.Image.Rootfs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("runc executor: action %s: image rootfs %s is not a directory (%v)", a.ID, a.Image.Rootfs, err)
	}
	cgroupsPath := e.cgroupParent + "/" + a.ID
	// An egress action's network is made, and its broker listening, before it starts.
	egress, err := executors.StartEgress(a)
	if err != nil {
		return nil, fmt.Errorf("runc executor: %w", err)
	}
	defer egress.Stop()
	bundle := filepath.Join(e.bundleDir, a.ID)
	if _, err := os.Lstat(bundle); err == nil {
		return nil, fmt.Errorf("runc executor: action %s: bundle %s already exists (duplicate action ID?)", a.ID, bundle)
	}
	// Inputs are bound from overlays of them, so that the sandbox's mountinfo does not show
	// where they are on the host (executors/neutral.go).
	staged, err := executors.StageInputs(filepath.Join(bundle, stagedDir), a.Mounts)
	if err != nil {
		e.removeBundle(bundle)
		return nil, fmt.Errorf("runc executor: action %s: %w", a.ID, err)
	}
	sa := *a
	sa.Mounts = staged
	spec, err := Spec(&sa, SpecOptions{RootPath: "rootfs", CgroupsPath: cgroupsPath, Seccomp: e.seccomp, Egress: egress,
		Writable: filepath.Join(bundle, writableDir)})
	if err != nil {
		e.removeBundle(bundle)
		return nil, fmt.Errorf("runc executor: %w", err)
	}

	tr := executors.NewTrace(a.ID)
	defer tr.Done()
	w, err := e.prepareBundle(bundle, a.Image.Rootfs, spec, EffectiveLimits(a.Limits))
	if err != nil {
		e.removeBundle(bundle)
		return nil, fmt.Errorf("runc executor: action %s: %w", a.ID, err)
	}
	// Deleting the container and the bundle only frees resources once the step's processes
	// are gone, so it happens off the critical path; Close waits for it.
	defer e.release(a.ID, bundle)

	timeout := EffectiveLimits(a.Limits).Timeout
	logPath := filepath.Join(bundle, "runc.log")
	// --keep leaves the stopped container (and its cgroup) in place so that the OOM counter
	// can be read before `runc delete` removes it.
	pidFile := filepath.Join(bundle, "init.pid")
	cmd := exec.Command(e.runtime, "--root", e.stateDir, "--log", logPath, "--log-format", "json",
		"run", "--keep", "--pid-file", pidFile, "--bundle", bundle, a.ID)
	// nil writers become /dev/null; an *os.File is handed to the step directly.
	cmd.Stdin = a.Stdin // nil: /dev/null
	cmd.Stdout = a.Stdout
	cmd.Stderr = a.Stderr
	// If foundry dies, runc dies with it; Cleanup then removes the orphaned container. Its own
	// process group keeps a terminal's signals (Ctrl-C, a hang-up) away from it: `runc run`
	// forwards every signal it gets into the step, which would then race the executor's kill.
	// Whoever started foundry stops a step through foundry, as with containerd.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// The pipes close when the step's last process exits; bound the wait anyway, in case a
	// runtime bug leaves one open.
	cmd.WaitDelay = 10 * time.Second

	tr.Mark("bundle")
	res := &executors.Result{Started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runc executor: action %s: start %s: %w", a.ID, e.runtime, err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	// A service's network is reached through its init's namespace; runc writes the init's
	// pid once the container exists.
	at := executors.StartAttach(a, func(ctx context.Context) (executors.Dialer, func() error, error) {
		pid, err := waitPidFile(ctx, pidFile)
		if err != nil {
			return nil, nil, err
		}
		return executors.NetnsDialer(pid)
	})
	// Every return path ends Attach; the explicit Stop below reports its error.
	defer at.Stop()

	// killedBy says why the executor killed the step, if it did.
	werr, killedBy := executors.Await(ctx, waitErr, timeout, at, res)
	if killedBy != nil {
		werr = e.killUntilExit(a.ID, waitErr)
	}
	res.Finished = time.Now()
	if err := at.Stop(); err != nil {
		return nil, fmt.Errorf("runc executor: action %s: attach: %w", a.ID, err)
	}
	if err := egress.Stop(); err != nil {
		return nil, fmt.Errorf("runc executor: action %s: egress: %w", a.ID, err)
	}
	tr.Mark("run")

	exitCode := -1
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return nil, fmt.Errorf("runc executor: action %s: wait: %w", a.ID, werr)
	}
	// `runc run` itself died of a signal (killed from outside, or crashed): the step's
	// outcome is unknown, not "exit -1", and its container may still be running. Kill and
	// delete it now, so nothing writes OutDir any more, and fail as a runtime error.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && killedBy == nil {
		derr := e.delete(a.ID)
		return nil, errors.Join(fmt.Errorf("runc executor: action %s: runc was killed by signal %d (%v); the step's outcome is unknown",
			a.ID, int(ws.Signal()), ws.Signal()), derr)
	}
	// `runc run` returned, so the container's init was reaped, and the init of a pid
	// namespace is reaped only after every other process in it has exited.
	st, stErr := e.state(a.ID)
	created := stErr == nil
	var oom bool
	var oomErr error
	if created {
		oom, oomErr = st.CgroupPaths.oomKilled()
		res.Usage = st.CgroupPaths.usage()
	}
	// runc exits non-zero on its own failures too (bad spec, missing argv[0]); those are
	// logged at level error, and the container never ran, so they are errors, not results.
	if rerr := runcError(logPath); rerr != "" && killedBy == nil && (!created || exitCode != 0) {
		if executors.ExecFailure(rerr) {
			return nil, fmt.Errorf("runc executor: action %s: %w: %s", a.ID, executors.ErrNotStarted, rerr)
		}
		return nil, fmt.Errorf("runc executor: action %s: runc: %s", a.ID, rerr)
	}
	if oomErr != nil {
		return nil, fmt.Errorf("runc executor: action %s: %w", a.ID, oomErr)
	}
	res.OOMKilled = oom
	res.ExitCode = exitCode
	// Every process of the step is gone: what it left in /out is final.
	if res.Full, err = w.Full(); err != nil {
		return nil, fmt.Errorf("runc executor: action %s: %w", a.ID, err)
	}
	if err := w.CopyOut(a.OutDir); err != nil {
		return nil, fmt.Errorf("runc executor: action %s: %w", a.ID, err)
	}
	tr.Mark("out")
	// runc folds a fatal signal into 128+n. When the executor or the kernel's OOM killer sent
	// SIGKILL we know the cause; any other 128+n is reported as the exit code runc gave.
	if (killedBy != nil || oom) && exitCode == 128+int(syscall.SIGKILL) {
		res.ExitCode = -1
		res.Signal = "SIGKILL"
	}
	if killedBy != nil && !res.TimedOut && !res.Stopped {
		return res, fmt.Errorf("runc executor: action %s: cancelled: %w", a.ID, killedBy)
	}
	return res, nil
}

// release deletes the (stopped) container and removes the bundle in the background.
func (e *Executor) release(id, bundle string) {
	e.bgSlots <- struct{}{}
	e.bg.Add(1)
	go func() {
		defer func() { <-e.bgSlots; e.bg.Done() }()
		err := e.deleteStopped(id)
		if rerr := e.removeBundle(bundle); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err != nil {
			e.bgMu.Lock()
			e.bgErrs = append(e.bgErrs, fmt.Errorf("action %s: cleanup: %w", id, err))
			e.bgMu.Unlock()
		}
	}()
}

// waitPidFile waits for runc to write the container init's pid.
func waitPidFile(ctx context.Context, path string) (int, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("pid file %s: %q is not a pid", path, b)
			}
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// killUntilExit sends SIGKILL to every process of the container until `runc run` returns.
// The first kill can race container creation, so it is repeated.
func (e *Executor) killUntilExit(id string, waitErr <-chan error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// A process stuck in the kernel (D state) cannot die; report rather than hang.
	giveUp := time.After(time.Minute)
	for {
		_ = exec.Command(e.runtime, "--root", e.stateDir, "kill", "--all", id, "KILL").Run()
		select {
		case err := <-waitErr:
			return err
		case <-tick.C:
		case <-giveUp:
			return fmt.Errorf("container still running a minute after SIGKILL")
		}
	}
}

// writableDir is where a bundle's writable space (executors.Writable) is mounted, and
// stagedDir where its inputs are staged (executors.StageInputs).
const (
	writableDir = "rw"
	stagedDir   = "in"
)

// prepareBundle creates bundle/{upper,work,rootfs}, mounts the overlay and the writable space
// (bounded by lim, out owned by the spec's user) and writes config.json.
func (e *Executor) prepareBundle(bundle, lower string, spec *specs.Spec, lim executors.Limits) (*executors.Writable, error) {
	if err := e.mountRootfs(bundle, lower); err != nil {
		return nil, err
	}
	w, err := executors.MountWritable(filepath.Join(bundle, writableDir), lim.DiskBytes, lim.Inodes, spec.Process.User.UID, spec.Process.User.GID)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return w, os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600)
}

// mountRootfs creates bundle/{upper,work,rootfs} and mounts the overlay of lower there.
func (e *Executor) mountRootfs(bundle, lower string) error {
	for _, d := range []string{"upper", "work", "rootfs"} {
		if err := os.MkdirAll(filepath.Join(bundle, d), 0o700); err != nil {
			return err
		}
	}
	// The upper layer's root must let the step's user traverse it.
	if err := os.Chmod(filepath.Join(bundle, "upper"), 0o755); err != nil {
		return err
	}
	// The layers are named by descriptors: the sandbox reads this mount's options in
	// /proc/self/mountinfo, and they must not show the project's path or the bundle's.
	var extra []string
	if OverlayVolatile() {
		extra = append(extra, "volatile")
	}
	if err := executors.MountOverlay(filepath.Join(bundle, "rootfs"), []string{lower},
		filepath.Join(bundle, "upper"), filepath.Join(bundle, "work"), extra, 0); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	return nil
}

var (
	volatileOnce sync.Once
	volatileOK   bool
)

// OverlayVolatile reports whether overlayfs accepts the "volatile" option (Linux 5.10+),
// probing once with a throwaway mount. A per-step upper layer is discarded after the step, so
// it needs no durability; without volatile, unmounting an overlay syncs its whole upper
// filesystem (usually the host's root), flushing every dirty page on the machine once per
// step, which costs far more than the step itself on a busy host.
func OverlayVolatile() bool {
	volatileOnce.Do(func() {
		dir, err := os.MkdirTemp("", "foundry-ovl-probe-")
		if err != nil {
			return
		}
		defer os.RemoveAll(dir)
		for _, d := range []string{"lower", "upper", "work", "mnt"} {
			if os.Mkdir(filepath.Join(dir, d), 0o700) != nil {
				return
			}
		}
		opts := fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,volatile", dir, dir, dir)
		if unix.Mount("overlay", filepath.Join(dir, "mnt"), "overlay", 0, opts) == nil {
			volatileOK = true
			_ = unix.Unmount(filepath.Join(dir, "mnt"), unix.MNT_DETACH)
		}
	})
	return volatileOK
}

// removeBundle unmounts the writable space and the overlay (if mounted) and deletes the bundle.
func (e *Executor) removeBundle(bundle string) error {
	if err := executors.UnmountWritable(filepath.Join(bundle, writableDir)); err != nil {
		return err
	}
	if err := executors.UnstageInputs(filepath.Join(bundle, stagedDir)); err != nil {
		return err
	}
	rootfs := filepath.Join(bundle, "rootfs")
	if err := unix.Unmount(rootfs, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		// Busy: a process still holds it (should not happen once runc delete returned).
		// Detach it so the directory can go; the kernel frees it with the last user.
		if err2 := unix.Unmount(rootfs, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("unmount %s: %w", rootfs, err)
		}
	}
	if err := os.RemoveAll(bundle); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	return nil
}

// delete removes the container's state and cgroup, killing anything left.
func (e *Executor) delete(id string) error {
	out, err := exec.Command(e.runtime, "--root", e.stateDir, "delete", "--force", id).CombinedOutput()
	if err != nil && !e.exists(id) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runc delete: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// runcState is the part of runc's state.json the executor reads.
type runcState struct {
	dir string
	// CgroupPaths is the container's cgroup directory in each hierarchy.
	CgroupPaths cgroupDirs `json:"cgroup_paths"`
}

// state reads runc's state of container id.
func (e *Executor) state(id string) (*runcState, error) {
	dir := filepath.Join(e.stateDir, id)
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	st := &runcState{dir: dir}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("runc state of %s: %w", id, err)
	}
	return st, nil
}

// cgroupDirs maps each cgroup controller ("" for the unified hierarchy) to a container's
// cgroup directory in that controller's hierarchy, as runc's state.json does. The runc
// executor has it from state.json, the containerd executor from the spec's cgroupsPath
// (cgroupDirsOf); oomKilled and usage then read the same files for both.
type cgroupDirs map[string]string

// cgroupDirsOf returns the directories runc creates for a spec whose cgroupsPath (relative
// to each hierarchy's root) is cgroupsPath: /sys/fs/cgroup/<controller><cgroupsPath> for the
// controllers read here that are on a v1 hierarchy, and the cgroup in the unified hierarchy
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified in the hybrid layout).
func cgroupDirsOf(cgroupsPath string) cgroupDirs {
	h := hierarchies()
	dirs := cgroupDirs{}
	for _, c := range h.v1 {
		dirs[c] = "/sys/fs/cgroup/" + c + cgroupsPath
	}
	if h.unified != "" {
		dirs[""] = h.unified + cgroupsPath
	}
	return dirs
}

// cgroupLayout says where the hierarchies holding the counters read here are mounted.
type cgroupLayout struct {
	v1      []string // of cpuacct and memory, those on a v1 hierarchy at /sys/fs/cgroup/<name>
	unified string   // the unified hierarchy's mount point, "" if there is none
}

// hierarchies finds the host's cgroup layout, once.
var hierarchies = sync.OnceValue(func() cgroupLayout {
	fsType := func(dir string) int64 {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) != nil {
			return 0
		}
		return int64(st.Type)
	}
	var h cgroupLayout
	for _, c := range []string{"cpuacct", "memory"} {
		if fsType("/sys/fs/cgroup/"+c) == unix.CGROUP_SUPER_MAGIC {
			h.v1 = append(h.v1, c)
		}
	}
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if fsType(dir) == unix.CGROUP2_SUPER_MAGIC {
			h.unified = dir
			break
		}
	}
	return h
})

// oomKilled reads the OOM-kill counter of the container's memory cgroup: memory.oom_control
// on a v1 memory hierarchy, memory.events on v2.
func (d cgroupDirs) oomKilled() (bool, error) {
	if p, ok := d["memory"]; ok {
		return oomCounter(filepath.Join(p, "memory.oom_control"))
	}
	if p, ok := d[""]; ok {
		return oomCounter(filepath.Join(p, "memory.events"))
	}
	return false, nil
}

// usage reads the CPU time and peak memory counters of the container's cgroups (see the
// package doc): each from its v1 controller when there is one, else from the unified
// hierarchy.
func (d cgroupDirs) usage() executors.Usage {
	var u executors.Usage
	v2, isV2 := d[""]
	if p, ok := d["cpuacct"]; ok {
		u.CPU = time.Duration(readCounter(filepath.Join(p, "cpuacct.usage"), ""))
	} else if isV2 {
		u.CPU = time.Duration(readCounter(filepath.Join(v2, "cpu.stat"), "usage_usec")) * time.Microsecond
	}
	if p, ok := d["memory"]; ok {
		u.PeakMemoryBytes = readCounter(filepath.Join(p, "memory.max_usage_in_bytes"), "")
	} else if isV2 {
		u.PeakMemoryBytes = readCounter(filepath.Join(v2, "memory.peak"), "")
	}
	return u
}

// Usage reads the CPU time and peak memory of the cgroup that runc creates for a spec whose
// cgroupsPath is cgroupsPath, by the rules of the package doc, for an executor that runs the
// spec through another runc front end (containerd's shim). It must be read after the step's
// last process exited and before the cgroup is removed.
func Usage(cgroupsPath string) executors.Usage {
	return cgroupDirsOf(cgroupsPath).usage()
}

// readCounter reads a cgroup file that holds one number, or with key the number on the line
// "key N" of a flat-keyed file (cpu.stat). Anything unreadable is 0.
func readCounter(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	v := strings.TrimSpace(string(b))
	if key != "" {
		v = ""
		for _, line := range strings.Split(string(b), "\n") {
			if k, n, _ := strings.Cut(line, " "); k == key {
				v = n
				break
			}
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// deleteStopped does what `runc delete` does for a stopped container (remove its cgroups and
// its state) without starting another runc process, which is most of its cost. Anything
// unexpected (a cgroup still busy, no state) falls back to `runc delete --force`.
func (e *Executor) deleteStopped(id string) error {
	st, err := e.state(id)
	if err != nil {
		return e.delete(id)
	}
	for _, p := range st.CgroupPaths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return e.delete(id)
		}
	}
	if err := os.RemoveAll(st.dir); err != nil {
		return fmt.Errorf("remove runc state: %w", err)
	}
	return nil
}

// exists reports whether runc has state for id.
func (e *Executor) exists(id string) bool {
	_, err := os.Stat(filepath.Join(e.stateDir, id, "state.json"))
	return err == nil
}

// Cleanup implements executors.Executor: it kills and deletes runc containers whose ID starts
// with prefix and removes their bundles (unmounting their overlays). A `runc run` killed
// while it created its container (it dies with foundry) can leave a state directory without
// state.json, which runc no longer knows as a container, and the container's cgroups:
// Cleanup kills whatever is still in those cgroups and removes both.
func (e *Executor) Cleanup(ctx context.Context, prefix string) error {
	var errs []error
	ents, _ := os.ReadDir(e.stateDir)
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), prefix) {
			continue
		}
		_ = exec.CommandContext(ctx, e.runtime, "--root", e.stateDir, "kill", "--all", ent.Name(), "KILL").Run()
		if err := e.delete(ent.Name()); err != nil {
			errs = append(errs, err)
		}
		if !e.exists(ent.Name()) {
			if err := os.RemoveAll(filepath.Join(e.stateDir, ent.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, cg := range e.cgroups(prefix) {
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		}
	}
	ents, _ = os.ReadDir(e.bundleDir)
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), prefix) {
			continue
		}
		if err := e.removeBundle(filepath.Join(e.bundleDir, ent.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("runc executor: cleanup %q: %w", prefix, err)
	}
	return nil
}

// cgroups lists the cgroup directories of containers whose ID starts with prefix: under
// CgroupParent in the unified hierarchy (v2) or in each controller's (v1).
func (e *Executor) cgroups(prefix string) []string {
	v2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", e.cgroupParent, prefix+"*"))
	v1, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", e.cgroupParent, prefix+"*"))
	return append(v2, v1...)
}

// removeCgroup kills the processes left in a container's cgroup and removes it; a process
// being killed holds it for a moment, so the removal is retried for a while.
func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if b, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, _ := strconv.Atoi(f); pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// OOMKills reports whether the kernel OOM-killed a process in the memory cgroup at
// cgroupsPath (relative to the cgroup root), on cgroup v2 or the v1 memory hierarchy. A missing
// cgroup reports false.
func OOMKills(cgroupsPath string) (bool, error) {
	return cgroupDirsOf(cgroupsPath).oomKilled()
}

// oomCounter reads the oom_kill line of a memory.oom_control (v1) or memory.events (v2) file.
// A missing file reports false.
func oomCounter(file string) (bool, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read OOM counter: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == "oom_kill" {
			return v != "0", nil
		}
	}
	return false, sc.Err()
}

// runcError returns the messages runc logged at level error, if any.
func runcError(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	var msgs []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(line, &entry) == nil && (entry.Level == "error" || entry.Level == "fatal") {
			msgs = append(msgs, entry.Msg)
		}
	}
	return strings.Join(msgs, "; ")
}
