package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Killing apply with SIGKILL at any point, then applying again, completes the run without
// re-executing finished steps, without half-written blobs and without leftover containers.
func TestCrashAtFaultPointsResumes(t *testing.T) {
	needSandbox(t)
	cases := []struct {
		point       string
		countReruns bool // whether step.count must execute again after the crash
	}{
		{run.FaultBeforeExec, true},
		{run.FaultAfterExec, true},
		{run.FaultAfterOutputs, true},
		{run.FaultAfterCachePut, false},
	}
	for _, c := range cases {
		t.Run(c.point, func(t *testing.T) {
			dir := helloProject(t)
			r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + c.point + ":step.count"})
			if r.code != -1 || !sameSet(r.executed, "step.words") {
				t.Fatalf("the faulted apply should die by SIGKILL after step.words: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
			r = apply(t, dir, nil)
			if r.code != 0 {
				t.Fatalf("resumed apply failed: %d\n%s", r.code, r.stderr)
			}
			if contains(r.executed, "step.words") || !contains(r.cached, "step.words") {
				t.Errorf("step.words finished before the crash but ran again: executed %v", r.executed)
			}
			if got := contains(r.executed, "step.count"); got != c.countReruns {
				t.Errorf("step.count executed again = %v, want %v (executed %v, cached %v)", got, c.countReruns, r.executed, r.cached)
			}
			assertClean(t, dir)
			_, out, _ := foundry(t, dir, "status", "-json")
			if !strings.Contains(out, `"interrupted"`) {
				t.Errorf("the killed run is not recorded as interrupted:\n%s", out)
			}
			_, out, _ = foundry(t, dir, "output", "step.report", "/out/report.txt")
			if !strings.Contains(out, "the top 3:") {
				t.Errorf("resumed result is wrong:\n%s", out)
			}
		})
	}
}

// A kill while a step's process is running leaves a container behind; the next apply
// removes it before it runs anything.
func TestCrashDuringStepCleansContainer(t *testing.T) {
	needSandbox(t)
	// Containers of other projects on this machine are not this apply's to clean.
	before := map[string]bool{}
	for _, id := range runcContainers(t) {
		before[id] = true
	}
	dir := t.TempDir()
	src := strings.Replace(failingProject[:strings.Index(failingProject, "step \"bad\"")], `run     = ["sh", "-c", "echo fine > /tmp/scratch && cat /tmp/scratch > /out/a"]`,
		`run     = ["sh", "-c", "sleep $${NAP:-0}; echo fine > /out/a"]
  env     = { NAP = var.nap }`, 1)
	src += "variable \"nap\" { default = \"30\" }\n"
	src = strings.Replace(src, `"/bin/cat" = "busybox" }`, `"/bin/cat" = "busybox", "/bin/sleep" = "busybox" }`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(foundryBin, "apply", "-auto-approve", "-executor", "runc", "-progress", "json")
	cmd.Dir = dir
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var e struct{ Type, Node string }
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "node_started" && e.Node == "step.ok" {
				started <- true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("step.ok never started")
	}
	time.Sleep(1500 * time.Millisecond) // let the container start its sleep
	var ids []string
	for _, id := range runcContainers(t) {
		if !before[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("no foundry container is running while the step sleeps")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	r := apply(t, dir, nil, "-var", "nap=0")
	if r.code != 0 {
		t.Fatalf("resumed apply: %d\n%s", r.code, r.stderr)
	}
	for _, id := range ids {
		for _, left := range runcContainers(t) {
			if left == id {
				t.Errorf("container %s of the killed apply is still there", id)
			}
		}
	}
	assertClean(t, dir)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// runcContainers lists the foundry containers runc knows about.
func runcContainers(t *testing.T) []string {
	out, err := exec.Command("runc", "--root", "/run/foundry-runc/state", "list", "-q").Output()
	if err != nil {
		return nil
	}
	var ids []string
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, run.ContainerPrefix) {
			ids = append(ids, l)
		}
	}
	return ids
}

// assertClean checks that no temporary blob or run scratch directory is left.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	// Blobs are written in blobs/tmp and renamed into blobs/sha256.
	for _, sub := range []string{"tmp", "sha256"} {
		entries, _ := os.ReadDir(filepath.Join(dir, ".foundry", "blobs", sub))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("temporary blob file left behind: blobs/%s/%s", sub, e.Name())
			}
		}
	}
	runs, _ := os.ReadDir(filepath.Join(dir, ".foundry", "runs"))
	if len(runs) != 0 {
		t.Errorf("run scratch left behind: %d entries", len(runs))
	}
}

// A kill at each point of a capability's publish — before its dispatch, after it (nothing
// published), after the manifest and its attestations are in the registry (not tagged), and
// after the tag (the outcome not recorded) — and an apply again leave one succeeded publish
// effect and one admitted version, without a second verification summary or packaging
// provenance on its manifest, and without running a step or a sealed suite again. Each
// effect the kill left unknown is reconciled by looking in the registry: published again
// when the tag does not name it, settled when it does (the next plan pins it, and the pull
// settles the effect: it never stays unknown).
func TestPublishCrashLeavesOnePublish(t *testing.T) {
	needSandbox(t)
	for _, c := range []struct {
		point      string
		reconciled string // what the resumed apply says, "" for nothing
	}{
		{outbox.FaultBeforeDispatch, ""},
		{admit.FaultAfterDispatch, "does not tag contract-"},
		{admit.FaultAfterCommit, "does not tag contract-"},
		{admit.FaultBeforeRecord, "so it is not performed again"},
	} {
		t.Run(c.point, func(t *testing.T) {
			dir := copyExample(t, "greeter")
			first := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + c.point + ":capability.greeter"}, "-progress", "plain")
			if first.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL as it publishes: exit %d\n%s", first.code, first.stderr)
			}
			r := apply(t, dir, nil, "-progress", "plain")
			if r.code != 0 {
				t.Fatalf("the resumed apply: exit %d\n%s", r.code, r.stderr)
			}
			if len(r.executed) != 0 {
				t.Errorf("steps finished before the crash ran again: %v", r.executed)
			}
			if strings.Contains(r.stderr, "sealed suite:") && !strings.Contains(r.stderr, "sealed suite: passed (recorded evaluation") {
				t.Errorf("the sealed suite was evaluated again:\n%s", r.stderr)
			}
			tagged := c.point == admit.FaultBeforeRecord
			admitted := strings.Count(first.stderr+r.stderr, "ADM capability.greeter")
			if tagged && (admitted != 0 || !strings.Contains(r.stderr, "capability.greeter pinned to")) || !tagged && admitted != 1 {
				t.Errorf("admitted %d times (tagged before the kill: %v):\n%s", admitted, tagged, r.stderr)
			}
			rec := strings.Contains(r.stderr, "REC capability.greeter: the publish to oci-layout:")
			if rec != (c.reconciled != "") || !strings.Contains(r.stderr, c.reconciled) {
				t.Errorf("reconciled: %v, want %q:\n%s", rec, c.reconciled, r.stderr)
			}
			ws, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			effects, err := ws.State.Effects(context.Background(), "")
			ws.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(effects) != 1 || effects[0].Status != "succeeded" {
				t.Fatalf("want one succeeded publish effect, have %+v", effects)
			}
			// One version in the registry, pinned by the next plan, with one summary and one
			// packaging provenance on its manifest.
			code, out, errs := foundry(t, dir, "plan", "-json")
			p := decodePlan(t, out)
			if code != 0 || p.Capabilities[0].Status != plan.StatusRegistry {
				t.Fatalf("plan after the resumed apply: exit %d %+v\n%s", code, p.Capabilities[0], errs)
			}
			pin := p.Capabilities[0].Pinned
			l, err := registry.OpenLayout(filepath.Join(dir, ".foundry", "registry"))
			if err != nil {
				t.Fatal(err)
			}
			if vsas, pkgs := publishAttestations(t, l, pin.Digest); vsas != 1 || pkgs != 1 {
				t.Errorf("the manifest %s has %d verification summaries and %d packaging provenances, want one of each", pin.Digest, vsas, pkgs)
			}
		})
	}
}

// publishAttestations counts what a publish attaches to manifest m in registry s, once per
// publish: verification summaries, and provenances naming m (the packaging's).
func publishAttestations(t *testing.T, s registry.Store, m digest.Digest) (vsas, pkgs int) {
	t.Helper()
	atts, _, err := registry.Referrers(context.Background(), s, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atts {
		subjects, _ := provenance.ClaimedSubjects(a.Envelope)
		switch {
		case a.PredicateType == provenance.PredicateVSA:
			vsas++
		case a.PredicateType == provenance.PredicateSLSAProvenance && slices.Contains(subjects, string(m)):
			pkgs++
		}
	}
	return vsas, pkgs
}

// Runtimes are shared by every project on the machine: the recovery of one project's dead
// run removes that run's leftovers only, never the running steps of another project's apply
// (however close in time the two runs started).
func TestRecoveryLeavesOtherRunsAlone(t *testing.T) {
	needSandbox(t)
	dead, live := t.TempDir(), t.TempDir()
	for _, dir := range []string{dead, live} {
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := apply(t, dead, []string{"FOUNDRY_TEST_FAULT=" + run.FaultBeforeExec + ":step.nap"}); r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
	}
	ra := startApply(t, live, "runc", "-var", "nap=4")
	ra.waitStarted(t, "step.nap")
	if r := apply(t, dead, nil, "-var", "nap=0"); r.code != 0 {
		t.Fatalf("resumed apply: exit %d\n%s", r.code, r.stderr)
	}
	if code := ra.wait(t); code != 0 {
		t.Fatalf("the other project's apply failed while the dead run was recovered: exit %d\n%s", code, ra.stderrText())
	}
}

// A dead client's last requests can complete after it died: a container or task containerd
// finishes creating, a runc state directory and cgroup (with a process in it) and a mounted
// bundle of a runc killed mid-creation. What appears after the resumed apply's first sweep
// of the dead run's prefix is removed by its second, when it ends; the dead run's scratch
// directory, which marks the leftovers still to remove, goes only then.
func TestRecoverySweepsLeftoversThatAppearLate(t *testing.T) {
	needSandbox(t)
	for _, executor := range []string{"runc", "containerd"} {
		t.Run(executor, func(t *testing.T) {
			if executor == "containerd" {
				needContainerd(t)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
				t.Fatal(err)
			}
			r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + run.FaultBeforeExec + ":step.nap"}, "-executor", executor)
			if r.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
			}
			deadRun := runOf(t, r.stderr)
			late := run.ContainerPrefixOf(deadRun) + "step-nap-late"
			t.Cleanup(func() { removeContainers([]string{late}) })

			ra := startApply(t, dir, executor, "-var", "nap=2")
			ra.waitStarted(t, "step.nap") // the first sweep is done: it comes before the first container
			var check func() []string
			if executor == "runc" {
				check = lateRunc(t, late)
			} else {
				check = lateContainerd(t, late)
			}
			if left := check(); len(left) == 0 {
				t.Fatal("nothing late was made; nothing to test")
			}
			if code := ra.wait(t); code != 0 {
				t.Fatalf("resumed apply: exit %d\n%s", code, ra.stderrText())
			}
			if left := check(); len(left) > 0 {
				t.Errorf("what the dead run %s made late outlived the apply that recovered it:\n%s", deadRun, strings.Join(left, "\n"))
			}
			assertClean(t, dir)
		})
	}
}

// runOf returns the run ID of an apply's run_started event.
func runOf(t *testing.T, stderr string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		var e struct{ Type, Run string }
		if json.Unmarshal([]byte(l), &e) == nil && e.Type == "run_started" {
			return e.Run
		}
	}
	t.Fatalf("no run_started event:\n%s", stderr)
	return ""
}

// lateRunc makes what a `runc run` killed while creating container id leaves: its state
// directory without state.json, a cgroup with a process in it, and its bundle with the
// overlay mounted. It returns a function listing what of that is still there.
func lateRunc(t *testing.T, id string) func() []string {
	t.Helper()
	state := filepath.Join("/run/foundry-runc/state", id)
	bundle := filepath.Join("/run/foundry-runc/bundles", id)
	lower := t.TempDir()
	for _, d := range []string{state, bundle + "/upper", bundle + "/work", bundle + "/rootfs"} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("overlay", bundle+"/rootfs", "overlay", 0,
		"lowerdir="+lower+",upperdir="+bundle+"/upper,workdir="+bundle+"/work"); err != nil {
		t.Fatal(err)
	}
	cgroup := "/sys/fs/cgroup/foundry-runc/" + id // unified hierarchy
	if _, err := os.Stat("/sys/fs/cgroup/pids/foundry-runc"); err == nil {
		cgroup = "/sys/fs/cgroup/pids/foundry-runc/" + id // a v1 controller
	}
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	proc := exec.Command("sleep", "600")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { proc.Wait(); close(exited) }()
	t.Cleanup(func() { proc.Process.Kill(); <-exited; os.Remove(cgroup) })
	if err := os.WriteFile(cgroup+"/cgroup.procs", []byte(strconv.Itoa(proc.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		var left []string
		for _, p := range []string{state, bundle, cgroup} {
			if _, err := os.Stat(p); err == nil {
				left = append(left, p)
			}
		}
		if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), id) {
			left = append(left, "the overlay mount of "+id)
		}
		select {
		case <-exited:
		case <-time.After(100 * time.Millisecond):
			left = append(left, "the process in its cgroup")
		}
		return left
	}
}

// lateContainerd makes what containerd finishes creating for a client that died: a lease
// and a container named id. It returns a function listing what of that is still there.
func lateContainerd(t *testing.T, id string) func() []string {
	t.Helper()
	c, err := ctrd.New(containerdAddress(), ctrd.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := namespaces.WithNamespace(context.Background(), containerd.DefaultNamespace)
	lctx, _, err := c.WithLease(ctx, leases.WithID(id), leases.WithExpiration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewContainer(lctx, id, ctrd.WithRuntime("io.containerd.runc.v2", nil), ctrd.WithSpec(&oci.Spec{})); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		var left []string
		if _, err := c.LoadContainer(ctx, id); err == nil {
			left = append(left, "container "+id)
		}
		ls, err := c.LeasesService().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.ID == id {
				left = append(left, "lease "+id)
			}
		}
		return left
	}
}
