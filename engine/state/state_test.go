package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := OpenState(filepath.Join(t.TempDir(), ".foundry", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func dg(s string) digest.Digest { return digest.FromBytes([]byte(s)) }

func TestMigrateFromEmpty(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.SchemaVersion(ctx)
	if err != nil || v != Version || v < 1 {
		t.Fatalf("schema version = %d, %v; want %d", v, err, Version)
	}
	var mode string
	var fk, sync int
	db.SQL().QueryRow("PRAGMA journal_mode").Scan(&mode)
	db.SQL().QueryRow("PRAGMA foreign_keys").Scan(&fk)
	db.SQL().QueryRow("PRAGMA synchronous").Scan(&sync)
	if mode != "wal" || fk != 1 || sync != 1 {
		t.Fatalf("journal_mode=%q foreign_keys=%d synchronous=%d; want wal, 1, 1 (NORMAL)", mode, fk, sync)
	}
	for _, table := range []string{"runs", "nodes", "attempts", "quarantine", "definitions", "action_cache"} {
		var n int
		if err := db.SQL().QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", table, n, err)
		}
	}
	db.Close()

	// Reopening runs no migration twice.
	db, err = OpenState(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if v, _ := db.SchemaVersion(ctx); v != Version {
		t.Fatalf("after reopen version %d", v)
	}
	// A database from a newer foundry is refused, not downgraded or clobbered.
	if _, err := db.SQL().Exec(fmt.Sprintf("PRAGMA user_version = %d", Version+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenState(path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("opening a newer schema: err = %v, want a refusal", err)
	}
}

func TestMigrationsApplyInOrder(t *testing.T) {
	// A failing later migration must leave the earlier ones applied and the version at the
	// last good one, so a fixed binary can continue.
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(append([]string{}, saved...), `CREATE TABLE extra (x INTEGER);`, `THIS IS NOT SQL;`)
	path := filepath.Join(t.TempDir(), "state.db")
	if _, err := OpenState(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("from version %d to %d", len(saved)+1, len(saved)+2)) {
		t.Fatalf("err = %v, want a failure of the last migration", err)
	}
	migrations = saved[:len(saved):len(saved)]
	migrations = append(migrations, `CREATE TABLE extra (x INTEGER);`)
	db, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(context.Background()); v != len(saved)+1 {
		t.Fatalf("version %d, want %d", v, len(saved)+1)
	}
}

func TestRunNodeAttemptLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run, err := db.BeginRun(ctx, dg("plan"), []string{"apply", "-x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StartNodes(ctx, run.ID, []NodeRef{{"a", dg("A")}, {"b", dg("B")}, {"c", dg("C")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.NodeStarted(ctx, run.ID, "a", dg("A")); err != nil {
		t.Fatal(err)
	}
	n, err := db.AttemptStarted(ctx, run.ID, "a", "runc", "foundry-"+run.ID+"-a-1")
	if err != nil || n != 1 {
		t.Fatalf("attempt = %d, %v", n, err)
	}
	if err := db.AttemptFinished(ctx, run.ID, "a", n, OutcomeFailed, "exit 1"); err != nil {
		t.Fatal(err)
	}
	if n, err = db.AttemptStarted(ctx, run.ID, "a", "runc", "foundry-"+run.ID+"-a-2"); err != nil || n != 2 {
		t.Fatalf("second attempt = %d, %v", n, err)
	}
	if err := db.AttemptFinished(ctx, run.ID, "a", n, OutcomeSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	zero, one := 0, 1
	if err := db.NodeFinished(ctx, run.ID, "a", NodeResult{Status: NodeDone, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := db.NodesCached(ctx, run.ID, []NodeRef{{"b", dg("B")}}); err != nil {
		t.Fatal(err)
	}
	if err := db.NodeFinished(ctx, run.ID, "c", NodeResult{Status: NodeFailed, ExitCode: &one, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := db.NodeFinished(ctx, run.ID, "c", NodeResult{Status: NodeRunning}); err == nil {
		t.Fatal("NodeFinished accepted a non-final status")
	}
	if err := db.NodeFinished(ctx, run.ID, "nope", NodeResult{Status: NodeDone}); err == nil {
		t.Fatal("NodeFinished accepted an unknown node")
	}
	// Foreign keys: an attempt of a node the run never recorded is refused.
	if _, err := db.AttemptStarted(ctx, run.ID, "ghost", "runc", "x"); err == nil {
		t.Fatal("AttemptStarted accepted a node that is not in the run")
	}
	if err := db.FinishRun(ctx, run.ID, RunFailed); err != nil {
		t.Fatal(err)
	}

	nodes, err := db.Nodes(ctx, run.ID)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes = %v, %v", nodes, err)
	}
	want := map[string]NodeStatus{"a": NodeDone, "b": NodeCached, "c": NodeFailed}
	for _, n := range nodes {
		if n.Status != want[n.Address] {
			t.Errorf("node %s status %s, want %s", n.Address, n.Status, want[n.Address])
		}
	}
	if nodes[2].ExitCode == nil || *nodes[2].ExitCode != 1 || nodes[2].Error != "boom" {
		t.Errorf("node c = %+v", nodes[2])
	}
	atts, err := db.Attempts(ctx, run.ID, "a")
	if err != nil || len(atts) != 2 || atts[0].Outcome != OutcomeFailed || atts[1].Outcome != OutcomeSucceeded || atts[1].Finished.IsZero() {
		t.Fatalf("attempts = %+v, %v", atts, err)
	}
	runs, err := db.Runs(ctx, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != RunFailed || runs[0].Plan != dg("plan") || runs[0].Args[1] != "-x" || runs[0].Finished.IsZero() {
		t.Fatalf("runs = %+v, %v", runs, err)
	}

	// A later run: LastNodeResult reports the newest outcome per address.
	time.Sleep(2 * time.Millisecond)
	run2, err := db.BeginRun(ctx, dg("plan2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.NodesCached(ctx, run2.ID, []NodeRef{{"a", dg("A")}}); err != nil {
		t.Fatal(err)
	}
	if err := db.StartNodes(ctx, run2.ID, []NodeRef{{"c", dg("C")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	last, found, err := db.LastNodeResult(ctx, "a")
	if err != nil || !found || last.RunID != run2.ID || last.Status != NodeCached {
		t.Fatalf("last result of a = %+v, %v, %v", last, found, err)
	}
	// c is only pending in run2: its last result is still run1's failure.
	last, found, err = db.LastNodeResult(ctx, "c")
	if err != nil || !found || last.RunID != run.ID || last.Status != NodeFailed {
		t.Fatalf("last result of c = %+v, %v, %v", last, found, err)
	}
	if _, found, _ := db.LastNodeResult(ctx, "never"); found {
		t.Fatal("found a result for a node that never ran")
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	// Two handles on one file stand for two processes; each runs goroutines that record
	// nodes and attempts at the same time.
	dbs := make([]*DB, 2)
	for i := range dbs {
		db, err := OpenState(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	const workers, perWorker = 4, 25
	runs := make([]*Run, len(dbs))
	for i, db := range dbs {
		r, err := db.BeginRun(ctx, dg("plan"), nil)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(dbs)*workers)
	for i, db := range dbs {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(db *DB, run string, w int) {
				defer wg.Done()
				for k := 0; k < perWorker; k++ {
					addr := fmt.Sprintf("w%d.n%d", w, k)
					act := dg(addr)
					if err := db.NodeStarted(ctx, run, addr, act); err != nil {
						errs <- err
						return
					}
					n, err := db.AttemptStarted(ctx, run, addr, "local", run+"-"+addr)
					if err != nil {
						errs <- err
						return
					}
					if err := db.AttemptFinished(ctx, run, addr, n, OutcomeSucceeded, ""); err != nil {
						errs <- err
						return
					}
					zero := 0
					if err := db.NodeFinished(ctx, run, addr, NodeResult{Status: NodeDone, ExitCode: &zero}); err != nil {
						errs <- err
						return
					}
				}
			}(db, runs[i].ID, w)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, db := range dbs {
		nodes, err := db.Nodes(ctx, runs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != workers*perWorker {
			t.Fatalf("run %d: %d nodes, want %d", i, len(nodes), workers*perWorker)
		}
		for _, n := range nodes {
			if n.Status != NodeDone {
				t.Fatalf("node %s: %s", n.Address, n.Status)
			}
		}
	}
	// Both runs are alive: nothing is reported as interrupted.
	if atts, err := dbs[0].InterruptedAttempts(ctx); err != nil || len(atts) != 0 {
		t.Fatalf("interrupted = %v, %v", atts, err)
	}
}

// TestMain doubles as the helper process of TestKilledRunIsRecovered.
func TestMain(m *testing.M) {
	if path := os.Getenv("FOUNDRY_STATE_TEST_CRASH_DB"); path != "" {
		crashHelper(path)
		return
	}
	os.Exit(m.Run())
}

// crashHelper starts a run with one running attempt, says so, and waits to be killed.
func crashHelper(path string) {
	ctx := context.Background()
	db, err := OpenState(path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	run, err := db.BeginRun(ctx, dg("plan"), []string{"apply"})
	if err == nil {
		err = db.NodesCached(ctx, run.ID, []NodeRef{{"done.node", dg("D")}})
	}
	if err == nil {
		err = db.NodeStarted(ctx, run.ID, "busy.node", dg("B"))
	}
	if err == nil {
		_, err = db.AttemptStarted(ctx, run.ID, "busy.node", "containerd", "foundry-"+run.ID+"-busy")
	}
	if err == nil {
		_, _, err = db.EffectIntent(ctx, Effect{ID: "eff-publish", RunID: run.ID, Address: "busy.node", Kind: "publish", Destination: "oci-layout:reg"})
	}
	if err == nil {
		err = db.EffectDispatching(ctx, "eff-publish", run.ID)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", run.ID)
	time.Sleep(time.Minute)
	os.Exit(2)
}

func TestKilledRunIsRecovered(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FOUNDRY_STATE_TEST_CRASH_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	line := strings.TrimSpace(string(buf[:n]))
	if !strings.HasPrefix(line, "ready ") {
		t.Fatalf("helper said %q", line)
	}
	runID := strings.TrimPrefix(line, "ready ")

	db, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// While the helper lives, its run is alive and its attempt is not touched.
	if atts, err := db.InterruptedAttempts(ctx); err != nil || len(atts) != 0 {
		t.Fatalf("live run: interrupted = %+v, %v", atts, err)
	}
	if dead, err := db.RecoverRuns(ctx); err != nil || len(dead) != 0 {
		t.Fatalf("live run: recovered = %+v, %v", dead, err)
	}
	if n, err := db.ParkEffects(ctx); err != nil || n != 0 {
		t.Fatalf("live run: parked %d effects, %v", n, err)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// foundry effects parks the dead run's publish as unknown, and leaves the run itself
	// for apply's recovery.
	if n, err := db.ParkEffects(ctx); err != nil || n != 1 {
		t.Fatalf("after kill -9: parked %d effects, %v", n, err)
	}
	if e, err := db.GetEffect(ctx, "eff-publish"); err != nil || e.Status != EffectUnknown || e.Result != "the run's process died after dispatch" {
		t.Fatalf("parked effect = %+v, %v", e, err)
	}
	if r, err := db.GetRun(ctx, runID); err != nil || r.Status != RunRunning {
		t.Fatalf("parking effects touched the run: %+v, %v", r, err)
	}

	atts, err := db.InterruptedAttempts(ctx)
	if err != nil || len(atts) != 1 {
		t.Fatalf("after kill -9: interrupted = %+v, %v", atts, err)
	}
	a := atts[0]
	if a.RunID != runID || a.Address != "busy.node" || a.ContainerID != "foundry-"+runID+"-busy" || a.Executor != "containerd" {
		t.Fatalf("interrupted attempt = %+v", a)
	}
	dead, err := db.RecoverRuns(ctx)
	if err != nil || len(dead) != 1 || dead[0].ID != runID {
		t.Fatalf("recovered = %+v, %v", dead, err)
	}
	r, err := db.GetRun(ctx, runID)
	if err != nil || r.Status != RunInterrupted {
		t.Fatalf("run after recovery = %+v, %v", r, err)
	}
	nodes, _ := db.Nodes(ctx, runID)
	for _, n := range nodes {
		want := map[string]NodeStatus{"done.node": NodeCached, "busy.node": NodeFailed}[n.Address]
		if n.Status != want {
			t.Errorf("node %s: %s, want %s", n.Address, n.Status, want)
		}
	}
	// The effect it dispatched may have happened: it is parked, not retried.
	if e, err := db.GetEffect(ctx, "eff-publish"); err != nil || e.Status != EffectUnknown {
		t.Fatalf("effect after kill -9 = %+v, %v", e, err)
	}
	if err := db.EffectDispatching(ctx, "eff-publish", "r-new"); err == nil {
		t.Fatal("an unknown effect was dispatched again")
	}
	// The engine cleans the container prefix up, then closes the attempt; it is not listed again.
	if err := db.AttemptFinished(ctx, a.RunID, a.Address, a.N, OutcomeInterrupted, "cleaned up"); err != nil {
		t.Fatal(err)
	}
	if atts, err := db.InterruptedAttempts(ctx); err != nil || len(atts) != 0 {
		t.Fatalf("after cleanup: interrupted = %+v, %v", atts, err)
	}
	if dead, err := db.RecoverRuns(ctx); err != nil || len(dead) != 0 {
		t.Fatalf("second recovery = %+v, %v", dead, err)
	}
}

func TestQuarantine(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	a, b := dg("a"), dg("b")
	if err := db.QuarantineAdd(ctx, a, "CVE-2026-0001"); err != nil {
		t.Fatal(err)
	}
	if err := db.QuarantineAdd(ctx, "sha256:nothex", "x"); err == nil {
		t.Fatal("quarantined a malformed digest")
	}
	if err := db.QuarantineAdd(ctx, b, " "); err == nil {
		t.Fatal("quarantined without a reason")
	}
	if q, why, err := db.IsQuarantined(ctx, a); err != nil || !q || why != "CVE-2026-0001" {
		t.Fatalf("IsQuarantined(a) = %v %q %v", q, why, err)
	}
	if q, _, _ := db.IsQuarantined(ctx, b); q {
		t.Fatal("b is quarantined")
	}
	among, err := db.QuarantinedAmong(ctx, []digest.Digest{a, b})
	if err != nil || len(among) != 1 || among[a] == "" {
		t.Fatalf("among = %v, %v", among, err)
	}
	list, err := db.QuarantineList(ctx)
	if err != nil || len(list) != 1 || list[0].Digest != a || list[0].Added.IsZero() {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if ok, err := db.QuarantineRemove(ctx, a); err != nil || !ok {
		t.Fatalf("remove = %v, %v", ok, err)
	}
	if ok, _ := db.QuarantineRemove(ctx, a); ok {
		t.Fatal("removed twice")
	}
	if q, _, _ := db.IsQuarantined(ctx, a); q {
		t.Fatal("still quarantined after removal")
	}
}

func TestDefinitions(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	old := []byte(`{"argv":["go","build","-o","/out/x"],"inputs":{"/src":{"digest":"sha256:aa"}},"limits":{"memory":1024}}`)
	cur := []byte(`{"argv":["go","build","-trimpath","/out/x"],"inputs":{"/src":{"digest":"sha256:bb"}},"limits":{"memory":2048}}`)
	if err := db.RecordDefinition(ctx, "recipe.x.step.build", digest.FromBytes(old), old); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordDefinition(ctx, "recipe.x.step.build", dg("bad"), []byte(`[1]`)); err == nil {
		t.Fatal("recorded a definition that is not an object")
	}
	def, found, err := db.LastDefinition(ctx, "recipe.x.step.build")
	if err != nil || !found || string(def.JSON) != string(old) || def.Action != digest.FromBytes(old) {
		t.Fatalf("last definition = %+v, %v, %v", def, found, err)
	}
	if _, found, err := db.LastDefinition(ctx, "recipe.never.ran"); found || err != nil {
		t.Fatalf("LastDefinition(never ran) found=%v err=%v", found, err)
	}
	if err := db.RecordDefinition(ctx, "recipe.x.step.build", digest.FromBytes(cur), cur); err != nil {
		t.Fatal(err)
	}
	if def, _, _ := db.LastDefinition(ctx, "recipe.x.step.build"); string(def.JSON) != string(cur) {
		t.Fatalf("definition not replaced: %s", def.JSON)
	}
}

func TestEffectsOutbox(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run, err := db.BeginRun(ctx, dg("plan"), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := EffectID("scores", "rev1", "capability.int-sort", "publish", "localhost:5000/scores")
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := EffectID("scores", "rev1", "capability.int-sort", "publish", "localhost:5000/other")
	if again, _ := EffectID("scores", "rev1", "capability.int-sort", "publish", "localhost:5000/scores"); again != id || id == id2 {
		t.Fatalf("effect IDs are not deterministic and distinct: %s %s %s", id, again, id2)
	}
	e := Effect{ID: id, RunID: run.ID, Address: "capability.int-sort", Kind: "publish", Destination: "localhost:5000/scores"}
	got, created, err := db.EffectIntent(ctx, e)
	if err != nil || !created || got.Status != EffectIntended {
		t.Fatalf("intent = %+v, %v, %v", got, created, err)
	}
	if err := db.EffectFinished(ctx, id, EffectSucceeded, "x"); err == nil {
		t.Fatal("finished an effect that was never dispatched")
	}
	if err := db.EffectDispatching(ctx, id, run.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.EffectDispatching(ctx, id, run.ID); err == nil {
		t.Fatal("dispatched twice")
	}
	if err := db.EffectFinished(ctx, id, EffectFailed, "registry said 503"); err != nil {
		t.Fatal(err)
	}
	// A known failure may be retried.
	if err := db.EffectDispatching(ctx, id, run.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.EffectFinished(ctx, id, EffectSucceeded, "sha256:abc"); err != nil {
		t.Fatal(err)
	}
	// A rerun records the same intent and learns it already happened.
	got, created, err = db.EffectIntent(ctx, e)
	if err != nil || created || got.Status != EffectSucceeded || got.Result != "sha256:abc" {
		t.Fatalf("second intent = %+v, %v, %v", got, created, err)
	}
	if err := db.EffectDispatching(ctx, id, run.ID); err == nil {
		t.Fatal("a succeeded effect was dispatched again")
	}
	if list, err := db.Effects(ctx, EffectSucceeded); err != nil || len(list) != 1 {
		t.Fatalf("effects = %+v, %v", list, err)
	}
	if err := db.ResolveEffect(ctx, id, EffectFailed, ""); err == nil {
		t.Fatal("resolved an effect that is not unknown")
	}
}

// An operator decides an unknown effect once: the outcome, who, when and why are kept,
// also after the engine performs a failed one again; an effect that is not unknown is
// refused.
func TestDecideEffect(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run, err := db.BeginRun(ctx, dg("plan"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := Effect{ID: "eff-1", RunID: run.ID, Address: "capability.c", Kind: "publish", Destination: "oci-layout:reg"}
	if _, _, err := db.EffectIntent(ctx, e); err != nil {
		t.Fatal(err)
	}
	dec := EffectDecision{Status: EffectFailed, By: "ada@build1", Reason: "the registry has no such manifest"}
	if err := db.DecideEffect(ctx, "eff-1", dec, ""); !errors.Is(err, ErrNotUnknown) {
		t.Fatalf("deciding an intended effect: %v, want ErrNotUnknown", err)
	}
	if err := db.DecideEffect(ctx, "eff-none", dec, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deciding a missing effect: %v, want ErrNotFound", err)
	}
	db.SQL().Exec(`UPDATE effects SET status = 'unknown', result = 'the run''s process died after dispatch' WHERE id = 'eff-1'`)
	if err := db.DecideEffect(ctx, "eff-1", EffectDecision{Status: EffectUnknown, By: "x", Reason: "y"}, ""); err == nil {
		t.Fatal("decided an effect unknown")
	}
	if err := db.DecideEffect(ctx, "eff-1", EffectDecision{Status: EffectFailed, By: "x"}, ""); err == nil {
		t.Fatal("decided without a reason")
	}
	if err := db.DecideEffect(ctx, "eff-1", dec, "decided failed"); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetEffect(ctx, "eff-1")
	if err != nil || got.Status != EffectFailed || got.Result != "decided failed" || got.Decision == nil ||
		got.Decision.Status != EffectFailed || got.Decision.By != "ada@build1" || got.Decision.Reason != dec.Reason || got.Decision.At.IsZero() {
		t.Fatalf("decided effect = %+v (%+v), %v", got, got.Decision, err)
	}
	if err := db.DecideEffect(ctx, "eff-1", dec, ""); !errors.Is(err, ErrNotUnknown) {
		t.Fatalf("deciding twice: %v, want ErrNotUnknown", err)
	}
	// A failed effect is performed again; the decision stays as its history.
	if err := db.EffectDispatching(ctx, "eff-1", run.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.EffectFinished(ctx, "eff-1", EffectSucceeded, "oci-layout:reg@sha256:abc"); err != nil {
		t.Fatal(err)
	}
	if list, err := db.Effects(ctx, ""); err != nil || len(list) != 1 || list[0].Status != EffectSucceeded || list[0].Decision == nil || list[0].Decision.By != "ada@build1" {
		t.Fatalf("effects = %+v, %v", list, err)
	}
}

// A run's capability events come back in the order recorded, with what each says; they go
// when the run's record is pruned.
func TestCapabilityEvents(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run, err := db.BeginRun(ctx, dg("plan"), nil)
	if err != nil {
		t.Fatal(err)
	}
	yes, three := true, 3
	for _, e := range []CapabilityEvent{
		{RunID: run.ID, Type: "suite_evaluated", Capability: "capability.c", Recipe: "recipe.r", Suite: "dev", Passed: &yes, Cases: &three, CasesPassed: &three, Message: "dev suite: 3 of 3 cases passed"},
		{RunID: run.ID, Type: "capability_admitted", Capability: "capability.c", Recipe: "recipe.r", Ref: "oci-layout:reg@sha256:abc", Message: "recipe.r admitted as oci-layout:reg@sha256:abc"},
	} {
		if err := db.RecordCapabilityEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordCapabilityEvent(ctx, CapabilityEvent{RunID: run.ID, Type: "capability_failed"}); err == nil {
		t.Error("recorded an event without a capability")
	}
	got, err := db.CapabilityEvents(ctx, run.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("events = %+v, %v", got, err)
	}
	if e := got[0]; e.Seq != 1 || e.Type != "suite_evaluated" || e.Recipe != "recipe.r" || e.Suite != "dev" || e.Passed == nil || !*e.Passed ||
		e.Cases == nil || *e.Cases != 3 || e.CasesPassed == nil || *e.CasesPassed != 3 || e.Time.IsZero() {
		t.Errorf("first event = %+v", e)
	}
	if e := got[1]; e.Seq != 2 || e.Ref != "oci-layout:reg@sha256:abc" || e.Passed != nil || e.Cases != nil {
		t.Errorf("second event = %+v", e)
	}
	db.FinishRun(ctx, run.ID, RunSucceeded)
	if _, err := db.BeginRun(ctx, dg("plan"), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneRuns(ctx, 1, false); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if got, err := db.CapabilityEvents(ctx, run.ID); err != nil || len(got) != 0 {
		t.Errorf("events of a pruned run = %+v, %v", got, err)
	}
}

func TestMigrationKeepsData(t *testing.T) {
	ctx := context.Background()
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	path := filepath.Join(t.TempDir(), "state.db")
	// A database written by a foundry that knew only the first schema version…
	migrations = saved[:1]
	db, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.BeginRun(ctx, dg("plan"), []string{"apply"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QuarantineAdd(ctx, dg("bad"), "recalled"); err != nil {
		t.Fatal(err)
	}
	if err := db.StartNodes(ctx, run.ID, nil, []NodeRef{{"step.a", dg("A")}}, nil); err != nil {
		t.Fatal(err)
	}
	db.FinishRun(ctx, run.ID, RunSucceeded)
	db.Close()
	// …is migrated in order by this one, keeping its rows.
	migrations = saved
	db, err = OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(ctx); v != len(saved) {
		t.Fatalf("version %d, want %d", v, len(saved))
	}
	if r, err := db.GetRun(ctx, run.ID); err != nil || r.Status != RunSucceeded {
		t.Fatalf("run after migration = %+v, %v", r, err)
	}
	if q, _, _ := db.IsQuarantined(ctx, dg("bad")); !q {
		t.Fatal("quarantine lost in migration")
	}
	if _, err := db.Effects(ctx, ""); err != nil {
		t.Fatalf("effects table missing after migration: %v", err)
	}
	if n, found, err := db.LastNodeResult(ctx, "step.a"); err != nil || !found || n.Action != dg("A") || n.Status != NodeCached {
		t.Fatalf("node result after migration = %+v, %v, %v", n, found, err)
	}
}

// LastNodeResult must not read every node row: the table holds a row per node per run.
// The plan must walk runs newest first and probe the nodes primary key.
func TestLastNodeResultProbesRunByRun(t *testing.T) {
	db := openTest(t)
	rows, err := db.SQL().Query("EXPLAIN QUERY PLAN "+lastNodeResultQuery, "step.a")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "SCAN r USING INDEX runs_by_started") || !strings.Contains(got, "SEARCH n USING INDEX sqlite_autoindex_nodes_1 (run_id=? AND address=?)") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("query plan %q does not probe nodes run by run", got)
	}
}

func TestPruneRuns(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	var ids []string
	for i := range 5 {
		r, err := db.BeginRun(ctx, dg("plan"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		if err := db.NodesCached(ctx, r.ID, []NodeRef{{"n", dg("A")}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, _, err := db.EffectIntent(ctx, Effect{ID: "e", RunID: r.ID, Kind: "publish"}); err != nil {
				t.Fatal(err)
			}
		}
		if i < 4 {
			db.FinishRun(ctx, r.ID, RunSucceeded)
		}
		time.Sleep(time.Millisecond)
	}
	// Keep 1: run 4 is newest (and running), run 0 has an effect; runs 1–3 go.
	if n, err := db.PruneRuns(ctx, 1, true); err != nil || n != 3 {
		t.Fatalf("dry run: would prune %d, %v; want 3", n, err)
	}
	if runs, _ := db.Runs(ctx, 0); len(runs) != 5 {
		t.Fatalf("a dry run pruned: %d runs left", len(runs))
	}
	n, err := db.PruneRuns(ctx, 1, false)
	if err != nil || n != 3 {
		t.Fatalf("pruned %d, %v; want 3", n, err)
	}
	runs, _ := db.Runs(ctx, 0)
	if len(runs) != 2 || runs[0].ID != ids[4] || runs[1].ID != ids[0] {
		t.Fatalf("runs left: %+v", runs)
	}
	if nodes, _ := db.Nodes(ctx, ids[2]); len(nodes) != 0 {
		t.Fatalf("nodes of a pruned run survive: %+v", nodes)
	}
}

// StartNodes records a run's pending nodes, its cache hits and their definitions at once;
// a bad definition writes nothing.
func TestStartNodesInOneTransaction(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	run, err := db.BeginRun(ctx, dg("plan"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := []Definition{{Address: "b", Action: dg("B"), JSON: []byte(`{"argv":["b"]}`)}, {Address: "c", Action: dg("C"), JSON: []byte(`[1]`)}}
	if err := db.StartNodes(ctx, run.ID, []NodeRef{{"a", dg("A")}}, []NodeRef{{"b", dg("B")}, {"c", dg("C")}}, bad); err == nil {
		t.Fatal("StartNodes accepted a definition that is not a JSON object")
	}
	if nodes, _ := db.Nodes(ctx, run.ID); len(nodes) != 0 {
		t.Fatalf("a refused StartNodes recorded %d nodes", len(nodes))
	}
	defs := []Definition{{Address: "b", Action: dg("B"), JSON: []byte(`{"argv":["b"]}`)}, {Address: "c", Action: dg("C"), JSON: []byte(`{"argv":["c"]}`)}}
	if err := db.StartNodes(ctx, run.ID, []NodeRef{{"a", dg("A")}}, []NodeRef{{"b", dg("B")}, {"c", dg("C")}}, defs); err != nil {
		t.Fatal(err)
	}
	nodes, err := db.Nodes(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]NodeStatus{}
	for _, n := range nodes {
		got[n.Address] = n.Status
	}
	want := map[string]NodeStatus{"a": NodePending, "b": NodeCached, "c": NodeCached}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	for _, d := range defs {
		def, found, err := db.LastDefinition(ctx, d.Address)
		if err != nil || !found || def.Action != d.Action || string(def.JSON) != string(d.JSON) {
			t.Fatalf("definition of %s: %+v %v %v", d.Address, def, found, err)
		}
	}
}

// A definition whose action is unchanged is left as it is (a no-op apply of a large graph
// must not rewrite them all); one whose action changed is replaced.
func TestStartNodesRewritesOnlyChangedDefinitions(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	first := []Definition{{Address: "a", Action: dg("A"), JSON: []byte(`{"argv":["a"]}`)}, {Address: "b", Action: dg("B"), JSON: []byte(`{"argv":["b"]}`)}}
	for i, defs := range [][]Definition{first, {first[0], {Address: "b", Action: dg("B2"), JSON: []byte(`{"argv":["b2"]}`)}}} {
		run, err := db.BeginRun(ctx, dg("plan"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.StartNodes(ctx, run.ID, nil, []NodeRef{{"a", defs[0].Action}, {"b", defs[1].Action}}, defs); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond) // so that a rewrite would show in Updated
	}
	a, _, _ := db.LastDefinition(ctx, "a")
	b, _, _ := db.LastDefinition(ctx, "b")
	if !a.Updated.Before(b.Updated) {
		t.Errorf("the unchanged definition of a was rewritten (updated %v, b's %v)", a.Updated, b.Updated)
	}
	if b.Action != dg("B2") || string(b.JSON) != `{"argv":["b2"]}` {
		t.Errorf("the changed definition of b was not replaced: %+v", b)
	}
}

// Closing keeps the WAL file (commands do not delete and recreate it every time) but
// checkpoints it and empties it: state.db copied alone afterwards holds everything
// committed, and no stale frames wait to be read back.
func TestCloseKeepsWALButCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	db, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.BeginRun(ctx, dg("plan"), []string{"apply"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(ctx, run.ID, RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("the WAL was removed at close: %v", err)
	} else if fi.Size() != 0 {
		t.Fatalf("the WAL kept %d bytes of checkpointed frames after close", fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(alone, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cp, err := OpenState(alone)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if r, err := cp.GetRun(ctx, run.ID); err != nil || r.Status != RunSucceeded {
		t.Fatalf("a copy of state.db alone after close lacks the run: %+v, %v", r, err)
	}
	// And the original reopens with its kept WAL.
	db, err = OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if r, err := db.GetRun(ctx, run.ID); err != nil || r.Status != RunSucceeded {
		t.Fatalf("reopened: %+v, %v", r, err)
	}
}
