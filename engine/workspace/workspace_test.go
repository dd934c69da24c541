package workspace

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
)

func TestLockNestsInProcessAndExcludesOthers(t *testing.T) {
	dir := t.TempDir()
	ws, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	other, err := Open(dir) // another process, as far as flock is concerned
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	outer, err := ws.Lock()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ws.Lock()
	if err != nil {
		t.Fatalf("a nested Lock in the holding workspace failed: %v", err)
	}
	refused := func(when string) {
		t.Helper()
		if _, err := other.Lock(); err == nil || !strings.Contains(err.Error(), "another foundry apply is running") {
			t.Fatalf("%s: another holder's Lock = %v, want refused", when, err)
		}
	}
	refused("both held")
	inner()
	inner() // unlocking twice counts once
	refused("outer still held")
	outer()
	unlock, err := other.Lock()
	if err != nil {
		t.Fatalf("after the last unlock: %v", err)
	}
	unlock()
}

// Under a held lock, hits found by planning are reused by apply without touching the store
// again; without the lock every lookup checks the store.
func TestLookupReusesHitsOnlyWhileLocked(t *testing.T) {
	ctx := context.Background()
	ws, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	out, err := ws.Store.PutBytes([]byte("output"))
	if err != nil {
		t.Fatal(err)
	}
	action := digest.FromBytes([]byte("action"))
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if err := ws.Cache.Put(ctx, &cache.Result{Action: action, Outputs: []cache.Output{{Path: "/out/o", Kind: cache.File, Digest: out}},
		Started: start, Finished: start, Executor: "runc", Isolation: "container"}); err != nil {
		t.Fatal(err)
	}
	missing := digest.FromBytes([]byte("never run"))
	hit := func(a digest.Digest) bool {
		t.Helper()
		m, err := ws.LookupMany(ctx, []digest.Digest{a})
		if err != nil {
			t.Fatal(err)
		}
		return m[a].Hit
	}

	unlock, err := ws.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if !hit(action) || hit(missing) {
		t.Fatal("first lookup under the lock: want a hit and a miss")
	}
	// Nothing but a process ignoring the lock removes a blob while it is held; doing it
	// anyway shows the second lookup answered from the first.
	if err := os.Remove(ws.Store.Path(out)); err != nil {
		t.Fatal(err)
	}
	if !hit(action) {
		t.Fatal("second lookup under the same lock checked the store again")
	}
	unlock()
	if hit(action) {
		t.Fatal("after unlocking, a lookup still used hits found under the lock")
	}
}
