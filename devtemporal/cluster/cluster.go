// Package cluster starts what the Temporal engine runs on, on this machine, for the tests and
// the bench of devtemporal: a Temporal server in this process (go.temporal.io/server's
// temporaltest: every service, SQLite in memory), Foundry's own registry server, and `foundry
// worker` processes of a given foundry binary.
package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/server/temporaltest"
)

// Cluster is a Temporal server, a registry and the workers started on them.
type Cluster struct {
	Server    *temporaltest.TestServer
	Addr      string // the Temporal frontend, HOST:PORT
	Namespace string
	Registry  string // the registry's HOST:PORT/REPO
	Foundry   string // the foundry binary
	dir       string

	mu    sync.Mutex
	procs []*Proc
}

// Build builds the foundry binary of the main module at mainModule into out.
func Build(mainModule, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/foundry")
	cmd.Dir = mainModule
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building foundry: %w", err)
	}
	return nil
}

// Start starts a server and a registry, keeping their files and the workers' under dir.
func Start(foundry, dir string) (*Cluster, error) {
	ts := temporaltest.NewServer()
	c := &Cluster{Server: ts, Addr: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(), Foundry: foundry, dir: dir}
	reg, err := c.Launch("registry", "registry", "serve", "-addr", "127.0.0.1:0", "-root", filepath.Join(dir, "registry"))
	if err != nil {
		c.Stop()
		return nil, err
	}
	m, err := reg.WaitFor(regexp.MustCompile(`as (127\.0\.0\.1:\d+/\S+),`), 10*time.Second)
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.Registry = m[1]
	return c, nil
}

// Worker starts `foundry worker` named name (its identity), with its own directory, running
// parallelism steps at once in runc, and waits until it serves.
func (c *Cluster) Worker(name string, parallelism int) (*Proc, error) {
	w, err := c.Launch(name, "worker", "-temporal-address", c.Addr, "-namespace", c.Namespace, "-executor", "runc",
		"-parallelism", fmt.Sprint(parallelism), "-identity", name, "-dir", filepath.Join(c.dir, "workers", name))
	if err != nil {
		return nil, err
	}
	if _, err := w.WaitFor(regexp.MustCompile(`serving foundry`), 30*time.Second); err != nil {
		return nil, err
	}
	return w, nil
}

// ApplyArgs are the arguments of an apply on this cluster, after "foundry".
func (c *Cluster) ApplyArgs(extra ...string) []string {
	return append([]string{"apply", "-auto-approve", "-progress", "plain", "-engine", "temporal",
		"-temporal-address", c.Addr, "-namespace", c.Namespace, "-temporal-registry", c.Registry}, extra...)
}

// Procs are the processes started so far.
func (c *Cluster) Procs() []*Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Proc(nil), c.procs...)
}

// Stop stops every process started (SIGTERM, then SIGKILL after 20s) and the server.
func (c *Cluster) Stop() {
	for _, p := range c.Procs() {
		p.Stop()
	}
	c.Server.Stop()
}

// Proc is a foundry process in the background, its output kept.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Out  *Buffer
	Done chan struct{} // closed when it has ended
}

// Env is the environment of the processes started: this one's, with the private containerd.
func Env(extra ...string) []string {
	return append(append(os.Environ(), "FOUNDRY_CONTAINERD_ADDRESS=/run/foundry-containerd/containerd.sock"), extra...)
}

// Launch starts foundry args... in the background; Stop ends it.
func (c *Cluster) Launch(name string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, Cmd: exec.Command(c.Foundry, args...), Out: &Buffer{}, Done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	p.Cmd.Env = Env()
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.Cmd.Wait(); close(p.Done) }()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// WaitFor waits until the output matches re and returns the submatches.
func (p *Proc) WaitFor(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.Out.String()); m != nil {
			return m, nil
		}
		select {
		case <-p.Done:
			if m := re.FindStringSubmatch(p.Out.String()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("%s ended before printing %s:\n%s", p.Name, re, p.Out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("%s did not print %s in %s:\n%s", p.Name, re, timeout, p.Out)
}

// Stop ends the process: SIGTERM, and SIGKILL if it is still there after 20s.
func (p *Proc) Stop() {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		p.Cmd.Process.Kill()
		<-p.Done
	}
}

// Result is a finished foundry command.
type Result struct {
	Code           int
	Stdout, Stderr string
	Elapsed        time.Duration
}

// Run runs foundry args... in dir, with env added to the environment, and waits for it.
func Run(foundry, dir string, env []string, args ...string) (Result, error) {
	cmd := exec.Command(foundry, args...)
	cmd.Dir = dir
	cmd.Env = Env(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(t0)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		return r, fmt.Errorf("foundry %v: %w", args, err)
	}
	return r, nil
}

// Buffer is a bytes.Buffer safe for one writer and many readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CopyProject copies the project at src into a fresh directory under dir.
func CopyProject(src, dir string) (string, error) {
	dst, err := os.MkdirTemp(dir, filepath.Base(src)+"-")
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	return dst, os.CopyFS(dst, os.DirFS(src))
}
