package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/store"
)

// StateDir is the name of a project's state directory.
const StateDir = ".foundry"

// Workspace is a project's local state: the content store, the state database, the action
// cache over both, and the seed image builder. Layout under StateDir:
//
//	blobs/      content store (package store)
//	state.db    runs, nodes, attempts, action cache records (engine/state)
//	images/     seed images: one OCI layout and unpacked root filesystems (engine/seed)
//	inputs/     step inputs materialized from the store, by digest, shared between steps
//	runs/       per-attempt scratch (/out directories, logs in progress); removed when done
//	attestations/  signed provenance envelopes, by envelope digest
//	keys/       the project's default signing key, made on first apply when none is given
//	stat-cache  input file digests by stat (digest.StatCache), written by loading
type Workspace struct {
	Dir   string // the StateDir itself
	Store *store.Store
	State *state.DB
	Cache *cache.Cache
	Seeds *seed.Builder

	lock lockState
}

// lockState is the apply lock as this process holds it.
type lockState struct {
	mu    sync.Mutex
	file  *os.File // open while held
	depth int      // Lock calls not yet unlocked
	// hold numbers the holds of the lock, counting from 1; 0 while it is not held. Cache
	// hits found while it is held stay hits until it is released: nothing removes an
	// entry or a blob without it (gc and apply take it). So a plan made under a hold
	// lends its hits to an apply under the same hold (see Plan.keys).
	hold, holds uint64
}

// held is the number of the current hold of the lock, or 0.
func (w *Workspace) held() uint64 {
	w.lock.mu.Lock()
	defer w.lock.mu.Unlock()
	return w.lock.hold
}

// OpenWorkspace opens (creating if needed) the state directory of the project in dir.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(abs, StateDir)
	for _, sub := range []string{"", "inputs", "runs"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return nil, fmt.Errorf("opening %s: %w", root, err)
		}
	}
	st, err := store.Open(filepath.Join(root, "blobs"))
	if err != nil {
		return nil, err
	}
	db, err := state.OpenState(filepath.Join(root, "state.db"))
	if err != nil {
		return nil, err
	}
	return &Workspace{
		Dir:   root,
		Store: st,
		State: db,
		Cache: cache.New(db, st),
		Seeds: &seed.Builder{Root: filepath.Join(root, "images")},
	}, nil
}

// Lock takes the project's apply lock, so that two applies never write one workspace at
// once; it fails at once, naming the lock file, when another process holds it. The kernel
// releases the lock if the process dies. Within one process it nests: `foundry apply` holds
// it from planning through applying, and Apply's own Lock then only counts.
func (w *Workspace) Lock() (unlock func(), err error) {
	l := &w.lock
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.depth == 0 {
		path := filepath.Join(w.Dir, "apply.lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, fmt.Errorf("another foundry apply is running in this project (it holds %s)", path)
		}
		l.holds++
		l.file, l.hold = f, l.holds
	}
	l.depth++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.depth--; l.depth == 0 {
				l.file.Close()
				l.file, l.hold = nil, 0
			}
		})
	}, nil
}

// lookup looks cache keys up in the workspace's action cache.
func (w *Workspace) lookup(ctx context.Context) lookupFunc {
	return func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error) {
		return w.Cache.LookupMany(ctx, keys)
	}
}

// plannedKeys are the cache keys of p's steps known before anything runs, and what they
// found: those the plan found, when it was made under this hold of the apply lock, or else
// looked up again (a plan read from a file, or made without the lock: its hits may be gone).
func (w *Workspace) plannedKeys(ctx context.Context, g *Graph, p *Plan) (map[string]*keyed, error) {
	if p.keys != nil && p.keysHold != 0 && p.keysHold == w.held() {
		return p.keys, nil
	}
	return g.plannedKeys(p, w.lookup(ctx))
}

// AttestationDir holds every attestation this project minted, as
// sha256-<hex>.intoto.json files named by envelope digest: what `foundry verify
// -attestations` reads and what an auditor can be handed.
func (w *Workspace) AttestationDir() string { return filepath.Join(w.Dir, "attestations") }

// Close closes the state database.
func (w *Workspace) Close() error { return w.State.Close() }

// Plan plans g against this workspace's action cache and, when reg is set, the admitted
// capabilities in that registry that verify with keys.
func (w *Workspace) Plan(ctx context.Context, g *Graph, reg registry.Store, keys []*provenance.Verifier) (*Plan, error) {
	opt := PlanOptions{
		Lookup:      w.lookup(ctx),
		SeedBuilt:   func(n *Node) bool { return w.Seeds.Built(string(n.Digest)) }, // the key buildSeed gives
		Quarantined: map[digest.Digest]string{},
	}
	qs, err := w.State.QuarantineList(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		opt.Quarantined[q.Digest] = q.Reason
	}
	sealed := w.sealedNow(ctx, g, keys)
	if reg != nil {
		opt.Admitted = func(n *Node) (*Admitted, string, error) {
			adm, why, err := LookupAdmitted(ctx, reg, keys, w.State, n)
			if err != nil || adm == nil {
				return adm, why, err
			}
			su := sealed(n)
			if su == nil || slices.Contains(adm.Suites, su.sealedDigest) {
				return adm, "", nil
			}
			note := fmt.Sprintf("%s passed an earlier sealed suite than the current one (%s)", adm.Ref, short(su.sealedDigest))
			switch {
			case g.Config.Project.KeepPins:
				return adm, note + "; pinned all the same, as the project's keep_pins says", nil
			case len(n.Providers) == 0:
				return adm, note + "; pinned all the same: no recipe provides a candidate to evaluate on it", nil
			}
			return nil, note + ": its recipe's candidate is evaluated on the current suite", nil
		}
	}
	p, err := MakePlan(g, opt)
	if err != nil {
		return nil, err
	}
	p.keysHold = w.held()
	for _, cp := range p.Capabilities {
		n := g.Nodes[cp.Address]
		if cp.Status == StatusRegistry || n.Capability.Suites["sealed"] == nil {
			continue
		}
		if su := sealed(n); su != nil && len(su.sealed) < minUndisclosed(g.Config.Project) {
			cp.Ready = false
			cp.Notes = append(cp.Notes, fmt.Sprintf("out of undisclosed sealed cases: %d left, and promotion needs %d; every other sealed case was shown to a builder and serves for repair now: add sealed cases",
				len(su.sealed), minUndisclosed(g.Config.Project)))
		}
	}
	return p, nil
}

// sealedNow returns a function giving a capability's suites as they stand in this workspace
// (the sealed cases no signed result disclosed), or nil when they cannot be read: the plan
// then says nothing about them, and apply reports the problem when it evaluates.
func (w *Workspace) sealedNow(ctx context.Context, g *Graph, keys []*provenance.Verifier) func(*Node) *suites {
	var results []provenance.SignedTestResult
	var once sync.Once
	return func(n *Node) *suites {
		once.Do(func() { results, _ = provenance.TestResultsIn(w.AttestationDir(), keys, nil) })
		retired, err := w.State.RetiredCases(ctx, n.Capability.Name)
		if err != nil {
			return nil
		}
		su, err := readSuites(g.Config.Dir, n.Capability, disclosedBy(results, n.Capability.Name, retired))
		if err != nil {
			return nil
		}
		return su
	}
}

// SQLForTest runs a raw statement against the state database; tests use it to play an
// attacker who can write the database file.
func (w *Workspace) SQLForTest(t interface{ Fatal(...any) }, query string, args ...any) {
	if _, err := w.State.SQL().Exec(query, args...); err != nil {
		t.Fatal(err)
	}
}
