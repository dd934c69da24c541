package devtemporal

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"
)

// These tests drive the real thing: a Temporal server in this process (temporaltest: every
// service, SQLite in memory), Foundry's own registry server, and `foundry worker` and
// `foundry apply` as separate processes of a foundry binary built from this checkout.

var foundryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "foundry-temporal-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	foundryBin = filepath.Join(dir, "foundry")
	build := exec.Command("go", "build", "-o", foundryBin, "./cmd/foundry")
	build.Dir = ".." // the main module
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building foundry:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needSandbox fails (in CI) or skips where runc cannot run steps.
func needSandbox(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("runc")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("these tests need root and runc (CI=true: not skipping)")
	}
	t.Skip("needs root and runc")
}

// cluster is a Temporal server and a registry for one test.
type cluster struct {
	ts        *temporaltest.TestServer
	addr, ns  string
	registry  string // HOST:PORT/REPO
	workerDir string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	needSandbox(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := &cluster{ts: ts, addr: ts.GetFrontendHostPort(), ns: ts.GetDefaultNamespace(), workerDir: t.TempDir()}
	reg := start(t, "registry", "registry", "serve", "-addr", "127.0.0.1:0", "-root", filepath.Join(t.TempDir(), "registry"))
	line := reg.waitFor(t, regexp.MustCompile(`as (127\.0\.0\.1:\d+/\S+),`), 10*time.Second)
	c.registry = line[1]
	return c
}

// proc is a foundry process the test started, with its output kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs foundry args... in the background until the test ends (SIGTERM, then SIGKILL).
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(foundryBin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), "FOUNDRY_CONTAINERD_ADDRESS=/run/foundry-containerd/containerd.sock")
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitFor waits until the process's output matches re and returns the submatches.
func (p *proc) waitFor(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended before printing %s:\n%s", p.name, re, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not print %s in %s:\n%s", p.name, re, timeout, p.out.String())
	return nil
}

// worker starts a foundry worker named name (its identity) with its own directory.
func (c *cluster) worker(t *testing.T, name string, parallelism int) *proc {
	t.Helper()
	w := start(t, name, "worker", "-temporal-address", c.addr, "-namespace", c.ns, "-executor", "runc",
		"-parallelism", fmt.Sprint(parallelism), "-identity", name, "-dir", filepath.Join(c.workerDir, name))
	w.waitFor(t, regexp.MustCompile(`serving foundry`), 30*time.Second)
	return w
}

// run is a finished foundry command.
type run struct {
	code           int
	stdout, stderr string
}

// foundry runs foundry args... in dir and waits for it.
func foundry(t *testing.T, dir string, env []string, args ...string) run {
	t.Helper()
	cmd := exec.Command(foundryBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "FOUNDRY_CONTAINERD_ADDRESS=/run/foundry-containerd/containerd.sock"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("foundry %s: %v", strings.Join(args, " "), err)
	}
	return run{code: code, stdout: out.String(), stderr: errb.String()}
}

// applyTemporal applies the project in dir on the cluster.
func (c *cluster) apply(t *testing.T, dir string, env []string, args ...string) run {
	t.Helper()
	return foundry(t, dir, env, append([]string{"apply", "-auto-approve", "-progress", "plain", "-engine", "temporal",
		"-temporal-address", c.addr, "-namespace", c.ns, "-temporal-registry", c.registry}, args...)...)
}

// project copies testdata/fanout into a fresh directory.
func project(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "fanout")
	if err := os.CopyFS(dst, os.DirFS("testdata/fanout")); err != nil {
		t.Fatal(err)
	}
	return dst
}

// statement is what the tests read of a step's provenance.
type statement struct {
	Subjects []string // "name sha256:..." sorted
	Builder  string
	Worker   string
}

// provenance reads every SLSA provenance the project in dir minted.
func provenance(t *testing.T, dir string) []statement {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, ".foundry", "attestations", "*.json"))
	var out []statement
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Name   string
				Digest map[string]string
			}
			Predicate struct {
				RunDetails struct {
					Builder struct {
						ID      string            `json:"id"`
						Version map[string]string `json:"version"`
					}
				} `json:"runDetails"`
			}
		}
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if st.PredicateType != "https://slsa.dev/provenance/v1" {
			continue
		}
		s := statement{Builder: st.Predicate.RunDetails.Builder.ID, Worker: st.Predicate.RunDetails.Builder.Version["worker"]}
		for _, sub := range st.Subject {
			s.Subjects = append(s.Subjects, sub.Name+" sha256:"+sub.Digest["sha256"])
		}
		sort.Strings(s.Subjects)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].Subjects, ",") < strings.Join(out[j].Subjects, ",") })
	return out
}

// workflowOf is the workflow ID an apply printed.
func workflowOf(t *testing.T, r run) string {
	t.Helper()
	m := regexp.MustCompile(`workflow (foundry-apply-[0-9a-f]+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the apply did not name its workflow:\n%s", r.stderr)
	}
	return m[1]
}

// lines returns the lines of s that contain all of subs.
func lines(s string, subs ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(sc.Text(), sub)
		}
		if ok {
			out = append(out, sc.Text())
		}
	}
	return out
}
