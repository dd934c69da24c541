package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/workspace"
)

// collectGarbage, the core of `foundry gc`, without the CLI: a blob a cache record names
// (its definition, an output) is kept, one nothing names is deleted, and a dry run only
// counts it.
func TestCollectGarbageKeepsWhatRecordsName(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ctx := context.Background()
	put := func(s string) digest.Digest {
		d, err := ws.Store.PutBytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	def, out, orphan := put("definition"), put("output"), put("orphan")
	action := digest.FromBytes([]byte("action"))
	rec, _ := json.Marshal(cache.Result{Version: 1, Action: action, Definition: def,
		Outputs: []cache.Output{{Path: "/out/o", Kind: cache.File, Digest: out, Size: 6}}})
	if err := ws.State.PutActionRecord(ctx, action, rec); err != nil {
		t.Fatal(err)
	}
	has := func(d digest.Digest) bool {
		ok, err := ws.Store.Has(d)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	res, err := collectGarbage(ctx, ws, gcOptions{DryRun: true, KeepRuns: -1, KeepGraphs: 16})
	if err != nil || res.Deleted != 1 || res.Live != 2 || !has(orphan) {
		t.Fatalf("dry run: %+v, %v; orphan still there: %v", res, err, has(orphan))
	}
	res, err = collectGarbage(ctx, ws, gcOptions{KeepRuns: -1, KeepGraphs: 16})
	if err != nil || res.Deleted != 1 || has(orphan) || !has(def) || !has(out) {
		t.Fatalf("gc: %+v, %v; orphan %v, definition %v, output %v", res, err, has(orphan), has(def), has(out))
	}
}
