package deliver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// died is what a delivery "killed" at a fault point panics with.
type died struct{}

// fixture is a project delivering one product to a dir: destination.
type fixture struct {
	project, dest, files string
	to                   string // the destination under dest (its grant); "" for dest itself
	signer               *provenance.Signer
	keys                 []*provenance.Verifier
	// check is the signed provenance of the product's check that passed, recorded under
	// result: made once, as a run takes it from the action cache.
	check  []byte
	result digest.Digest
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{project: t.TempDir(), dest: t.TempDir(), files: t.TempDir()}
	if err := os.WriteFile(filepath.Join(f.files, "app.txt"), []byte("release one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if f.signer, err = provenance.NewSigner(key); err != nil {
		t.Fatal(err)
	}
	own, err := f.signer.Verifier("test key")
	if err != nil {
		t.Fatal(err)
	}
	f.keys = []*provenance.Verifier{own}
	ws, err := workspace.Open(f.project)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	f.result = digest.FromBytes([]byte("check result"))
	f.check, err = ws.Attester(f.signer).Sign(provenance.NewProvenance(&provenance.Execution{
		InvocationID: "r1/product.app.check.works/1", Executor: "runc", Isolation: "container",
		Versions: map[string]string{"foundry": "test"}, Step: []byte(`{"argv":["true"]}`),
		ActionDigest: string(digest.FromBytes([]byte("check"))), CacheKey: string(f.result), Platform: "linux/amd64", User: "65534:65534",
		Network: provenance.Network{Mode: "none"}, Image: provenance.Dependency{Name: "image", URI: "foundry:seed.base", Digest: string(digest.FromBytes([]byte("image")))},
		Outputs:   []provenance.Artifact{{Name: provenance.CheckResultSubject, Digest: string(f.result)}},
		StartedOn: time.Now(), FinishedOn: time.Now(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// deliver runs one delivery in a run of its own, on its own handle of the workspace (a
// process of its own): killed at crashAt, if set, it closes that handle, so the run is
// dead, and parks what it dispatched as the next apply's recovery does.
func (f *fixture) deliver(t *testing.T, crashAt string) (loc string, crashed bool, events []event.Event, err error) {
	t.Helper()
	ctx := context.Background()
	ws, err := workspace.Open(f.project)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(died); !ok {
				panic(r)
			}
			crashed = true
		}
		ws.Close()
		if crashed {
			ws, err := workspace.Open(f.project)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			if _, err := ws.State.ParkEffects(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}()
	run, err := ws.State.BeginRun(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	tree, _, err := ws.Store.PutDir(f.files)
	if err != nil {
		t.Fatal(err)
	}
	d := &Deliverer{Workspace: ws, Attester: ws.Attester(f.signer), Keys: f.keys, Project: "shop", RunID: run.ID,
		Emit: func(e event.Event) { events = append(events, e) },
		Fault: func(point, node string) {
			if point == crashAt && node == "product.app" {
				panic(died{})
			}
		}}
	to := f.to
	if to == "" {
		to = f.dest
	}
	loc, err = d.Deliver(ctx, &Request{Product: "product.app", Revision: digest.FromBytes([]byte("rev")), Source: digest.FromBytes([]byte("plan")),
		Target: "linux/amd64", Start: []string{"/bin/app"}, Dest: lang.Destination{Scheme: lang.SchemeDir, Path: to}, Root: f.dest, Tree: tree,
		Checks: []Check{{Address: "product.app.check.works", Result: f.result, Envelopes: [][]byte{f.check}}}})
	return loc, false, events, err
}

// A delivery killed at any point of its effect is completed by the next one, once: it is
// reconciled by looking at the destination, which ends with one release, whole (its files,
// its manifest, its receipt), the channel at it, and the effect recorded as succeeded.
func TestDirDeliveryIsOnceAcrossCrashes(t *testing.T) {
	for _, point := range []string{outbox.FaultBeforeDispatch, outbox.FaultAfterDispatch, FaultAfterCommit, FaultBeforeRecord} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t)
			if _, crashed, _, err := f.deliver(t, point); !crashed {
				t.Fatalf("the delivery did not reach %s: %v", point, err)
			}
			loc, _, events, err := f.deliver(t, "")
			if err != nil {
				t.Fatal(err)
			}
			hex, ok := strings.CutPrefix(loc, "dir:"+f.dest+"/")
			if !ok {
				t.Fatalf("delivered to %q", loc)
			}
			ents, err := os.ReadDir(f.dest)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{hex, "current"}) && !slices.Equal(names, []string{"current", hex}) {
				t.Errorf("the destination holds %v, want the one release and its channel", names)
			}
			for _, p := range []string{ManifestFile, ReceiptFile, filepath.Join(FilesDir, "app.txt")} {
				if _, err := os.Stat(filepath.Join(f.dest, hex, p)); err != nil {
					t.Errorf("the release lacks %s: %v", p, err)
				}
			}
			reconciled := 0
			for _, e := range events {
				if e.Type == "effect_reconciled" {
					reconciled++
				}
			}
			// What was dispatched is reconciled; what was not is simply done.
			if want := 1; point == outbox.FaultBeforeDispatch && reconciled != 0 || point != outbox.FaultBeforeDispatch && reconciled != want {
				t.Errorf("%d effect_reconciled events after a crash at %s", reconciled, point)
			}
			ws, err := workspace.Open(f.project)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			done, err := ws.State.Effects(context.Background(), state.EffectSucceeded)
			if err != nil || len(done) != 1 || done[0].Kind != "deliver" {
				t.Errorf("succeeded effects %+v, %v; want the one delivery", done, err)
			}

			// Delivered again, it is found where it is, and nothing is written.
			before, err := os.Stat(filepath.Join(f.dest, hex, ReceiptFile))
			if err != nil {
				t.Fatal(err)
			}
			if again, _, _, err := f.deliver(t, ""); err != nil || again != loc {
				t.Fatalf("delivered again to %q, %v", again, err)
			}
			if after, err := os.Stat(filepath.Join(f.dest, hex, ReceiptFile)); err != nil || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the receipt was written again")
			}
		})
	}
}

// A delivery reaches its destination from its granted directory without following any
// link and without entering an earlier release, whatever the plan said: a link planted
// below the grant (as a product that delivered one would have), or a destination inside a
// release, is refused with nothing written where it leads.
func TestDeliveryStaysBeneathItsGrant(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		plant      func(t *testing.T, dest, outside string) string // returns the destination
	}{
		{"link", "is a symbolic link", func(t *testing.T, dest, outside string) string {
			if err := os.MkdirAll(filepath.Join(dest, "a"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dest, "a", "esc")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dest, "a", "esc", "pwn")
		}},
		{"release", "is a delivered release", func(t *testing.T, dest, outside string) string {
			rel := filepath.Join(dest, strings.Repeat("ab", 32))
			if err := os.MkdirAll(filepath.Join(rel, FilesDir, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rel, ManifestFile), []byte("{}"), 0o444); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(rel, FilesDir, "d", "pwn")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			outside := t.TempDir()
			f.to = tc.plant(t, f.dest, outside)
			if err := CheckBeneath(f.dest, f.to); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckBeneath: %v, want %q", err, tc.want)
			}
			_, _, _, err := f.deliver(t, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("delivered to %s: %v, want refused (%q)", f.to, err, tc.want)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("the delivery wrote %d entries where the link leads", len(ents))
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(f.to), "pwn")); err == nil && tc.name == "release" {
				t.Errorf("the delivery wrote inside the release")
			}
		})
	}
}
