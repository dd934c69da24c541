package devtemporal

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/devtemporal/cluster"
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
	if err := cluster.Build("..", foundryBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
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

// newCluster starts a Temporal server and a registry for the test; on failure the test's log
// gets every process's output.
func newCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	needSandbox(t)
	c, err := cluster.Start(foundryBin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, p := range c.Procs() {
				t.Logf("--- %s:\n%s", p.Name, p.Out)
			}
		}
	})
	return c
}

func worker(t *testing.T, c *cluster.Cluster, name string, parallelism int) *cluster.Proc {
	t.Helper()
	w, err := c.Worker(name, parallelism)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func waitFor(t *testing.T, p *cluster.Proc, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	m, err := p.WaitFor(re, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// foundry runs foundry args... in dir and waits for it.
func foundry(t *testing.T, dir string, env []string, args ...string) cluster.Result {
	t.Helper()
	r, err := cluster.Run(foundryBin, dir, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// apply applies the project in dir on the cluster.
func apply(t *testing.T, c *cluster.Cluster, dir string, env []string, args ...string) cluster.Result {
	t.Helper()
	return foundry(t, dir, env, c.ApplyArgs(args...)...)
}

// background is an apply running in the background (applyInBackground).
type background chan cluster.Result

// applyInBackground starts apply(t, c, dir, nil, args...) on its own goroutine, so that the
// test can act on workers meanwhile.
func applyInBackground(t *testing.T, c *cluster.Cluster, dir string, args ...string) background {
	done := make(background, 1)
	go func() { done <- apply(t, c, dir, nil, args...) }()
	return done
}

// wait returns the apply's result, failing the test with msg if it takes longer than timeout.
func (b background) wait(t *testing.T, timeout time.Duration, msg string) cluster.Result {
	t.Helper()
	select {
	case r := <-b:
		return r
	case <-time.After(timeout):
		t.Fatal(msg)
	}
	return cluster.Result{}
}

// project copies testdata/fanout into a fresh directory.
func project(t *testing.T) string {
	t.Helper()
	dst, err := cluster.CopyProject("testdata/fanout", t.TempDir())
	if err != nil {
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

// statements reads every SLSA provenance the project in dir minted.
func statements(t *testing.T, dir string) []statement {
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
func workflowOf(t *testing.T, r cluster.Result) string {
	t.Helper()
	m := regexp.MustCompile(`workflow (foundry-apply-[0-9a-f]+)`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("the apply did not name its workflow:\n%s", r.Stderr)
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
