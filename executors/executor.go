// Package executors runs one sandboxed action: a process in a root filesystem built from
// an OCI image, with read-only input mounts, a writable /out and /tmp, resource limits and a
// wall-clock deadline. Implementations live in sub-packages (containerd, runc, local).
//
// An executor reports only what it observed. It never decides whether an action "succeeded"
// for caching or attestation purposes: the engine does that from the Result.
package executors

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
)

// ErrNotStarted marks a Run error caused by the action's own program: argv[0] is missing,
// not executable, or not an executable format. The engine can then blame the action (a
// candidate whose entrypoint cannot start fails its case) rather than the executor.
var ErrNotStarted = errors.New("the program could not be started")

// ExecFailure reports whether an OCI runtime's error message says that the container's
// process could not be executed (runc: "unable to start container process: exec: ...").
func ExecFailure(msg string) bool {
	return strings.Contains(msg, "container process: exec: ") || strings.Contains(msg, "container process caused: exec: ")
}

// Isolation modes recorded in provenance.
const (
	IsolationContainer = "container" // namespaces + cgroups via an OCI runtime
	IsolationNone      = "none"      // the local executor: a plain host process
)

// Image is the root filesystem an action runs in.
type Image struct {
	// Digest is the OCI manifest digest ("sha256:<hex>") of the image.
	Digest string
	// LayoutPath is an OCI image layout directory that contains the image (index.json
	// references it by Digest). Executors that import images (containerd) read it.
	LayoutPath string
	// Rootfs is the image unpacked into a directory. Executors that run bundles (runc)
	// use it as the read-only root.
	Rootfs string
	// Env, User and Workdir are the image configuration's defaults.
	Env     []string
	User    string
	Workdir string
}

// Mount makes a host file or directory visible inside the sandbox, read-only unless
// Writable is set.
type Mount struct {
	Source string // host path, already materialized by the engine
	Target string // absolute path inside the sandbox
	// Digest is what Source holds, when the engine knows it: a file's blob digest or a
	// directory's tree digest ("sha256:<hex>"). An executor that ships inputs elsewhere (the
	// Temporal engine) uses it to skip hashing what its store already has.
	Digest string
	// Writable mounts Source read-write: only a product acceptance's data volume, a host
	// directory of the run's scratch that outlives one sandbox (spec/language.md §10).
	// Steps' inputs are never writable.
	Writable bool
}

// Limits bound one action. Zero means "the executor's default", never "unlimited". The
// sandboxed executors' defaults (executors/runc: EffectiveLimits) are 2 GiB memory, 1024 pids,
// a one-hour timeout, no CPU quota (parallelism bounds CPU use), and a writable space of
// 1 GiB and 262144 inodes.
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int64
	Timeout     time.Duration
	// DiskBytes and Inodes bound the writable space, /out and /tmp together, while the
	// action runs (Writable): a write past them fails with ENOSPC, and Result.Full says so.
	// The local executor, which runs on the host, does not bound it.
	DiskBytes int64
	Inodes    int64
}

// Network policy of an action.
const (
	NetworkNone = "none" // a new network namespace with loopback only
	NetworkHost = "host" // only with an operator grant
	// NetworkEgress is a network namespace of the action's own with loopback only, where
	// Action.Egress serves a listener, made before the process starts, whose URL the
	// process gets in ProxyVars: its only way out (see Egress).
	NetworkEgress = "egress"
)

// Action is one process to run.
type Action struct {
	// ID names this attempt; it is unique per attempt and safe as a container name
	// ([a-z0-9-], at most 64 bytes). Leftovers of a crashed run are found by its prefix.
	ID string
	// Name is the logical action, stable across attempts: the step's address and cache key.
	// An executor that runs actions elsewhere (the Temporal engine) names its work by it.
	Name string
	// Platform is the "os/arch" the step was written for; an executor that routes actions to
	// other machines routes by it.
	Platform string
	Image    Image
	Argv     []string
	Env      []string // KEY=VALUE, replaces the image env when non-nil
	Workdir  string
	User     string // "uid:gid"; empty means the executor's non-root default
	Mounts   []Mount
	// OutDir is a host directory, created empty by the engine, that holds what the action
	// left in /out when Run returns. The local executor runs the action in it; a sandboxed
	// executor gives the action a bounded writable space (Writable) and copies its /out
	// into OutDir once the action's processes are gone.
	OutDir  string
	Limits  Limits
	Network string
	// Stdin, when set, is fed to the process's standard input, which is then closed (the
	// evaluator feeds a case's input this way); nil means an empty stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the process output as it is produced. The engine bounds them.
	Stdout io.Writer
	Stderr io.Writer
	// Egress serves the action's only way out when Network is NetworkEgress, and is nil
	// otherwise. A sandboxed executor calls it, before the process starts, with a listener
	// on loopback inside the sandbox's network namespace (StartEgress), and sets ProxyVars
	// to its URL; the local executor, whose process is on the host's network, with one on
	// the host's loopback. Its context ends when the process has ended; Run waits for it to
	// return, and fails with its error.
	Egress EgressFunc
	// Attach, when set, makes the action a service: once its process has started, Attach is
	// called with a Dialer that connects from inside the sandbox's network namespace (the
	// host's for the local executor). When Attach returns, the executor kills the action and
	// Run returns with Result.Stopped set. If the process ends first (exit, deadline, memory
	// limit, ctx), Attach's ctx is cancelled and Run waits for Attach to return; a process
	// that ends before its network can be reached may end without Attach being called.
	Attach AttachFunc
}

// Result is what the executor observed.
type Result struct {
	// ExitCode is the process exit status; -1 if it was killed by a signal whose cause the
	// executor knows (Signal is then set). OCI runtimes (runc, containerd) fold any other fatal
	// signal into 128+n, so a sandboxed step that dies of SIGSEGV reports 139 with no Signal.
	ExitCode  int
	Signal    string // "SIGKILL" etc., when known
	TimedOut  bool   // killed at the deadline
	OOMKilled bool   // the kernel OOM-killed a process of the step at its memory limit
	Stopped   bool   // killed because Action.Attach returned (ExitCode -1, Signal SIGKILL)
	// Full is set when the action filled its writable space (Limits.DiskBytes or Inodes):
	// whatever its exit status, what it left in /out may be cut short.
	Full     *Full
	Started  time.Time
	Finished time.Time
	// Usage is what the action's processes used, as the executor measured it once they had
	// ended. A field is zero when the executor could not measure it; each executor's package
	// doc says what it counts and when it cannot.
	Usage Usage
	// Remote is set by an executor that had the action run on another machine (the Temporal
	// engine): who ran it there, with which executor. Provenance names that executor.
	Remote *Remote
}

// Remote says where an action ran when it did not run on this machine.
type Remote struct {
	Executor  string // the executor that ran it ("containerd", "runc")
	Isolation string // that executor's isolation
	Worker    string // the worker's identity (its host and process, as it reported them)
}

// Usage is the resources an action consumed. The sandboxed executors measure the step's
// cgroup, so the numbers include the OCI runtime's init process (tens of milliseconds of CPU
// and a few MiB) and the page cache and tmpfs pages charged to the cgroup; the local executor
// measures the process and the descendants it waited for. Numbers from different executors
// are comparable in magnitude, not byte for byte.
type Usage struct {
	// CPU is the user plus system CPU time of all the action's processes.
	CPU time.Duration
	// PeakMemoryBytes is the most memory the action held at one moment: all of the step's
	// cgroup at once in a sandbox, its largest single process's resident set for the local
	// executor.
	PeakMemoryBytes int64
}

// Executor runs actions. Run returns an error only when the action could not be run at all
// (bad image, runtime failure); a non-zero exit, timeout or OOM is a Result, not an error.
type Executor interface {
	// Name is the executor's short name: "containerd", "runc" or "local".
	Name() string
	// Isolation is IsolationContainer or IsolationNone.
	Isolation() string
	// Run executes the action and waits for it and its children: when Run returns, no process
	// of the action is left and its output has been written to Stdout and Stderr. Freeing
	// runtime objects (task records, containers, snapshots, leases) may finish in the
	// background; Close waits for that. When ctx is cancelled, Run kills the action and
	// returns its Result together with an error wrapping ctx.Err().
	Run(ctx context.Context, a *Action) (*Result, error)
	// Cleanup removes leftovers (containers, snapshots, leases, bundles) of earlier crashed
	// runs whose IDs start with prefix.
	Cleanup(ctx context.Context, prefix string) error
	Close() error
}
