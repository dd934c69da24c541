package devtemporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/foundry-build/foundry/devtemporal/cluster"
	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/store"
)

const wantJoined = "0 29 leaf\n1 29 leaf\n"

// The Temporal engine and the embedded one run the same graph to the same outputs and
// provenance subjects under the same builder id; only the builder's version names the worker.
// Six sleeping steps at once on two workers of four slots each: both workers run some.
func TestTemporalSameAsEmbedded(t *testing.T) {
	c := newCluster(t)
	worker(t, c, "w1", 4)
	worker(t, c, "w2", 4)

	onTemporal := project(t)
	r := apply(t, c, onTemporal, nil, "-var", "n=6", "-var", "sleep=1")
	if r.Code != 0 {
		t.Fatalf("apply -engine temporal: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "Apply complete: 8 executed, 0 cached") {
		t.Errorf("apply -engine temporal:\n%s", r.Stdout)
	}
	embedded := project(t)
	if r := foundry(t, embedded, nil, "apply", "-auto-approve", "-progress", "plain", "-executor", "runc", "-var", "n=6", "-var", "sleep=1"); r.Code != 0 {
		t.Fatalf("embedded apply: exit %d\n%s", r.Code, r.Stderr)
	}
	for _, dir := range []string{onTemporal, embedded} {
		out := foundry(t, dir, nil, "output", "step.join", "/out/joined.txt")
		if out.Code != 0 || out.Stdout != wantJoined {
			t.Errorf("%s: step.join's output: exit %d %q %s", dir, out.Code, out.Stdout, out.Stderr)
		}
	}

	tp, ep := statements(t, onTemporal), statements(t, embedded)
	if len(tp) != 8 || len(ep) != 8 {
		t.Fatalf("provenance statements: %d on Temporal, %d embedded; want 8 each", len(tp), len(ep))
	}
	workers := map[string]int{}
	for i := range tp {
		if !slices.Equal(tp[i].Subjects, ep[i].Subjects) || tp[i].Builder != ep[i].Builder {
			t.Errorf("statement %d differs:\n temporal %v %s\n embedded %v %s", i, tp[i].Subjects, tp[i].Builder, ep[i].Subjects, ep[i].Builder)
		}
		if ep[i].Worker != "" {
			t.Errorf("an embedded step names worker %q", ep[i].Worker)
		}
		workers[tp[i].Worker]++
	}
	if workers["w1"] == 0 || workers["w2"] == 0 || workers["w1"]+workers["w2"] != 8 {
		t.Errorf("steps per worker, as provenance names them: %v; want both w1 and w2, and nothing else", workers)
	}

	// Everything is cached now: a plan has nothing to run, and an apply runs nothing.
	if p := foundry(t, onTemporal, nil, "plan", "-detailed-exitcode", "-var", "n=6", "-var", "sleep=1"); p.Code != 0 {
		t.Errorf("plan after the Temporal apply: exit %d\n%s", p.Code, p.Stdout)
	}
}

// A step's non-zero exit is a result: Temporal does not retry it, and the apply reports it as
// the embedded engine does.
func TestTemporalNonZeroExitIsAResult(t *testing.T) {
	c := newCluster(t)
	w := worker(t, c, "w1", 4)
	dir := project(t)
	r := apply(t, c, dir, nil, "-var", "fail=true")
	if r.Code != 1 {
		t.Fatalf("apply of a failing step: exit %d, want 1\n%s", r.Code, r.Stderr)
	}
	for _, want := range []string{"step.join: exited with code 3", "failing on purpose"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("apply's report lacks %q:\n%s", want, r.Stderr)
		}
	}
	if n := lines(w.Out.String(), "start step.join@"); len(n) != 1 {
		t.Errorf("the failing step was started %d times, want once:\n%s", len(n), w.Out.String())
	}
	if n := lines(w.Out.String(), "done step.join@", "exit 3"); len(n) != 1 {
		t.Errorf("the worker did not report exit 3 once:\n%s", w.Out.String())
	}
}

// A worker killed with SIGKILL mid-step: after the heartbeat timeout Temporal gives the step
// to the other worker, the apply completes with the right outputs, the step ran to a result
// once (one provenance statement, naming the survivor), and a worker restarted on the dead
// one's directory removes what it left.
func TestTemporalWorkerKilledMidStep(t *testing.T) {
	c := newCluster(t)
	w1 := worker(t, c, "w1", 1)
	w2 := worker(t, c, "w2", 1)
	dir := project(t)

	done := applyInBackground(t, c, dir, "-var", "n=2", "-var", "sleep=6", "-heartbeat-timeout", "3s")
	// Each worker takes one of the two sleeping steps.
	startRE := regexp.MustCompile(`start (step\.work\[\d\]@\S+) attempt 1`)
	victim := waitFor(t, w1, startRE, 60*time.Second)[1]
	waitFor(t, w2, startRE, 60*time.Second)
	if err := w1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := done.wait(t, 3*time.Minute, "the apply did not finish after its worker was killed")
	if r.Code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := lines(w2.Out.String(), "start "+victim+" attempt 2"); len(got) != 1 {
		t.Errorf("w2 did not take over %s as attempt 2:\n%s", victim, w2.Out.String())
	}
	if out := foundry(t, dir, nil, "output", "step.join", "/out/joined.txt"); out.Stdout != wantJoined {
		t.Errorf("step.join's output: %q", out.Stdout)
	}
	// Each step has one provenance statement: the killed attempt left no result behind.
	st := statements(t, dir)
	if len(st) != 4 {
		t.Errorf("provenance statements: %d, want 4 (seed, two work steps, join)", len(st))
	}
	for _, s := range st {
		if s.Worker != "w2" && s.Worker != "w1" {
			t.Errorf("a statement names worker %q", s.Worker)
		}
	}
	if got := lines(w1.Out.String(), "done "+victim); len(got) > 0 {
		t.Errorf("the killed worker reported %s done: %v", victim, got)
	}
}

// A workflow past its history bound continues as new, carrying the actions not yet started;
// the apply does not notice. FOUNDRY_TEMPORAL_MAX_HISTORY makes the bound small enough for
// ten steps (the default, 10,000 events, takes about a thousand).
func TestTemporalContinuesAsNew(t *testing.T) {
	c := newCluster(t)
	worker(t, c, "w1", 2)
	dir := project(t)
	r := apply(t, c, dir, []string{"FOUNDRY_TEMPORAL_MAX_HISTORY=40"}, "-var", "n=8")
	if r.Code != 0 || !strings.Contains(r.Stdout, "10 executed") {
		t.Fatalf("apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	id := workflowOf(t, r)
	// The apply waits 10 s for its workflow to end; on a loaded machine (CI saw it) the end
	// comes later, so wait for it here before asking how it ended.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Server.GetDefaultClient().GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Errorf("workflow %s: %v", id, err)
	}
	desc, err := c.Server.GetDefaultClient().DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetFirstRunId() == info.GetExecution().GetRunId() {
		t.Errorf("workflow %s never continued as new (history %d events)", id, info.GetHistoryLength())
	}
	if info.GetStatus().String() != "Completed" {
		t.Errorf("workflow %s is %s after the apply, want Completed", id, info.GetStatus())
	}
	if out := foundry(t, dir, nil, "output", "step.join", "/out/joined.txt"); out.Stdout != wantJoined {
		t.Errorf("step.join's output: %q", out.Stdout)
	}
}

// The registry is not trusted: an input whose blob the registry's operator replaced is
// refused by the worker that fetches it (each attempt, on any worker), the step never runs,
// and the apply fails naming the mismatch.
func TestTemporalForgedInputRefused(t *testing.T) {
	c := newCluster(t)
	w := worker(t, c, "w1", 2)
	dir := project(t)
	real, err := os.ReadFile(filepath.Join(dir, "words", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(real)
	blobs := filepath.Join(c.RegistryRoot, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	forged := strings.Repeat("X", len(real)) // same size, other bytes
	if err := os.WriteFile(filepath.Join(blobs, hex.EncodeToString(sum[:])), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, c, dir, nil)
	if r.Code != 1 {
		t.Fatalf("apply with a forged input: exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "step.seed") || !strings.Contains(r.Stderr, "digest mismatch") {
		t.Errorf("apply's report does not name the mismatch:\n%s", r.Stderr)
	}
	if got := lines(w.Out.String(), "done step.seed@"); len(got) > 0 {
		t.Errorf("the worker ran the step on forged input: %v", got)
	}
	if got := lines(w.Out.String(), "error step.seed@", "digest mismatch"); len(got) == 0 {
		t.Errorf("the worker did not refuse the forged blob:\n%s", w.Out.String())
	}
}

// An apply whose workflow is ended under it (an operator terminates it) fails its step within
// seconds, saying so, instead of waiting for a reply that cannot come.
func TestTemporalWorkflowEndedUnderTheApply(t *testing.T) {
	c := newCluster(t)
	w := worker(t, c, "w1", 1)
	dir := project(t)
	done := applyInBackground(t, c, dir, "-var", "n=2", "-var", "sleep=60")
	waitFor(t, w, regexp.MustCompile(`start step\.work\[\d\]`), 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.Server.GetDefaultClient()
	list, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	terminated := 0
	for _, ex := range list.GetExecutions() {
		if ex.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if err := cl.TerminateWorkflow(ctx, ex.GetExecution().GetWorkflowId(), "", "the test ends it"); err != nil {
				t.Fatal(err)
			}
			terminated++
		}
	}
	if terminated != 1 {
		t.Fatalf("terminated %d running workflows, want the apply's one", terminated)
	}
	if r := done.wait(t, 50*time.Second, "the apply still waits 50s after its workflow was terminated"); r.Code != 1 || !strings.Contains(r.Stderr, "ended (Terminated)") {
		t.Errorf("apply: exit %d, want 1 naming the terminated workflow\n%s", r.Code, r.Stderr)
	}
}

// Applies of one project on Temporal at once take turns with its .foundry, as embedded ones
// do: every one succeeds, one runs the steps and the others find them cached.
func TestTemporalConcurrentApplies(t *testing.T) {
	c := newCluster(t)
	worker(t, c, "w1", 4)
	worker(t, c, "w2", 4)
	dir := project(t)
	const n = 5
	results := make(chan cluster.Result, n)
	for range n {
		go func() { results <- apply(t, c, dir, nil, "-var", "sleep=0.5") }()
	}
	ran := 0
	for range n {
		r := <-results
		switch {
		case r.Code != 0:
			t.Errorf("an apply failed: exit %d\n%s", r.Code, r.Stderr)
		case strings.Contains(r.Stdout, "6 executed, 0 cached"):
			ran++
		case !strings.Contains(r.Stdout, "0 executed, 6 cached"):
			t.Errorf("an apply neither ran nor found cached all six steps:\n%s", r.Stdout)
		}
	}
	if ran != 1 {
		t.Errorf("%d applies ran the steps, want 1", ran)
	}
	if p := foundry(t, dir, nil, "plan", "-detailed-exitcode", "-var", "sleep=0.5"); p.Code != 0 {
		t.Errorf("plan after the applies: exit %d\n%s", p.Code, p.Stdout)
	}
}

// Action-cache records travel through the registry: an apply in another workspace that
// trusts the first one's key takes them (it runs nothing, and has the outputs and their
// provenance), one that does not trust it runs everything (and pushes its own records, under
// its own key, which do not displace the first one's), and a record forged in the registry
// under the first one's tag — the join's output swapped, its genuine provenance kept — is
// refused.
func TestTemporalSharedRecords(t *testing.T) {
	c := newCluster(t)
	w := worker(t, c, "w1", 4)
	first := project(t)
	if r := apply(t, c, first, nil); r.Code != 0 || !strings.Contains(r.Stdout, "6 executed, 0 cached") {
		t.Fatalf("first apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	trust := []string{"-trust-key", filepath.Join(first, ".foundry", "keys", "signing.pub")}

	untrusting := project(t)
	r := apply(t, c, untrusting, nil)
	if r.Code != 0 || !strings.Contains(r.Stdout, "6 executed, 0 cached") {
		t.Errorf("an apply that does not trust the first one's key: exit %d, want all six run\n%s", r.Code, r.Stdout)
	}
	if strings.Contains(r.Stderr, "from the shared cache") {
		t.Errorf("an apply took records signed by a key it does not trust:\n%s", r.Stderr)
	}

	trusting := project(t)
	r = apply(t, c, trusting, nil, trust...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "0 executed, 6 cached") {
		t.Fatalf("an apply that trusts the first one's key: exit %d, want all six from the shared cache\nSTDOUT:\n%s\nSTDERR:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := len(lines(r.Stderr, "(cached: from the shared cache)")); n != 6 {
		t.Errorf("%d steps said they came from the shared cache, want 6:\n%s", n, r.Stderr)
	}
	if out := foundry(t, trusting, nil, "output", "step.join", "/out/joined.txt"); out.Stdout != wantJoined {
		t.Errorf("step.join's output from the shared cache: %q %s", out.Stdout, out.Stderr)
	}
	if got, want := statements(t, trusting), statements(t, first); len(got) != len(want) {
		t.Errorf("the trusting apply holds %d provenance statements, the first %d", len(got), len(want))
	}

	// The registry's operator swaps the join's output for other bytes in its record.
	m := regexp.MustCompile(`start step\.join@(sha256:[0-9a-f]{64})`).FindStringSubmatch(w.Out.String())
	if m == nil {
		t.Fatalf("no join in the worker's log:\n%s", w.Out)
	}
	key := digest.Digest(m[1])
	ctx := context.Background()
	reg, err := registry.Open(c.Registry)
	if err != nil {
		t.Fatal(err)
	}
	firstKey, err := provenance.LoadVerifiers(filepath.Join(first, ".foundry", "keys", "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	signer := firstKey[0].KeyID
	shared, found, err := registry.GetRecord(ctx, reg, key, signer)
	if err != nil || !found {
		t.Fatalf("the join's record: found %v, %v", found, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(shared.Record, &rec); err != nil {
		t.Fatal(err)
	}
	forged := []byte("forged\n")
	scratch, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fd, err := scratch.PutBytes(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.PushBlob(ctx, reg, scratch, fd); err != nil {
		t.Fatal(err)
	}
	out := rec["outputs"].([]any)[0].(map[string]any)
	out["digest"], out["size"] = string(fd), len(forged)
	if shared.Record, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := registry.PutRecord(ctx, reg, key, signer, shared); err != nil {
		t.Fatal(err)
	}
	victim := project(t)
	r = apply(t, c, victim, nil, trust...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "1 executed, 5 cached") {
		t.Errorf("an apply facing the forged record: exit %d, want the join run and the rest shared\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "step.join: the shared record was refused (its provenance names other outputs than the record)") {
		t.Errorf("the forged record was not refused for what it is:\n%s", r.Stderr)
	}
	if got := foundry(t, victim, nil, "output", "step.join", "/out/joined.txt"); got.Stdout != wantJoined {
		t.Errorf("step.join's output after the forged record: %q", got.Stdout)
	}
}

// A worker whose lease lapsed cannot commit over the retry: w1 is stopped (SIGSTOP) mid-step
// past the heartbeat timeout, Temporal gives the step to w2, and when w1 resumes and finishes
// its attempt the server refuses its completion. The apply takes w2's result: the step's
// provenance names w2, and its output is right.
func TestTemporalStaleWorkerCannotCommit(t *testing.T) {
	c := newCluster(t)
	w1 := worker(t, c, "w1", 1)
	w2 := worker(t, c, "w2", 1)
	dir := project(t)
	done := applyInBackground(t, c, dir, "-var", "n=2", "-var", "sleep=4", "-heartbeat-timeout", "2s")
	startRE := regexp.MustCompile(`start (step\.work\[\d\]@\S+) attempt 1`)
	victim := waitFor(t, w1, startRE, 60*time.Second)[1]
	if err := w1.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w2, regexp.MustCompile(regexp.QuoteMeta("start "+victim+" attempt 2")), 60*time.Second)
	if err := w1.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := done.wait(t, 2*time.Minute, "the apply did not finish")
	if r.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.Code, r.Stderr)
	}
	// Resumed, w1 ends its attempt (done, or cancelled by its next heartbeat); nothing of it
	// is taken.
	waitFor(t, w1, regexp.MustCompile(`(done|error) `+regexp.QuoteMeta(victim)+` attempt 1`), 30*time.Second)
	node := victim[:strings.Index(victim, "@")]
	out := foundry(t, dir, nil, "output", node, "/out/n.txt")
	if out.Code != 0 {
		t.Fatalf("output %s: %s", node, out.Stderr)
	}
	// Under load w2's attempt can lapse too, and a later attempt go to the resumed w1: that
	// one is w1's to commit. Attempt 1 never is.
	retriedByW1 := regexp.MustCompile(`start ` + regexp.QuoteMeta(victim) + ` attempt ([2-9]|\d\d)`).MatchString(w1.Out.String())
	found := false
	for _, s := range statements(t, dir) {
		if slices.Contains(s.Subjects, "/out/n.txt sha256:"+sha256hex(out.Stdout)) {
			found = true
			if s.Worker != "w2" && !(s.Worker == "w1" && retriedByW1) {
				t.Errorf("%s's provenance names worker %q, want w2 (w1's lease had lapsed, and it took no later attempt)\nw1:\n%s\nw2:\n%s", node, s.Worker, w1.Out.String(), w2.Out.String())
			}
		}
	}
	if !found {
		t.Errorf("no provenance for %s's output", node)
	}
	if out := foundry(t, dir, nil, "output", "step.join", "/out/joined.txt"); out.Stdout != wantJoined {
		t.Errorf("step.join's output: %q", out.Stdout)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A capability built on Temporal workers is admitted as the embedded engine admits it — the
// same manifest digest — and published once, even when the worker building a candidate is
// killed mid-build: the build is retried on the other worker, and the publish (an effect of
// the apply, through its outbox) happens once. examples/int-sort: two Go recipes, one of which
// fails the sealed suite; evaluations run on the apply's machine.
func TestTemporalCapabilityAdmittedOnce(t *testing.T) {
	c := newCluster(t)
	w1 := worker(t, c, "w1", 1)
	w2 := worker(t, c, "w2", 1)
	copyIntSort := func() string {
		dir, err := cluster.CopyProject("../examples/int-sort", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(dir, ".foundry")) // a local run's state, if any
		return dir
	}
	dir := copyIntSort()
	done := applyInBackground(t, c, dir, "-heartbeat-timeout", "3s")
	// Kill whichever worker starts the first build.
	buildRE := regexp.MustCompile(`start (recipe\.\S+\.step\.build)@\S+ attempt 1`)
	var victim *cluster.Proc
	for deadline := time.Now().Add(3 * time.Minute); victim == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, w := range []*cluster.Proc{w1, w2} {
			if buildRE.MatchString(w.Out.String()) {
				victim = w
				break
			}
		}
	}
	if victim == nil {
		t.Fatal("no worker started a build")
	}
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := done.wait(t, 8*time.Minute, "the apply did not finish")
	adm := regexp.MustCompile(`ADM capability\.int-sort: recipe\.int-sort-go admitted as \S+@(sha256:[0-9a-f]{64})`)
	m := adm.FindStringSubmatch(r.Stderr)
	if r.Code != 0 || m == nil {
		t.Fatalf("apply on Temporal: exit %d\n%s", r.Code, r.Stderr)
	}
	survivor := w1
	if victim == w1 {
		survivor = w2
	}
	if !strings.Contains(survivor.Out.String(), "attempt 2") {
		t.Errorf("the survivor retried nothing:\n%s", survivor.Out)
	}
	effects := foundry(t, dir, nil, "effects", "-json")
	var list []struct{ Kind, Status string }
	if err := json.Unmarshal([]byte(effects.Stdout), &list); err != nil {
		t.Fatalf("effects -json: %v\n%s", err, effects.Stdout)
	}
	if len(list) != 1 || list[0].Kind != "publish" || list[0].Status != "succeeded" {
		t.Errorf("effects: %+v, want one succeeded publish", list)
	}

	embedded := copyIntSort()
	e := foundry(t, embedded, nil, "apply", "-auto-approve", "-progress", "plain", "-executor", "runc")
	em := adm.FindStringSubmatch(e.Stderr)
	if e.Code != 0 || em == nil {
		t.Fatalf("embedded apply: exit %d\n%s", e.Code, e.Stderr)
	}
	if em[1] != m[1] {
		t.Errorf("admitted on Temporal as %s, embedded as %s: want the same manifest", m[1], em[1])
	}
}
