package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/lang"
)

// The plan digest's direct encoding is byte for byte the generic canonical JSON of the
// plan's identity, for addresses and paths that sort differently by bytes and by UTF-16
// (U+E000 against a supplementary character), with escapes, and with no inputs at all.
func TestPlanIdentityMatchesCanonical(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	parts := []string{"step.a", "step.\ue000", "step.\U0001F600", "recipe.r.step.b", "capability.c", "q\"uote", "tab\t", "é"}
	for iter := 0; iter < 500; iter++ {
		p := &Plan{}
		for n := r.Intn(8); n > 0; n-- {
			addr := parts[r.Intn(len(parts))] + fmt.Sprint(r.Intn(3))
			p.Nodes = append(p.Nodes, &Node{Address: addr, Digest: digest.FromBytes([]byte(addr))})
		}
		switch r.Intn(3) {
		case 0: // nil: encoded as null, as encoding/json does
		case 1:
			p.Inputs = []lang.InputRecord{}
		default:
			for n := 1 + r.Intn(4); n > 0; n-- {
				p.Inputs = append(p.Inputs, lang.InputRecord{Kind: "host_dir", Path: "/" + parts[r.Intn(len(parts))], Digest: digest.FromBytes([]byte{byte(n)})})
			}
		}
		got, err := p.identityJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := digest.Canonical(p.identity())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("identity encodings differ:\ndirect:  %s\ngeneric: %s", got, want)
		}
	}
}

// A plan's digest is that of its identity's canonical JSON, whether Make writes the
// nodes in address order directly (every address sorts bytewise) or sorts them by UTF-16
// first: "step.豈" (U+F900) comes before "step.𠀀" (U+20000) by bytes but after it by
// UTF-16. (Both are letters: a name is an identifier.)
func TestPlanDigestIsThatOfItsIdentity(t *testing.T) {
	sparse := graphtest.LoadSparse(t, rand.New(rand.NewSource(5)), 300, 3, 4)
	dir := t.TempDir()
	src := fmt.Sprintf("seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", graphtest.SeedFile(t, "#!/bin/sh\n"))
	for _, name := range []string{"\uf900", "\U00020000", "a", "z"} {
		src += fmt.Sprintf("step %q {\n  image = seed.base\n  run = [\"sh\"]\n  outputs = [\"/out/o\"]\n}\n", name)
	}
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644))
	for _, cfg := range []*lang.Config{sparse, graphtest.LoadConfig(t, dir)} {
		p := planOf(t, cfg)
		canon, err := digest.Canonical(p.identity())
		if err != nil {
			t.Fatal(err)
		}
		if want := digest.FromBytes(canon); p.Digest != want {
			t.Fatalf("plan of %d nodes: digest %s, want that of its identity, %s", len(p.Nodes), p.Digest, want)
		}
	}
}

// A plan describes its steps' mounts only when written (Mounts). Written, it is what the
// eager map of descriptions wrote (keys in byte order, HTML characters escaped), and a plan
// read back from its JSON writes the same bytes again.
func TestPlanMountsWriteAndReadBack(t *testing.T) {
	cfg := graphtest.LoadConfig(t, graphtest.InputKindsProject(t))
	p := planOf(t, cfg)
	var made bytes.Buffer
	if err := p.WriteJSON(&made); err != nil {
		t.Fatal(err)
	}
	// The view as it was, a map of descriptions, in the plan's own JSON encoding.
	want := map[string]string{}
	for k, a := range cfg.Steps["b"].Mounts {
		want[k] = a.String()
	}
	eager, err := json.Marshal(want)
	graphtest.Must(t, err)
	var compact bytes.Buffer
	graphtest.Must(t, json.Compact(&compact, made.Bytes()))
	if !bytes.Contains(compact.Bytes(), append([]byte(`"mounts":`), eager...)) || !bytes.Contains(eager, []byte(`\u003c`)) {
		t.Fatalf("step b's mounts are not written as a map of descriptions:\n%s\nin\n%s", eager, made.Bytes())
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	graphtest.Must(t, os.WriteFile(path, made.Bytes(), 0o644))
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := loaded.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), made.Bytes()) {
		t.Fatalf("a plan read back writes other bytes:\n%s\nagainst\n%s", again.Bytes(), made.Bytes())
	}
	for _, n := range loaded.Nodes {
		if n.Address == "step.b" && !maps.Equal(n.Step.Mounts.Text(), want) {
			t.Fatalf("step.b's mounts read back as %v, want %v", n.Step.Mounts.Text(), want)
		}
	}
}

// A plan shows the cache volumes a step mounts, in JSON (path → name and sharing, read back
// as written) and in text, and leaves them out of the step's digest: what a cache holds is
// not an input, so renaming a cache plans no run.
func TestPlanShowsCaches(t *testing.T) {
	dir, sh := t.TempDir(), graphtest.SeedFile(t, "#!/bin/sh\n")
	step := func(caches string) *Plan {
		src := fmt.Sprintf("seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", sh) +
			"step \"b\" {\n  image = seed.base\n  run = [\"sh\"]\n  outputs = [\"/out/o\"]\n  caches = " + caches + "\n}\n"
		graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644))
		return planOf(t, graphtest.LoadConfig(t, dir))
	}
	p := step(`{ "/cache/go-build" = "go-build", "/root/.npm" = { name = "npm", sharing = "locked" } }`)
	var js bytes.Buffer
	graphtest.Must(t, p.WriteJSON(&js))
	path := filepath.Join(t.TempDir(), "plan.json")
	graphtest.Must(t, os.WriteFile(path, js.Bytes(), 0o644))
	loaded, err := Load(path)
	graphtest.Must(t, err)
	want := map[string]CacheView{"/cache/go-build": {Name: "go-build", Sharing: "shared"}, "/root/.npm": {Name: "npm", Sharing: "locked"}}
	for _, q := range []*Plan{p, loaded} {
		for _, n := range q.Nodes {
			if n.Address == "step.b" && !maps.Equal(n.Step.Caches, want) {
				t.Errorf("step.b's caches in the plan: %v, want %v\n%s", n.Step.Caches, want, js.Bytes())
			}
		}
	}
	if !bytes.Contains(js.Bytes(), []byte(`"caches": {`)) {
		t.Errorf("the plan's JSON has no caches:\n%s", js.Bytes())
	}
	var text bytes.Buffer
	p.WriteText(&text)
	for _, w := range []string{"cache go-build at /cache/go-build", "cache npm at /root/.npm (locked)"} {
		if !bytes.Contains(text.Bytes(), []byte(w)) {
			t.Errorf("the text plan does not say %q:\n%s", w, text.Bytes())
		}
	}
	// No caches: no "caches" key, as before; and the step's digest is the same.
	none := step(`{}`)
	js.Reset()
	graphtest.Must(t, none.WriteJSON(&js))
	if bytes.Contains(js.Bytes(), []byte(`"caches"`)) {
		t.Errorf("a step without caches shows caches:\n%s", js.Bytes())
	}
	if none.Digest != p.Digest {
		t.Errorf("caches changed the plan's digest: %s against %s", none.Digest, p.Digest)
	}
}
