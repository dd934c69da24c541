package outbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/state"
)

// fileDest is a real destination for the outbox's state machine: the effect writes a file
// named by its revision into a directory, and is found by reading it back. It counts what
// it performs, so a test sees a second dispatch.
type fileDest struct {
	dir       string
	performed int
	told      []string
	// crash, when set, is where the next Do dies (a fault point, or inside Perform once
	// the file is written): the panic stands for the kill -9, the run for a dead process.
	crash string
	dead  string // the run that died, once crashed
}

// died is what a "killed" Do panics with.
type died struct{}

func (f *fileDest) path() string { return filepath.Join(f.dir, "effect") }

func (f *fileDest) effect() *Effect {
	e := &Effect{Project: "shop", Revision: "sha256:1", Address: "product.app", Kind: "deliver", Destination: "dir:" + f.dir,
		Perform: func(context.Context) (string, error) {
			f.performed++
			if err := os.WriteFile(f.path(), []byte("rev 1"), 0o644); err != nil {
				return "", err
			}
			if f.crash == FaultBeforeRecord {
				panic(died{})
			}
			return "dir:" + f.path(), nil
		},
		Find: func(context.Context) (string, bool, error) {
			b, err := os.ReadFile(f.path())
			if errors.Is(err, os.ErrNotExist) {
				return "it is not at " + f.dir + ", so it is performed again", false, nil
			}
			if err != nil {
				return "", false, err
			}
			return "dir:" + f.path() + " (" + string(b) + ")", true, nil
		},
		Reconciled: func(msg string) { f.told = append(f.told, msg) },
	}
	return e
}

// do runs one Do of f's effect by run, reporting whether it "died" at f.crash.
func (f *fileDest) do(t *testing.T, db *state.DB, run string) (result string, err error, crashed bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(died); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	o := &Outbox{State: db, RunID: run, Fault: func(point, node string) {
		if point == f.crash && node == "product.app" {
			panic(died{})
		}
	}}
	result, err = o.Do(context.Background(), f.effect())
	return result, err, false
}

func openState(t *testing.T) *state.DB {
	t.Helper()
	db, err := state.OpenState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// begin records a live run of db and returns its ID.
func begin(t *testing.T, db *state.DB) string {
	t.Helper()
	r, err := db.BeginRun(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func (f *fileDest) row(t *testing.T, db *state.DB) state.Effect {
	t.Helper()
	id, err := f.effect().id()
	if err != nil {
		t.Fatal(err)
	}
	e, err := db.GetEffect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// crashed makes f's next Do die at point, in a run of its own handle on db's database
// (another process's), which is then closed: its run lock is released, so the run is dead.
// What it dispatched is then parked, as a recovering apply does.
func (f *fileDest) crashed(t *testing.T, db *state.DB, point string) {
	t.Helper()
	other, err := state.OpenState(db.Path())
	if err != nil {
		t.Fatal(err)
	}
	f.crash, f.dead = point, begin(t, other)
	_, err, crashed := f.do(t, other, f.dead)
	other.Close()
	if !crashed {
		t.Fatalf("Do did not reach %s: %v", point, err)
	}
	f.crash = ""
	if _, err := db.ParkEffects(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// intended → dispatched → succeeded, once; a later run finds it and performs nothing.
func TestDoPerformsOnce(t *testing.T) {
	db := openState(t)
	f := &fileDest{dir: t.TempDir()}
	r1 := begin(t, db)
	res, err, _ := f.do(t, db, r1)
	if err != nil || res != "dir:"+f.path() || f.performed != 1 {
		t.Fatalf("Do = %q, %v; performed %d", res, err, f.performed)
	}
	if e := f.row(t, db); e.Status != state.EffectSucceeded || e.Result != res || e.RunID != r1 {
		t.Fatalf("after Do: %+v", e)
	}
	res, err, _ = f.do(t, db, begin(t, db))
	if err != nil || !strings.HasPrefix(res, "dir:"+f.path()) || f.performed != 1 {
		t.Fatalf("Do again = %q, %v; performed %d", res, err, f.performed)
	}
	// A row is an index: what is no longer at the destination is performed again.
	os.Remove(f.path())
	if _, err, _ = f.do(t, db, begin(t, db)); err != nil || f.performed != 2 {
		t.Fatalf("Do after the destination lost it: %v; performed %d", err, f.performed)
	}
}

// Each kill point and the next run: performed exactly once in all, and the row succeeded.
func TestDoAfterACrash(t *testing.T) {
	for _, c := range []struct {
		point      string
		reconciled string // what the next run says, "" when it has nothing to reconcile
	}{
		{FaultBeforeDispatch, ""},
		{FaultAfterDispatch, "it is not at"},
		{FaultBeforeRecord, "so it is not performed again"},
	} {
		t.Run(c.point, func(t *testing.T) {
			db := openState(t)
			f := &fileDest{dir: t.TempDir()}
			f.crashed(t, db, c.point)
			before := f.row(t, db)
			if want := map[string]state.EffectStatus{FaultBeforeDispatch: state.EffectIntended}[c.point]; want == "" && before.Status != state.EffectUnknown ||
				want != "" && before.Status != want {
				t.Fatalf("after the crash at %s: %+v", c.point, before)
			}
			performedBefore := f.performed
			r2 := begin(t, db)
			res, err, _ := f.do(t, db, r2)
			if err != nil || !strings.HasPrefix(res, "dir:"+f.path()) {
				t.Fatalf("Do after the crash = %q, %v", res, err)
			}
			if f.performed != 1 {
				t.Errorf("performed %d times in all (%d before the crash), want once", f.performed, performedBefore)
			}
			e := f.row(t, db)
			if e.Status != state.EffectSucceeded {
				t.Errorf("after the next run: %+v", e)
			}
			if got := strings.Join(f.told, "\n"); c.reconciled == "" && got != "" || !strings.Contains(got, c.reconciled) {
				t.Errorf("reconciled: %q, want %q", got, c.reconciled)
			}
			if c.point == FaultBeforeRecord && !strings.Contains(e.Result, "reconciled by run "+r2+": run "+f.dead+" died after dispatching it, and it is at the destination") {
				t.Errorf("the reconciled row does not say how: %q", e.Result)
			}
		})
	}
}

// An unknown effect whose destination cannot tell stays unknown and is refused, with the
// command that resolves it, and nothing is dispatched; once the destination answers, it is
// reconciled without a second dispatch.
func TestUnknownThatCannotBeToldIsRefused(t *testing.T) {
	db := openState(t)
	f := &fileDest{dir: filepath.Join(t.TempDir(), "dest")}
	os.Mkdir(f.dir, 0o755)
	f.crashed(t, db, FaultBeforeRecord)
	id := f.row(t, db).ID

	// The destination is no longer a directory (the share it was on is gone, something else
	// mounted there): reading it fails, which says neither "there" nor "not there".
	aside := f.dir + ".aside"
	if err := os.Rename(f.dir, aside); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f.dir, []byte("not a directory"), 0o644)
	for range 2 {
		_, err, _ := f.do(t, db, begin(t, db))
		var ue *UnknownError
		if !errors.As(err, &ue) || ue.ID != id || ue.Run != f.dead || ue.Cause == nil {
			t.Fatalf("Do of an unknown effect its destination cannot tell: %v", err)
		}
		for _, want := range []string{"effect " + id + ") has an unknown outcome: run " + f.dead + " died after dispatching it",
			"its destination cannot tell whether it happened", "not a directory",
			"'foundry effects resolve " + id + " -status succeeded|failed -reason TEXT'"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q:\n%v", want, err)
			}
		}
		if e := f.row(t, db); e.Status != state.EffectUnknown || e.RunID != f.dead || f.performed != 1 {
			t.Fatalf("a refused unknown effect moved: %+v, performed %d", e, f.performed)
		}
	}
	if len(f.told) != 0 {
		t.Errorf("a refusal was told as a reconciliation: %q", f.told)
	}

	// The destination answers again: reconciled, not performed.
	os.Remove(f.dir)
	os.Rename(aside, f.dir)
	if _, err, _ := f.do(t, db, begin(t, db)); err != nil || f.performed != 1 || f.row(t, db).Status != state.EffectSucceeded {
		t.Fatalf("Do once the destination answers: %v, performed %d, %+v", err, f.performed, f.row(t, db))
	}
}

// An effect without a Find is never reconciled: its unknown outcome waits for a decision.
func TestUnknownWithoutFindWaitsForADecision(t *testing.T) {
	db := openState(t)
	f := &fileDest{dir: t.TempDir()}
	f.crashed(t, db, FaultAfterDispatch)
	e := f.effect()
	e.Find = nil
	o := &Outbox{State: db, RunID: begin(t, db)}
	_, err := o.Do(context.Background(), e)
	var ue *UnknownError
	if !errors.As(err, &ue) || ue.Cause != nil || !strings.Contains(err.Error(), "foundry effects resolve") || f.performed != 0 {
		t.Fatalf("Do without Find: %v, performed %d", err, f.performed)
	}
	if row := f.row(t, db); row.Status != state.EffectUnknown {
		t.Fatalf("after the refusal: %+v", row)
	}
}

// The operator's decision lets the effect proceed: failed, it is dispatched again (once);
// succeeded, it is done, and the destination is still asked before it is believed.
func TestOperatorDecision(t *testing.T) {
	decide := func(t *testing.T, db *state.DB, f *fileDest, status state.EffectStatus) {
		t.Helper()
		dec := state.EffectDecision{Status: status, By: "ops@host", At: time.Now(), Reason: "looked at the share"}
		if err := db.DecideEffect(context.Background(), f.row(t, db).ID, dec, ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("failed", func(t *testing.T) {
		db := openState(t)
		f := &fileDest{dir: t.TempDir()}
		f.crashed(t, db, FaultAfterDispatch)
		decide(t, db, f, state.EffectFailed)
		r2 := begin(t, db)
		if _, err, _ := f.do(t, db, r2); err != nil || f.performed != 1 {
			t.Fatalf("Do after a failed decision: %v, performed %d", err, f.performed)
		}
		if e := f.row(t, db); e.Status != state.EffectSucceeded || e.RunID != r2 || e.Decision == nil || e.Decision.Status != state.EffectFailed {
			t.Fatalf("after the retry: %+v", e)
		}
		if len(f.told) != 0 {
			t.Errorf("a decided effect was reconciled again: %q", f.told)
		}
	})
	t.Run("succeeded", func(t *testing.T) {
		db := openState(t)
		f := &fileDest{dir: t.TempDir()}
		f.crashed(t, db, FaultBeforeRecord)
		decide(t, db, f, state.EffectSucceeded)
		if res, err, _ := f.do(t, db, begin(t, db)); err != nil || f.performed != 1 || !strings.HasPrefix(res, "dir:"+f.path()) {
			t.Fatalf("Do after a succeeded decision = %q, %v, performed %d", res, err, f.performed)
		}
		// A destination that cannot be read is an error, never a dispatch or a belief.
		os.Remove(f.path())
		os.Mkdir(f.path(), 0o755) // reading a directory as the effect's file fails
		_, err, _ := f.do(t, db, begin(t, db))
		if err == nil || !strings.Contains(err.Error(), "is recorded as succeeded, but its destination cannot be read") || f.performed != 1 {
			t.Fatalf("Do of a succeeded effect whose destination cannot be read: %v, performed %d", err, f.performed)
		}
	})
}

// Reconcile settles only an unknown effect, by its Find, and never performs or records one.
func TestReconcile(t *testing.T) {
	db := openState(t)
	f := &fileDest{dir: t.TempDir()}
	o := &Outbox{State: db, RunID: begin(t, db)}
	if found, err := o.Reconcile(context.Background(), f.effect()); err != nil || found {
		t.Fatalf("Reconcile of an effect never recorded: %v, %v", found, err)
	}
	if all, _ := db.Effects(context.Background(), ""); len(all) != 0 {
		t.Fatalf("Reconcile recorded an effect: %+v", all)
	}
	f.crashed(t, db, FaultBeforeRecord)
	found, err := o.Reconcile(context.Background(), f.effect())
	if err != nil || !found || f.performed != 1 || f.row(t, db).Status != state.EffectSucceeded {
		t.Fatalf("Reconcile of an unknown effect that is there: %v, %v, performed %d, %+v", found, err, f.performed, f.row(t, db))
	}
	if found, err := o.Reconcile(context.Background(), f.effect()); err != nil || found || len(f.told) != 1 {
		t.Fatalf("Reconcile of a succeeded effect: %v, %v; told %q", found, err, f.told)
	}

	g := &fileDest{dir: t.TempDir()}
	g.crashed(t, db, FaultAfterDispatch)
	if found, err := o.Reconcile(context.Background(), g.effect()); err != nil || found || g.performed != 0 {
		t.Fatalf("Reconcile of an unknown effect that is not there: %v, %v, performed %d", found, err, g.performed)
	}
	if e := g.row(t, db); e.Status != state.EffectFailed || !strings.Contains(e.Result, "so it is performed again") {
		t.Fatalf("after Reconcile: %+v", e)
	}
}
