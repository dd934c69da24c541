package cache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
)

const benchEntries = 10000

// benchCache fills a cache with benchEntries records, each with a file output and a tree
// output, drawn from pools of 2,000 distinct files and 2,000 distinct trees (so that
// setup does not fsync 30,000 blobs, while most lookups still read a manifest that the
// same batch has not read yet).
func benchCache(b *testing.B) (*fixture, []digest.Digest) {
	b.Helper()
	ctx := context.Background()
	setup := time.Now()
	f := newFixture(b)
	files := make([]digest.Digest, 2000)
	for i := range files {
		files[i] = f.blob(b, fmt.Sprintf("file %d", i))
	}
	trees := make([]digest.Digest, 2000)
	for i := range trees {
		trees[i] = f.tree(b, map[string]string{"a": fmt.Sprintf("a%d", i), "d/b": "shared", "d/c": "shared too"})
	}
	logBlob := f.blob(b, "log")
	b.Logf("setup: %d blobs stored in %v", len(files)+3*len(trees), time.Since(setup))
	actions := make([]digest.Digest, benchEntries)
	batch := make([]*Result, 0, 1000)
	start := time.Now().UTC()
	for i := range actions {
		actions[i] = digest.FromBytes(fmt.Appendf(nil, "action %d", i))
		batch = append(batch, &Result{
			Action:  actions[i],
			Outputs: []Output{{Path: "/out/f", Kind: File, Digest: files[i%len(files)]}, {Path: "/out/t", Kind: Tree, Digest: trees[i%len(trees)]}},
			Stdout:  Log{Digest: logBlob}, Stderr: Log{Digest: logBlob},
			Started: start, Finished: start.Add(time.Second), Executor: "runc", Isolation: "container",
		})
		if len(batch) == cap(batch) {
			if err := f.cache.PutMany(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return f, actions
}

// BenchmarkLookupMany10k looks up 10,000 cached actions in one call, as a no-op apply does.
// One op is the whole batch; ns/entry is the cost per action.
func BenchmarkLookupMany10k(b *testing.B) {
	ctx := context.Background()
	f, actions := benchCache(b)
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		m, err := f.cache.LookupMany(ctx, actions)
		if err != nil {
			b.Fatal(err)
		}
		if len(m) != benchEntries || !m[actions[benchEntries-1]].Hit {
			b.Fatal("not all hits")
		}
	}
	per := time.Since(t0) / time.Duration(b.N)
	b.ReportMetric(float64(per.Nanoseconds())/benchEntries, "ns/entry")
	b.Logf("LookupMany of %d entries: %v per batch (%d batches)", benchEntries, per, b.N)
}

// BenchmarkLookupSingly10k looks the same 10,000 actions up one query at a time.
func BenchmarkLookupSingly10k(b *testing.B) {
	ctx := context.Background()
	f, actions := benchCache(b)
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		for _, a := range actions {
			if _, found, err := f.cache.Lookup(ctx, a); err != nil || !found {
				b.Fatal("miss", err)
			}
		}
	}
	per := time.Since(t0) / time.Duration(b.N)
	b.ReportMetric(float64(per.Nanoseconds())/benchEntries, "ns/entry")
	b.Logf("%d single lookups: %v in total", benchEntries, per)
}

// BenchmarkNoopApplyBookkeeping10k is the persistence work of a no-op apply of 10,000
// cached nodes: begin a run, look every action up, record every node cached, finish.
func BenchmarkNoopApplyBookkeeping10k(b *testing.B) {
	ctx := context.Background()
	f, actions := benchCache(b)
	nodes := make([]state.NodeRef, len(actions))
	for i, a := range actions {
		nodes[i] = state.NodeRef{Address: fmt.Sprintf("recipe.r%d.step.build", i), Action: a}
	}
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		run, err := f.db.BeginRun(ctx, digest.FromBytes([]byte("plan")), []string{"apply"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.cache.LookupMany(ctx, actions); err != nil {
			b.Fatal(err)
		}
		if err := f.db.NodesCached(ctx, run.ID, nodes); err != nil {
			b.Fatal(err)
		}
		if err := f.db.FinishRun(ctx, run.ID, state.RunSucceeded); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(t0) / time.Duration(b.N)
	b.Logf("no-op apply bookkeeping for %d nodes: %v per apply", benchEntries, per)
}
