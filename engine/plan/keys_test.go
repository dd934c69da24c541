package plan

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

// chainProject is three steps, a → b → c, each mounting its producer's output.
func chainProject(t *testing.T, argvA string) *graph.Graph {
	t.Helper()
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`
seed "base" {
  layer {
    files = { "/etc/x" = "x" }
  }
}
step "a" {
  image   = seed.base
  run     = ["sh", "-c", "`+argvA+`"]
  outputs = ["/out/o"]
}
step "b" {
  image   = seed.base
  mounts  = { "/in" = step.a.output["/out/o"] }
  run     = ["sort", "-u", "/in"]
  outputs = ["/out/o"]
}
step "c" {
  image   = seed.base
  mounts  = { "/in" = step.b.output["/out/o"] }
  run     = ["cat", "/in"]
  outputs = ["/out/o"]
}
`), 0o644))
	g, diags := graph.Compile(graphtest.LoadConfig(t, dir))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return g
}

// fakeCache is an action cache in memory: key → outputs.
type fakeCache map[digest.Digest]*cache.Result

func (c fakeCache) lookup(keys []digest.Digest) (map[digest.Digest]cache.Entry, error) {
	out := map[digest.Digest]cache.Entry{}
	for _, k := range keys {
		if r := c[k]; r != nil {
			out[k] = cache.Entry{Result: r, Hit: true}
		} else {
			out[k] = cache.Entry{}
		}
	}
	return out, nil
}

func (c fakeCache) put(key digest.Digest, out string) {
	c[key] = &cache.Result{Action: key, Outputs: []cache.Output{{Path: "/out/o", Kind: cache.File, Digest: digest.FromBytes([]byte(out)), Mode: 0o644}}}
}

func statuses(t *testing.T, g *graph.Graph, c fakeCache) (*Plan, map[string]*Node) {
	t.Helper()
	p, err := Make(g, Options{Lookup: c.lookup})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Node{}
	for _, pn := range p.Nodes {
		out[pn.Address] = pn
	}
	return p, out
}

// A step's cache key names what it mounts by content: a producer whose definition changed
// but whose output is the same bytes leaves the key as it was, and other bytes change it.
// A step that mounts no step output is keyed by its definition.
func TestCacheKeyNamesMountedContent(t *testing.T) {
	g1, g2 := chainProject(t, "printf 'b\\na\\n' > /out/o"), chainProject(t, "printf 'a\\nb\\n' > /out/o")
	if g1.Nodes["step.b"].Digest == g2.Nodes["step.b"].Digest {
		t.Fatal("b's definition digest does not cover its producer's definition")
	}
	out := func(s string) graph.ContentOf {
		return func(*lang.Artifact) (graph.Content, bool) {
			return OutputContent(&cache.Output{Kind: cache.File, Digest: digest.FromBytes([]byte(s)), Mode: 0o644}), true
		}
	}
	k1, _, ok1, err1 := g1.CacheKey(g1.Nodes["step.b"], out("a\nb\n"))
	k2, _, ok2, err2 := g2.CacheKey(g2.Nodes["step.b"], out("a\nb\n"))
	k3, _, _, _ := g2.CacheKey(g2.Nodes["step.b"], out("b\na\n"))
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatal(ok1, ok2, err1, err2)
	}
	if k1 != k2 {
		t.Error("the same mounted bytes under producers of different definitions give different cache keys")
	}
	if k2 == k3 {
		t.Error("different mounted bytes give the same cache key")
	}
	if k1 == g1.Nodes["step.b"].Digest {
		t.Error("a step mounting a step output is keyed by its definition")
	}
	a := g1.Nodes["step.a"]
	if k, _, ok, _ := g1.CacheKey(a, nil); !ok || k != a.Digest {
		t.Errorf("a step mounting no step output: key %s, want its definition digest %s", k, a.Digest)
	}
	if _, _, ok, _ := g1.CacheKey(g1.Nodes["step.b"], func(*lang.Artifact) (graph.Content, bool) { return graph.Content{}, false }); ok {
		t.Error("a key was computed without the mounted content")
	}
}

// The plan keys what it can before anything runs: a step whose producers were all found
// in the cache is looked up by the content they recorded, and one that waits for a
// producer that runs says it runs unless its inputs come out unchanged. Once the changed
// producer has run and recorded the same bytes, its users are cached again.
func TestPlanKeysByRecordedContent(t *testing.T) {
	c := fakeCache{}
	g1 := chainProject(t, "printf 'b\\na\\n' > /out/o")
	_, st := statuses(t, g1, c)
	for _, a := range []string{"step.a", "step.b", "step.c"} {
		if st[a].Status != StatusRun {
			t.Fatalf("empty cache: %s is %s", a, st[a].Status)
		}
	}
	if r := st["step.b"].Reason; r != "runs unless its inputs come out unchanged: it mounts what step.a makes in this apply" {
		t.Errorf("b's reason: %q", r)
	}
	if st["step.a"].Reason != "" {
		t.Errorf("a mounts nothing built, but says %q", st["step.a"].Reason)
	}

	// Apply's records: a ran, then b and c under the keys of what they mounted.
	c.put(g1.Nodes["step.a"].Digest, "b\na\n")
	p, _ := statuses(t, g1, c)
	kb := p.keys["step.b"]
	if kb == nil || kb.Result != nil {
		t.Fatalf("b after a is cached: keyed %v, want keyed and a miss", kb)
	}
	c.put(kb.Key, "a\nb\n")
	p, _ = statuses(t, g1, c)
	c.put(p.keys["step.c"].Key, "a\nb\n")
	_, st = statuses(t, g1, c)
	for _, a := range []string{"step.a", "step.b", "step.c"} {
		if st[a].Status != StatusCached {
			t.Fatalf("all recorded: %s is %s", a, st[a].Status)
		}
	}

	// a's definition changes: a runs, and what mounts it waits.
	g2 := chainProject(t, "printf 'a\\nb\\n' > /out/o")
	_, st = statuses(t, g2, c)
	if st["step.a"].Status != StatusRun || st["step.b"].Status != StatusRun || st["step.c"].Status != StatusRun {
		t.Fatalf("a changed: a %s, b %s, c %s; want all to run", st["step.a"].Status, st["step.b"].Status, st["step.c"].Status)
	}
	if r := st["step.c"].Reason; r != "runs unless its inputs come out unchanged: it mounts what step.b makes in this apply" {
		t.Errorf("c's reason: %q", r)
	}
	// a ran and recorded other bytes: b's key is new; c's is what it was once b's output is.
	c.put(g2.Nodes["step.a"].Digest, "a\nb\n")
	p, st = statuses(t, g2, c)
	if st["step.b"].Status != StatusRun || p.keys["step.b"].Key == kb.Key {
		t.Fatal("b mounts other bytes, but is keyed as before")
	}
	c.put(p.keys["step.b"].Key, "a\nb\n") // sort -u: the same output
	_, st = statuses(t, g2, c)
	if st["step.b"].Status != StatusCached || st["step.c"].Status != StatusCached {
		t.Fatalf("b's output came out unchanged: b %s, c %s; want c cached", st["step.b"].Status, st["step.c"].Status)
	}
	if g1.Nodes["step.c"].Digest == g2.Nodes["step.c"].Digest {
		t.Fatal("c's definition digest should differ between the two projects")
	}
}

// Apply settles steps from the hits a plan found only when the plan was made under the
// same hold of the apply lock: under another hold (or none) it looks them up again.
func TestPlannedHitsLentOnlyUnderTheSameHold(t *testing.T) {
	ctx := context.Background()
	g := chainProject(t, "true")
	ws, err := workspace.Open(t.TempDir())
	graphtest.Must(t, err)
	defer ws.Close()
	out, err := ws.Store.PutBytes([]byte("output"))
	graphtest.Must(t, err)
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := g.Nodes["step.a"]
	graphtest.Must(t, ws.Cache.Put(ctx, &cache.Result{Action: a.Digest, Outputs: []cache.Output{{Path: "/out/o", Kind: cache.File, Digest: out, Mode: 0o644}},
		Started: start, Finished: start, Executor: "runc", Isolation: "container"}))
	hit := func(p *Plan) bool {
		t.Helper()
		keys, err := p.Keys(ctx, ws, g)
		graphtest.Must(t, err)
		return keys["step.a"] != nil && keys["step.a"].Result != nil
	}

	unplanned, err := ForWorkspace(ctx, ws, g, nil, nil, Selection{})
	graphtest.Must(t, err)
	unlock, err := ws.Lock()
	graphtest.Must(t, err)
	p, err := ForWorkspace(ctx, ws, g, nil, nil, Selection{})
	graphtest.Must(t, err)
	if !hit(p) {
		t.Fatal("planned under the lock: step.a is not a hit")
	}
	// Nothing but a process ignoring the lock removes a blob while it is held; doing it
	// anyway shows which hits are lent and which are looked up again.
	graphtest.Must(t, os.Remove(ws.Store.Path(out)))
	if !hit(p) {
		t.Fatal("under the same hold, apply looked the plan's hits up again")
	}
	if hit(unplanned) {
		t.Fatal("a plan made without the lock lent its hits")
	}
	unlock()
	unlock, err = ws.Lock()
	graphtest.Must(t, err)
	defer unlock()
	if hit(p) {
		t.Fatal("a plan made under an earlier hold lent its hits")
	}
}
