package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/volume"
	"github.com/foundry-build/foundry/provenance"
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
//	caches/     cache volumes steps mount (engine/volume), never an input of a cache key
type Workspace struct {
	Dir     string // the StateDir itself
	Store   *store.Store
	State   *state.DB
	Cache   *cache.Cache
	Seeds   *seed.Builder
	Volumes *volume.Store

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
	// lends its hits to an apply under the same hold (engine/plan's Plan.Keys).
	hold, holds uint64
}

// Held is the number of the current hold of the apply lock, or 0 when it is not held.
func (w *Workspace) Held() uint64 {
	w.lock.mu.Lock()
	defer w.lock.mu.Unlock()
	return w.lock.hold
}

// Open opens (creating if needed) the state directory of the project in dir.
func Open(dir string) (*Workspace, error) {
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
		Dir:     root,
		Store:   st,
		State:   db,
		Cache:   cache.New(db, st),
		Seeds:   &seed.Builder{Root: filepath.Join(root, "images")},
		Volumes: &volume.Store{Dir: filepath.Join(root, "caches")},
	}, nil
}

// Holder is what the process holding the apply lock wrote into the lock file when it took
// it: only a hint, for telling a waiting user whom they wait for. Zero when unknown.
type Holder struct {
	PID   int
	Since time.Time
}

// BusyError says another process holds the apply lock: Lock's error, and LockContext's when
// ctx ended while it waited (Err is then ctx's cause).
type BusyError struct {
	Path   string // the lock file
	Holder Holder // as last read from the lock file
	Err    error  // LockContext only: why it stopped waiting
}

func (e *BusyError) Error() string {
	who := "it holds " + e.Path
	if e.Holder.PID != 0 {
		who = fmt.Sprintf("pid %d holds %s", e.Holder.PID, e.Path)
	}
	msg := "another foundry apply is running in this project (" + who + ")"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *BusyError) Unwrap() error { return e.Err }

// lockPoll is how often LockContext tries the lock again: flock has no timeout, and a
// blocking flock could not be interrupted by ctx.
const lockPoll = 150 * time.Millisecond

// Lock takes the project's apply lock, so that two applies never write one workspace at
// once; it fails at once with a *BusyError when another process holds it. The kernel
// releases the lock if the process dies. Within one process it nests: `foundry apply` holds
// it from planning through applying, and Apply's own Lock then only counts.
func (w *Workspace) Lock() (unlock func(), err error) {
	return w.lock.take(w.Dir, nil, nil)
}

// LockContext is Lock, except that while another process holds the lock it waits for it,
// until ctx ends (then a *BusyError whose Err is ctx's cause). waiting, if not nil, is
// called once, with the holder's hint, when it has to wait.
func (w *Workspace) LockContext(ctx context.Context, waiting func(Holder)) (unlock func(), err error) {
	return w.lock.take(w.Dir, ctx, waiting)
}

// take takes the lock, waiting until ctx ends if ctx is not nil.
func (l *lockState) take(dir string, ctx context.Context, waiting func(Holder)) (unlock func(), err error) {
	path := filepath.Join(dir, "apply.lock")
	var f *os.File // our own open file description (flock excludes it from any other); try takes it once it holds the lock
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var tick *time.Ticker
	for {
		took, err := l.try(path, &f)
		if err != nil {
			return nil, err
		}
		if took {
			break
		}
		// Not under l.mu: Held and in-process Lock calls go on while this one waits.
		busy := &BusyError{Path: path, Holder: readHolder(path)}
		if ctx == nil {
			return nil, busy
		}
		if tick == nil {
			if waiting != nil {
				waiting(busy.Holder)
			}
			tick = time.NewTicker(lockPoll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			busy.Err = context.Cause(ctx)
			return nil, busy
		case <-tick.C:
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.depth--; l.depth == 0 {
				// Still held: no waiter reads this holder's hint after it let go.
				l.file.Truncate(0)
				l.file.Close()
				l.file, l.hold = nil, 0
			}
		})
	}, nil
}

// try takes the lock once without waiting: it counts a hold this process already has, or
// flocks *f (opening it first, and keeping it, setting *f to nil, once it holds the lock),
// and reports whether this call now holds the lock.
func (l *lockState) try(path string, f **os.File) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.depth > 0 {
		l.depth++
		return true, nil
	}
	if *f == nil {
		var err error
		if *f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644); err != nil {
			return false, fmt.Errorf("opening the apply lock: %w", err)
		}
	}
	if err := syscall.Flock(int((*f).Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("locking %s: %w", path, err)
	}
	writeHolder(*f)
	l.holds++
	l.file, l.hold, l.depth = *f, l.holds, 1
	*f = nil
	return true, nil
}

// writeHolder records this process as the holder in the held lock file. A failure only
// loses the hint, so it is ignored.
func writeHolder(f *os.File) {
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(fmt.Sprintf("pid %d\nsince %s\n", os.Getpid(), time.Now().Format(time.RFC3339Nano))), 0)
	}
}

// readHolder reads the hint writeHolder left; zero fields for whatever it cannot read (the
// file may be caught between a truncate and a write).
func readHolder(path string) Holder {
	var h Holder
	b, err := os.ReadFile(path)
	if err != nil {
		return h
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			h.PID, _ = strconv.Atoi(v)
		case "since":
			h.Since, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	return h
}

// AttestationDir holds every attestation this project minted, as
// sha256-<hex>.intoto.json files named by envelope digest: what `foundry verify
// -attestations` reads and what an auditor can be handed.
func (w *Workspace) AttestationDir() string { return filepath.Join(w.Dir, "attestations") }

// TracePaths are where the trace of run runID is kept (spec/state.md): its Chrome trace
// events, and its summary (engine/trace).
func (w *Workspace) TracePaths(runID string) (events, summary string) {
	dir := filepath.Join(w.Dir, "traces")
	return filepath.Join(dir, runID+".json"), filepath.Join(dir, runID+".summary.json")
}

// Close closes the state database.
func (w *Workspace) Close() error { return w.State.Close() }

// An Attester signs minted statements with Signer and stores each envelope in the content
// store and the attestation directory: the one way the engine records an attestation
// (invariant 3 of ARCHITECTURE.md).
type Attester struct {
	ws     *Workspace
	Signer *provenance.Signer
}

// Attester returns the Attester that signs with signer.
func (w *Workspace) Attester(signer *provenance.Signer) *Attester {
	return &Attester{ws: w, Signer: signer}
}

// Sign signs a minted statement (mintErr is the minting's error, passed through) and stores
// the envelope.
func (a *Attester) Sign(st *provenance.Statement, mintErr error) ([]byte, error) {
	if mintErr != nil {
		return nil, mintErr
	}
	env, err := provenance.Sign(a.Signer, st)
	if err != nil {
		return nil, err
	}
	if _, err := a.ws.Store.PutBytes(env); err != nil {
		return nil, err
	}
	if _, err := provenance.WriteEnvelope(a.ws.AttestationDir(), env); err != nil {
		return nil, err
	}
	return env, nil
}

// MaterializeFile returns a read-only copy of blob d with the given mode under inputs/,
// shared by every step that mounts it. Steps see inputs read-only, and the copy is never
// written after it is renamed into place.
func (w *Workspace) MaterializeFile(d digest.Digest, mode os.FileMode) (string, error) {
	dst := filepath.Join(w.Dir, "inputs", fmt.Sprintf("file-%s-%o", d.Hex(), mode))
	if _, err := os.Lstat(dst); err == nil {
		return dst, nil
	}
	src, err := w.Store.Open(d)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-file-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}

// MaterializeTree returns a directory holding tree md under inputs/, built once.
func (w *Workspace) MaterializeTree(md digest.Digest) (string, error) {
	dst := filepath.Join(w.Dir, "inputs", "tree-"+md.Hex())
	if _, err := os.Lstat(dst); err == nil {
		return dst, nil
	}
	tmp := filepath.Join(w.Dir, "inputs", ".tmp-tree-"+NewID())
	if err := w.Store.Materialize(md, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Lstat(dst); serr == nil {
			return dst, nil // another step materialized it first
		}
		return "", err
	}
	return dst, nil
}

// NewID is a random name part for the scratch directories, inputs and containers made
// under the workspace.
func NewID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SQLForTest runs a raw statement against the state database; tests use it to play an
// attacker who can write the database file.
func (w *Workspace) SQLForTest(t interface{ Fatal(...any) }, query string, args ...any) {
	if _, err := w.State.SQL().Exec(query, args...); err != nil {
		t.Fatal(err)
	}
}
