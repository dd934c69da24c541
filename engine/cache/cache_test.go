package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/store"
)

type fixture struct {
	db    *state.DB
	store *store.Store
	cache *Cache
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), ".foundry")
	db, err := state.OpenState(filepath.Join(dir, "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	s, err := store.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	return &fixture{db: db, store: s, cache: New(db, s)}
}

func (f *fixture) blob(tb testing.TB, content string) digest.Digest {
	tb.Helper()
	d, err := f.store.PutBytes([]byte(content))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func (f *fixture) tree(tb testing.TB, files map[string]string) digest.Digest {
	tb.Helper()
	dir := tb.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	d, _, err := f.store.PutDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func (f *fixture) result(tb testing.TB, name string) *Result {
	tb.Helper()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return &Result{
		Action:     digest.FromBytes([]byte("action " + name)),
		Definition: f.blob(tb, `{"argv":["`+name+`"]}`),
		Outputs: []Output{
			{Path: "/out/bin", Kind: File, Digest: f.blob(tb, "binary "+name)},
			{Path: "/out/lib", Kind: Tree, Digest: f.tree(tb, map[string]string{"a.so": "lib a " + name, "sub/b.so": "lib b " + name})},
		},
		Stdout:    Log{Digest: f.blob(tb, "stdout "+name), Size: 7},
		Stderr:    Log{Digest: f.blob(tb, ""), Truncated: true, Size: 0},
		Started:   start,
		Finished:  start.Add(1500 * time.Millisecond),
		Executor:  "runc",
		Isolation: "container",
	}
}

func TestPutLookupRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.result(t, "x")
	if err := f.cache.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, found, err := f.cache.Lookup(ctx, r.Action)
	if err != nil || !found {
		t.Fatalf("Lookup = %v, %v", found, err)
	}
	if got.Version != RecordVersion || got.Duration != 1500*time.Millisecond || got.Executor != "runc" || len(got.Outputs) != 2 ||
		got.Outputs[1].Kind != Tree || !got.Stderr.Truncated || got.Definition != r.Definition || !got.Finished.Equal(r.Finished) {
		t.Fatalf("record = %+v", got)
	}
	other := digest.FromBytes([]byte("never ran"))
	if rec, found, err := f.cache.Lookup(ctx, other); rec != nil || found || err != nil {
		t.Fatalf("Lookup(absent) = %v, %v, %v", rec, found, err)
	}
	// Attestations are added later, and not twice.
	att := f.blob(t, "dsse envelope")
	for range 2 {
		if err := f.cache.AddAttestation(ctx, r.Action, att); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _ := f.cache.Lookup(ctx, r.Action); len(got.Attestations) != 1 || got.Attestations[0] != att {
		t.Fatalf("attestations = %v", got.Attestations)
	}
	if err := f.cache.AddAttestation(ctx, r.Action, digest.FromBytes([]byte("not stored"))); err == nil {
		t.Fatal("added an attestation that is not in the store")
	}
	if ok, err := f.cache.Evict(ctx, r.Action); !ok || err != nil {
		t.Fatalf("Evict = %v, %v", ok, err)
	}
	if _, found, _ := f.cache.Lookup(ctx, r.Action); found {
		t.Fatal("hit after eviction")
	}
}

func TestPutRefusesFailures(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for name, spoil := range map[string]func(*Result){
		"exit 1":    func(r *Result) { r.ExitCode = 1 },
		"exit -1":   func(r *Result) { r.ExitCode = -1 },
		"timed out": func(r *Result) { r.TimedOut = true },
		"oom":       func(r *Result) { r.OOMKilled = true },
		"signal":    func(r *Result) { r.Signal = "SIGKILL" },
	} {
		t.Run(name, func(t *testing.T) {
			r := f.result(t, name)
			spoil(r)
			err := f.cache.Put(ctx, r)
			if !errors.Is(err, ErrNotSuccess) {
				t.Fatalf("Put(%s) err = %v, want ErrNotSuccess", name, err)
			}
			if err := f.cache.PutMany(ctx, []*Result{f.result(t, name+" ok"), r}); !errors.Is(err, ErrNotSuccess) {
				t.Fatalf("PutMany err = %v", err)
			}
			// Nothing was stored, not even the good record of the refused batch.
			for _, a := range []digest.Digest{r.Action, f.result(t, name+" ok").Action} {
				if rec, found, err := f.cache.Lookup(ctx, a); rec != nil || found || err != nil {
					t.Fatalf("a refused result is in the cache: %v %v %v", rec, found, err)
				}
			}
		})
	}
	// A failure written behind the cache's back (a tampered database) is still no hit.
	r := f.result(t, "tampered")
	r.ExitCode = 3
	raw := fmt.Sprintf(`{"version":1,"action":%q,"outputs":[],"exit_code":3}`, r.Action)
	if err := f.db.PutActionRecord(ctx, r.Action, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	m, err := f.cache.LookupMany(ctx, []digest.Digest{r.Action})
	if err != nil || m[r.Action].Hit || !strings.Contains(m[r.Action].Reason, "not a success") {
		t.Fatalf("tampered failure = %+v, %v", m[r.Action], err)
	}
}

func TestPutRefusesMalformed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for name, spoil := range map[string]func(*Result){
		"bad action":      func(r *Result) { r.Action = "sha256:zz" },
		"duplicate path":  func(r *Result) { r.Outputs[1].Path = r.Outputs[0].Path },
		"bad kind":        func(r *Result) { r.Outputs[0].Kind = "socket" },
		"finished before": func(r *Result) { r.Finished = r.Started.Add(-time.Second) },
		"missing output":  func(r *Result) { r.Outputs[0].Digest = digest.FromBytes([]byte("never stored")) },
	} {
		r := f.result(t, name)
		spoil(r)
		if err := f.cache.Put(ctx, r); err == nil {
			t.Errorf("%s: Put accepted it", name)
		}
	}
}

func TestMissingBlobIsAMiss(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	fileGone, treeFileGone, manifestGone, intact := f.result(t, "a"), f.result(t, "b"), f.result(t, "c"), f.result(t, "d")
	for _, r := range []*Result{fileGone, treeFileGone, manifestGone, intact} {
		if err := f.cache.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	f.store.Delete(fileGone.Outputs[0].Digest)
	libB := digest.FromBytes([]byte("lib b b"))
	f.store.Delete(libB) // a file inside treeFileGone's tree
	f.store.Delete(manifestGone.Outputs[1].Digest)
	// Logs are not outputs: losing one does not force a re-execution.
	f.store.Delete(intact.Stdout.Digest)

	actions := []digest.Digest{fileGone.Action, treeFileGone.Action, manifestGone.Action, intact.Action}
	m, err := f.cache.LookupMany(ctx, actions)
	if err != nil {
		t.Fatal(err)
	}
	want := map[digest.Digest][]digest.Digest{
		fileGone.Action:     {fileGone.Outputs[0].Digest},
		treeFileGone.Action: {libB},
		manifestGone.Action: {manifestGone.Outputs[1].Digest},
	}
	for a, missing := range want {
		e := m[a]
		if e.Hit || e.Result == nil || fmt.Sprint(e.Missing) != fmt.Sprint(missing) || !strings.Contains(e.Reason, "missing from the store") {
			t.Errorf("entry %s = %+v; want a miss reporting %v", a, e, missing)
		}
	}
	if !m[intact.Action].Hit {
		t.Errorf("intact = %+v", m[intact.Action])
	}
	if rec, found, err := f.cache.Lookup(ctx, fileGone.Action); found || rec == nil || err != nil {
		t.Fatalf("Lookup(file gone) = %v, %v, %v; want the record and found=false", rec, found, err)
	}
	// Storing the outputs again makes it a hit again.
	f.blob(t, "binary a")
	if _, found, _ := f.cache.Lookup(ctx, fileGone.Action); !found {
		t.Fatal("still a miss after the blob came back")
	}
}

func TestGCKeepsCachedBlobs(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	live := f.result(t, "live")
	if err := f.cache.Put(ctx, live); err != nil {
		t.Fatal(err)
	}
	att := f.blob(t, "envelope")
	if err := f.cache.AddAttestation(ctx, live.Action, att); err != nil {
		t.Fatal(err)
	}
	evicted := f.result(t, "evicted")
	if err := f.cache.Put(ctx, evicted); err != nil {
		t.Fatal(err)
	}
	f.cache.Evict(ctx, evicted.Action)
	stray := f.blob(t, "stray")
	extra := f.blob(t, "kept by the caller")

	st, err := f.cache.GC(ctx, []digest.Digest{extra}, store.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted == 0 {
		t.Fatalf("nothing deleted: %+v", st)
	}
	if ok, _ := f.store.Has(stray); ok {
		t.Error("stray blob survived")
	}
	if ok, _ := f.store.Has(evicted.Outputs[0].Digest); ok {
		t.Error("evicted action's output survived")
	}
	if ok, _ := f.store.Has(extra); !ok {
		t.Error("extra root deleted")
	}
	// The live record is still a complete hit, logs and attestation included.
	if _, found, err := f.cache.Lookup(ctx, live.Action); !found || err != nil {
		t.Fatalf("live record after GC: %v, %v", found, err)
	}
	for _, d := range []digest.Digest{live.Definition, live.Stdout.Digest, live.Stderr.Digest, att} {
		if ok, _ := f.store.Has(d); !ok {
			t.Errorf("blob %s of a live record was deleted", d)
		}
	}
	if err := f.store.Materialize(live.Outputs[1].Digest, filepath.Join(t.TempDir(), "lib")); err != nil {
		t.Fatalf("live tree after GC: %v", err)
	}
}

func TestLookupManyLargeBatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	stored := []*Result{f.result(t, "p"), f.result(t, "q"), f.result(t, "r")}
	if err := f.cache.PutMany(ctx, stored); err != nil {
		t.Fatal(err)
	}
	f.store.Delete(stored[2].Outputs[0].Digest)
	// More actions than one chunk, so the parallel path runs when GOMAXPROCS > 1.
	actions := make([]digest.Digest, 0, 5000)
	for i := range 5000 - len(stored) {
		actions = append(actions, digest.FromBytes(fmt.Appendf(nil, "absent %d", i)))
	}
	actions = append(actions[:2500], append([]digest.Digest{stored[0].Action, stored[1].Action, stored[2].Action}, actions[2500:]...)...)
	m, err := f.cache.LookupMany(ctx, actions)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != len(actions) {
		t.Fatalf("%d entries for %d actions", len(m), len(actions))
	}
	hits := 0
	for _, e := range m {
		if e.Hit {
			hits++
		}
	}
	if hits != 2 || !m[stored[0].Action].Hit || !m[stored[1].Action].Hit || m[stored[2].Action].Hit || len(m[stored[2].Action].Missing) != 1 {
		t.Fatalf("hits = %d; entries %+v %+v %+v", hits, m[stored[0].Action], m[stored[1].Action], m[stored[2].Action])
	}
}
