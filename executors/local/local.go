// Package local is the unsandboxed executor: the action's argv runs as a plain process on the
// host, as the user running foundry. It exists for explicit operator requests only (its
// provenance says isolation "none") and it honours only what a host process can:
//
//   - The image is not used: argv runs against the host's filesystem, and Image.Env is the
//     environment when Action.Env is nil, as in the sandboxes.
//   - /out cannot be remapped. The process gets the host OutDir in $FOUNDRY_OUT and, when the
//     action gives no workdir, runs in OutDir. An argv that spells the literal path /out writes
//     to the host's /out, if anything: the local executor does not rewrite arguments, because a
//     silent substitution could change what the command means.
//   - Mounts cannot be made visible at their targets, so an action with mounts is refused
//     (Run returns an error) rather than run against whatever the host has at those paths.
//   - There is no network, user, memory or pids isolation: Network, User and Limits other than
//     Timeout are not enforced (User must be empty or the current uid:gid). An egress action's
//     broker listens on the host's loopback and its proxy variables are set, but nothing
//     keeps the process from going around it.
//   - The deadline kills the process group the action starts in. A descendant that leaves the
//     group (setsid) escapes it; only the sandboxed executors kill every process of a step.
//   - Usage comes from the rusage wait4 returns for the action's process, which covers it and
//     the descendants it waited for (as time(1) does); a descendant it did not wait for (one
//     killed with the group, or one that left it) is not counted. CPU is their user plus
//     system time. PeakMemoryBytes is the peak resident set size of the largest single one of
//     them (ru_maxrss), not of all at once, and counts no page cache or tmpfs. Go starts a
//     process with vfork, and the kernel then carries foundry's own peak RSS into the child's
//     ru_maxrss when it execs: a peak no higher than foundry's own cannot be told from it,
//     and PeakMemoryBytes is then 0 (unknown).
package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/runc"
)

// OutEnv names the environment variable that carries the host path of the action's OutDir.
const OutEnv = "FOUNDRY_OUT"

// Executor runs actions as host processes.
type Executor struct{}

var _ executors.Executor = (*Executor)(nil)

// New returns the local executor.
func New() *Executor { return &Executor{} }

// Name implements executors.Executor.
func (*Executor) Name() string { return "local" }

// Isolation implements executors.Executor: none.
func (*Executor) Isolation() string { return executors.IsolationNone }

// Close implements executors.Executor.
func (*Executor) Close() error { return nil }

// Cleanup implements executors.Executor. The local executor keeps no state between runs; a
// crashed run's processes died with foundry's process group or were never tracked.
func (*Executor) Cleanup(context.Context, string) error { return nil }

// Run implements executors.Executor.
func (*Executor) Run(ctx context.Context, a *executors.Action) (*executors.Result, error) {
	if a == nil || len(a.Argv) == 0 || a.Argv[0] == "" {
		return nil, fmt.Errorf("local executor: empty argv")
	}
	if !runc.ValidID(a.ID) {
		return nil, fmt.Errorf("local executor: action ID %q: want 1-64 characters of [a-z0-9-]", a.ID)
	}
	if len(a.Mounts) > 0 {
		targets := make([]string, len(a.Mounts))
		for i, m := range a.Mounts {
			targets[i] = m.Target
		}
		return nil, fmt.Errorf("local executor: action %s has mounts (%s) and a host process cannot see them at their targets; use the runc or containerd executor",
			a.ID, strings.Join(targets, ", "))
	}
	if a.User != "" && a.User != fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()) {
		return nil, fmt.Errorf("local executor: action %s asks for user %s; the local executor runs as the current user %d:%d",
			a.ID, a.User, os.Getuid(), os.Getgid())
	}
	if a.OutDir == "" || !filepath.IsAbs(a.OutDir) {
		return nil, fmt.Errorf("local executor: action %s: OutDir %q must be an absolute host path", a.ID, a.OutDir)
	}
	env := a.Env
	if env == nil {
		env = a.Image.Env
	}
	env = append(append([]string(nil), env...), OutEnv+"="+a.OutDir)
	if (a.Network == executors.NetworkEgress) != (a.Egress != nil) {
		return nil, fmt.Errorf("local executor: action %s: network %q and an Egress function go together", a.ID, executors.NetworkEgress)
	}
	// Unsandboxed, the process is on the host's network anyway: its broker listens on the
	// host's loopback, so that it finds its proxy where a sandbox would.
	egress, err := executors.StartHostEgress(a)
	if err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	defer egress.Stop()
	if egress != nil {
		env = executors.ProxyEnv(env, egress.ProxyURL())
	}
	dir := a.Workdir
	if dir == "" {
		dir = a.OutDir
	}

	// argv[0] without a slash is looked up in the action's PATH, not foundry's.
	bin := a.Argv[0]
	if !strings.Contains(bin, "/") {
		p, err := lookPath(bin, env)
		if err != nil {
			return nil, fmt.Errorf("local executor: action %s: %w: %w", a.ID, executors.ErrNotStarted, err)
		}
		bin = p
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("local executor: action %s: working directory %s is not a directory (%v)", a.ID, dir, err)
	}
	cmd := &exec.Cmd{Path: bin, Args: append([]string(nil), a.Argv...), Env: env, Dir: dir, Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr}
	// Its own process group, so the deadline can kill its descendants too; and it dies if
	// foundry dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A descendant that escaped the group may hold the output pipes open; do not wait for it
	// forever once the process itself has exited.
	cmd.WaitDelay = 2 * time.Second

	res := &executors.Result{Started: time.Now()}
	if err := cmd.Start(); err != nil {
		// With the working directory checked above, Start fails only when the program
		// cannot be executed (missing, not executable, bad format).
		return nil, fmt.Errorf("local executor: action %s: %w: %w", a.ID, executors.ErrNotStarted, err)
	}
	// The child has exec'd: its ru_maxrss starts at no more than this (see the package doc).
	inheritedRSS := selfMaxRSS()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Unsandboxed, a service listens in the host's own network namespace.
	at := executors.StartAttach(a, func(context.Context) (executors.Dialer, func() error, error) {
		return executors.HostDialer, func() error { return nil }, nil
	})
	// Every return path ends Attach; the explicit Stop below reports its error.
	defer at.Stop()
	werr, killedBy := executors.Await(ctx, done, runc.EffectiveLimits(a.Limits).Timeout, at, res)
	if killedBy != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-done
	} else {
		// The leader exited; end what it left running in its group, as the sandboxes do.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res.Finished = time.Now()
	if err := at.Stop(); err != nil {
		return nil, fmt.Errorf("local executor: action %s: attach: %w", a.ID, err)
	}
	if err := egress.Stop(); err != nil {
		return nil, fmt.Errorf("local executor: action %s: egress: %w", a.ID, err)
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) {
		return nil, fmt.Errorf("local executor: action %s: wait: %w", a.ID, werr)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.Usage.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if ru.Maxrss > inheritedRSS {
			res.Usage.PeakMemoryBytes = ru.Maxrss << 10 // KiB on Linux
		}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.ExitCode = -1
		res.Signal = signalName(ws.Signal())
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	if killedBy != nil && !res.TimedOut && !res.Stopped {
		return res, fmt.Errorf("local executor: action %s: cancelled: %w", a.ID, killedBy)
	}
	return res, nil
}

// selfMaxRSS is foundry's own peak resident set size in KiB, or the largest int64 when it
// cannot be read (so that no child's peak is taken for its own).
func selfMaxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.MaxInt64
	}
	return ru.Maxrss
}

// lookPath resolves name in the action's PATH, not foundry's.
func lookPath(name string, env []string) (string, error) {
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in the action's PATH %q", name, path)
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGHUP: "SIGHUP", syscall.SIGPIPE: "SIGPIPE", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL", syscall.SIGUSR1: "SIGUSR1",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGALRM: "SIGALRM", syscall.SIGXCPU: "SIGXCPU",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
