// Package cache is Foundry's action cache: it maps an action digest to the record of a
// successful execution of that action — its outputs by content digest, its logs, timings,
// executor, and the attestations later minted about it — so that an action whose digest
// has not changed is never executed again (invariant 4).
//
// Records are JSON kept in the state database (engine/state's action_cache table), not one
// file per action: a no-op apply of a large graph looks all of its actions up in one query
// and then only stats the output blobs; nothing is fsynced on the read path. Blobs
// themselves live in package store.
//
// Rules this package enforces and must never relax:
//   - Only successes are stored: Put refuses a result with a non-zero exit code, a timeout,
//     an OOM kill or a signal. A failed action is never cached as a success.
//   - A record is stored only once every output blob it names is in the store, and a record
//     whose output blobs have since gone missing is reported as a miss, with the missing
//     digests, never as a hit.
//
// This package never executes anything and never decides that an execution succeeded
// beyond reading the exit status the executor observed.
package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/store"
)

// RecordVersion is the version of the record format written by Put.
const RecordVersion = 1

// OutputKind says whether an output is one file or a directory tree.
type OutputKind string

const (
	File OutputKind = "file" // Digest names the file's blob
	Tree OutputKind = "tree" // Digest names a tree manifest (package store PutDir)
)

// Output is one declared output of an action.
type Output struct {
	Path   string        `json:"path"` // the declared output path, e.g. /out/int-sort
	Kind   OutputKind    `json:"kind"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"` // bytes of the file, or of the manifest for a tree
	// Mode is a file output's mode as the step left it, normalized to 0755 or 0644 (the
	// execute bit is what a consumer needs); zero for trees, whose manifest has modes.
	Mode uint32 `json:"mode,omitempty"`
}

// MountMode is the mode a file output is materialized with for the steps that mount it.
func (o *Output) MountMode() os.FileMode {
	if o.Mode&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// Log is one captured output stream.
type Log struct {
	Digest    digest.Digest `json:"digest,omitempty"` // empty when nothing was captured
	Size      int64         `json:"size"`
	Truncated bool          `json:"truncated"` // the stream exceeded the step's output limit
}

// Result is the record of one successful execution of an action.
type Result struct {
	Version int `json:"version"`
	// Action is the action digest the record is stored under.
	Action digest.Digest `json:"action"`
	// Definition names the blob holding the canonical action definition (its RFC 8785
	// JSON) that Action was computed from.
	Definition digest.Digest `json:"definition"`
	// Outputs, sorted by Path.
	Outputs []Output `json:"outputs"`

	ExitCode  int    `json:"exit_code"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed"`
	Signal    string `json:"signal,omitempty"`

	Stdout Log `json:"stdout"`
	Stderr Log `json:"stderr"`

	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Duration time.Duration `json:"duration_ns"`
	// CPU and PeakMemory are what the step's processes used, as the executor measured it
	// (zero when it could not).
	CPU        time.Duration `json:"cpu_ns,omitempty"`
	PeakMemory int64         `json:"peak_memory_bytes,omitempty"`

	Executor  string `json:"executor"`  // "containerd", "runc", "local"
	Isolation string `json:"isolation"` // "container" or "none"
	// Worker is the identity of the Temporal worker that ran the step, "" when this
	// machine ran it (spec/temporal.md).
	Worker string `json:"worker,omitempty"`
	// Origin is, for the record of a fetched source (engine/fetch), where its bytes came
	// from: the URL (of a mirror, maybe) that served them, the repository, or the registry
	// reference. Empty for a step.
	Origin string `json:"origin,omitempty"`

	// Attestations are blobs (DSSE envelopes) minted about this execution by provenance,
	// added after the fact with AddAttestation.
	Attestations []digest.Digest `json:"attestations"`
}

// Output finds the output recorded at path, or nil.
func (r *Result) Output(path string) *Output {
	for i := range r.Outputs {
		if r.Outputs[i].Path == path {
			return &r.Outputs[i]
		}
	}
	return nil
}

// ErrNotSuccess is returned (wrapped) by Put for a result that is not a success.
var ErrNotSuccess = errors.New("not a successful result")

// ErrMissingBlobs is returned (wrapped) by Put when outputs are not in the store.
var ErrMissingBlobs = errors.New("output blobs missing from the store")

// Success reports why r is not a successful execution, or nil if it is.
func (r *Result) Success() error {
	switch {
	case r.TimedOut:
		return fmt.Errorf("action %s timed out: %w", r.Action, ErrNotSuccess)
	case r.OOMKilled:
		return fmt.Errorf("action %s was killed at its memory limit: %w", r.Action, ErrNotSuccess)
	case r.Signal != "":
		return fmt.Errorf("action %s was killed by signal %s: %w", r.Action, r.Signal, ErrNotSuccess)
	case r.ExitCode != 0:
		return fmt.Errorf("action %s exited with code %d: %w", r.Action, r.ExitCode, ErrNotSuccess)
	}
	return nil
}

// validate checks everything about r except blob presence.
func (r *Result) validate() error {
	if err := r.Action.Validate(); err != nil {
		return fmt.Errorf("action: %w", err)
	}
	if err := r.Success(); err != nil {
		return err
	}
	if r.Definition != "" {
		if err := r.Definition.Validate(); err != nil {
			return fmt.Errorf("definition: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, o := range r.Outputs {
		if o.Path == "" || seen[o.Path] {
			return fmt.Errorf("output path %q is empty or repeated", o.Path)
		}
		seen[o.Path] = true
		if o.Kind != File && o.Kind != Tree {
			return fmt.Errorf("output %s: kind %q, want file or tree", o.Path, o.Kind)
		}
		if err := o.Digest.Validate(); err != nil {
			return fmt.Errorf("output %s: %w", o.Path, err)
		}
	}
	for _, l := range []Log{r.Stdout, r.Stderr} {
		if l.Digest != "" {
			if err := l.Digest.Validate(); err != nil {
				return fmt.Errorf("log: %w", err)
			}
		}
	}
	for _, a := range r.Attestations {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("attestation: %w", err)
		}
	}
	if !r.Started.IsZero() && r.Finished.Before(r.Started) {
		return fmt.Errorf("finished (%s) before it started (%s)", r.Finished, r.Started)
	}
	return nil
}

// Backend stores records as bytes; *state.DB implements it.
type Backend interface {
	PutActionRecord(ctx context.Context, action digest.Digest, record []byte) error
	PutActionRecords(ctx context.Context, recs []state.ActionRecordEntry) error
	ActionRecords(ctx context.Context, actions []digest.Digest) (map[digest.Digest][]byte, error)
	UpdateActionRecord(ctx context.Context, action digest.Digest, fn func(old []byte) ([]byte, error)) error
	DeleteActionRecord(ctx context.Context, action digest.Digest) (bool, error)
	EachActionRecord(ctx context.Context, fn func(action digest.Digest, record []byte) error) error
}

var _ Backend = (*state.DB)(nil)

// Cache is the action cache over a record backend and a content store.
type Cache struct {
	b Backend
	s *store.Store
}

// New returns the action cache that keeps records in b and checks blobs in s.
func New(b Backend, s *store.Store) *Cache { return &Cache{b: b, s: s} }

// prepare validates r, checks its blobs and encodes it.
func (c *Cache) prepare(r *Result) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("cache: refusing to store a nil result")
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("cache: refusing to store %s: %w", r.Action, err)
	}
	var missing []digest.Digest
	bc := newBlobCheck()
	for _, o := range r.Outputs {
		m, err := c.missingBlobs(o, bc)
		if err != nil {
			return nil, fmt.Errorf("cache: store %s: %w", r.Action, err)
		}
		missing = append(missing, m...)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cache: refusing to store %s: %s: %w", r.Action, describe(missing), ErrMissingBlobs)
	}
	for _, o := range r.Outputs {
		if o.Kind != Tree || bc.valid[o.Digest] {
			continue
		}
		// Lookups only read a tree's file list; a tree is fully checked once, here.
		if _, err := c.s.ReadManifest(o.Digest); err != nil {
			return nil, fmt.Errorf("cache: refusing to store %s: output %s: %w", r.Action, o.Path, err)
		}
		bc.valid[o.Digest] = true
	}
	rec := *r
	rec.Version = RecordVersion
	rec.Outputs = append([]Output(nil), r.Outputs...)
	sort.Slice(rec.Outputs, func(i, j int) bool { return rec.Outputs[i].Path < rec.Outputs[j].Path })
	if rec.Attestations == nil {
		rec.Attestations = []digest.Digest{}
	}
	if rec.Duration == 0 && !rec.Started.IsZero() {
		rec.Duration = rec.Finished.Sub(rec.Started)
	}
	b, err := json.Marshal(&rec)
	if err != nil {
		return nil, fmt.Errorf("cache: encode %s: %w", r.Action, err)
	}
	return b, nil
}

// Put stores the record of a successful execution under r.Action, replacing any earlier
// one. It refuses (ErrNotSuccess) a failed, timed-out, OOM-killed or signalled result, and
// (ErrMissingBlobs) a result whose output blobs are not all in the store: store outputs
// first, then Put, then tell engine/state the node is done.
func (c *Cache) Put(ctx context.Context, r *Result) error {
	b, err := c.prepare(r)
	if err != nil {
		return err
	}
	if err := c.b.PutActionRecord(ctx, r.Action, b); err != nil {
		return fmt.Errorf("cache: store %s: %w", r.Action, err)
	}
	return nil
}

// PutMany stores many records in one transaction, with the same checks as Put; if any
// record is refused, none is stored.
func (c *Cache) PutMany(ctx context.Context, rs []*Result) error {
	recs := make([]state.ActionRecordEntry, 0, len(rs))
	for _, r := range rs {
		b, err := c.prepare(r)
		if err != nil {
			return err
		}
		recs = append(recs, state.ActionRecordEntry{Action: r.Action, Record: b})
	}
	if err := c.b.PutActionRecords(ctx, recs); err != nil {
		return fmt.Errorf("cache: store %d records: %w", len(rs), err)
	}
	return nil
}

// Entry is the outcome of looking one action up.
type Entry struct {
	// Result is the stored record, nil if there is none or it could not be decoded.
	Result *Result
	// Hit is true only if Result is a success and every output blob is in the store.
	Hit bool
	// Missing lists the output blobs (tree manifests and the files they list) that the
	// record names but the store lacks.
	Missing []digest.Digest
	// Reason says why it is a miss, for `foundry plan` and `explain`; empty on a hit.
	Reason string
}

// Lookup returns the record of action and whether it is a hit. A record whose output blobs
// are missing from the store is a miss: found is false and the record is still returned so
// the caller can report it; LookupMany says which blobs are missing.
func (c *Cache) Lookup(ctx context.Context, action digest.Digest) (*Result, bool, error) {
	m, err := c.LookupMany(ctx, []digest.Digest{action})
	if err != nil {
		return nil, false, err
	}
	e := m[action]
	return e.Result, e.Hit, nil
}

// LookupMany looks many actions up: one database query per chunk of actions and one lstat
// per distinct output blob (plus one read per distinct tree manifest). Chunks are checked
// in parallel, up to GOMAXPROCS. Every requested action has an entry in the result.
func (c *Cache) LookupMany(ctx context.Context, actions []digest.Digest) (map[digest.Digest]Entry, error) {
	// In digest order, each chunk's lookups walk one stretch of the table's index instead
	// of pages all over it.
	actions = slices.Clone(actions)
	slices.Sort(actions)
	const chunk = 2048
	workers := min(runtime.GOMAXPROCS(0), (len(actions)+chunk-1)/chunk)
	if workers <= 1 {
		out := make(map[digest.Digest]Entry, len(actions))
		return out, c.lookupChunk(ctx, actions, out, newBlobCheck())
	}
	bc := newBlobCheck() // shared by all chunks
	parts := make([]map[digest.Digest]Entry, 0, (len(actions)+chunk-1)/chunk)
	next := make(chan int)
	errs := make(chan error, workers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				part := make(map[digest.Digest]Entry, chunk)
				if err := c.lookupChunk(ctx, actions[i:min(i+chunk, len(actions))], part, bc); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				parts = append(parts, part)
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for i := 0; i < len(actions); i += chunk {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil when the channel is empty
	}
	if err != nil {
		return nil, err
	}
	out := make(map[digest.Digest]Entry, len(actions))
	for _, p := range parts {
		maps.Copy(out, p)
	}
	return out, nil
}

// lookupChunk looks actions up with one query and fills out.
func (c *Cache) lookupChunk(ctx context.Context, actions []digest.Digest, out map[digest.Digest]Entry, bc *blobCheck) error {
	raw, err := c.b.ActionRecords(ctx, actions)
	if err != nil {
		return fmt.Errorf("cache: lookup: %w", err)
	}
	for _, a := range actions {
		b, ok := raw[a]
		if !ok {
			out[a] = Entry{Reason: "no record of a successful execution"}
			continue
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			out[a] = Entry{Reason: fmt.Sprintf("stored record is unreadable: %v", err)}
			continue
		}
		if r.Action != a {
			out[a] = Entry{Reason: fmt.Sprintf("stored record is for action %s", r.Action)}
			continue
		}
		// Defence in depth: Put never stores a failure, but the database is a file.
		if err := r.Success(); err != nil {
			out[a] = Entry{Result: &r, Reason: "stored record is not a success"}
			continue
		}
		var missing []digest.Digest
		for _, o := range r.Outputs {
			m, err := c.missingBlobs(o, bc)
			if err != nil {
				return fmt.Errorf("cache: lookup %s: %w", a, err)
			}
			missing = append(missing, m...)
		}
		if len(missing) > 0 {
			out[a] = Entry{Result: &r, Missing: missing, Reason: describe(missing)}
			continue
		}
		out[a] = Entry{Result: &r, Hit: true}
	}
	return nil
}

// blobCheck memoizes, within one Put or LookupMany, which blobs are present and which
// blobs each tree lacks, so a blob shared by many records is checked once. It is safe for
// the concurrent chunks of LookupMany; the lock is never held across I/O (two chunks may
// check the same blob at once, which is harmless).
type blobCheck struct {
	mu      sync.Mutex
	present map[digest.Digest]bool
	trees   map[digest.Digest][]digest.Digest // tree → its missing blobs
	valid   map[digest.Digest]bool            // trees fully checked by ReadManifest (Put only)
}

func newBlobCheck() *blobCheck {
	return &blobCheck{present: map[digest.Digest]bool{}, trees: map[digest.Digest][]digest.Digest{}, valid: map[digest.Digest]bool{}}
}

func (bc *blobCheck) known(d digest.Digest) (present, ok bool) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	present, ok = bc.present[d]
	return present, ok
}

func (bc *blobCheck) setPresent(d digest.Digest, p bool) {
	bc.mu.Lock()
	bc.present[d] = p
	bc.mu.Unlock()
}

func (bc *blobCheck) tree(d digest.Digest) ([]digest.Digest, bool) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	m, ok := bc.trees[d]
	return m, ok
}

func (bc *blobCheck) setTree(d digest.Digest, missing []digest.Digest) {
	bc.mu.Lock()
	bc.trees[d] = missing
	bc.mu.Unlock()
}

// missingBlobs returns the blobs of one output that are not in the store: the file's blob,
// or a tree's manifest and the file blobs it lists.
func (c *Cache) missingBlobs(o Output, bc *blobCheck) ([]digest.Digest, error) {
	present := func(d digest.Digest) (bool, error) {
		if p, ok := bc.known(d); ok {
			return p, nil
		}
		p, err := c.s.Has(d)
		if err != nil {
			return false, err
		}
		bc.setPresent(d, p)
		return p, nil
	}
	if o.Kind == Tree {
		if m, ok := bc.tree(o.Digest); ok {
			return m, nil
		}
	}
	ok, err := present(o.Digest)
	if err != nil {
		return nil, err
	}
	if !ok {
		return []digest.Digest{o.Digest}, nil
	}
	if o.Kind != Tree {
		return nil, nil
	}
	files, err := c.s.TreeFiles(o.Digest)
	if err != nil {
		// A manifest that vanished or is not a manifest cannot be materialized: it
		// counts as missing, so the action runs again and stores a good one. Erring
		// towards a miss costs an execution, never a wrong hit.
		bc.setTree(o.Digest, []digest.Digest{o.Digest})
		return []digest.Digest{o.Digest}, nil
	}
	var missing []digest.Digest
	for _, f := range files {
		ok, err := present(f)
		if err != nil {
			return nil, err
		}
		if !ok && !slices.Contains(missing, f) {
			missing = append(missing, f)
		}
	}
	bc.setTree(o.Digest, missing)
	return missing, nil
}

func describe(missing []digest.Digest) string {
	const max = 3
	s := make([]string, 0, max)
	for i, d := range missing {
		if i == max {
			s = append(s, fmt.Sprintf("and %d more", len(missing)-max))
			break
		}
		s = append(s, string(d))
	}
	return fmt.Sprintf("%d output blob(s) missing from the store: %s", len(missing), strings.Join(s, ", "))
}

// AddAttestation appends an attestation blob to an action's record (provenance calls it
// after signing). The blob must already be in the store.
func (c *Cache) AddAttestation(ctx context.Context, action, att digest.Digest) error {
	if ok, err := c.s.Has(att); err != nil || !ok {
		return fmt.Errorf("cache: attestation %s for %s is not in the store (%v)", att, action, err)
	}
	err := c.b.UpdateActionRecord(ctx, action, func(old []byte) ([]byte, error) {
		var r Result
		if err := json.Unmarshal(old, &r); err != nil {
			return nil, fmt.Errorf("decode record: %w", err)
		}
		for _, a := range r.Attestations {
			if a == att {
				return old, nil
			}
		}
		r.Attestations = append(r.Attestations, att)
		return json.Marshal(&r)
	})
	if err != nil {
		return fmt.Errorf("cache: add attestation to %s: %w", action, err)
	}
	return nil
}

// Evict removes an action's record (for example when one of its outputs is quarantined);
// the next apply executes the action again.
func (c *Cache) Evict(ctx context.Context, action digest.Digest) (bool, error) {
	ok, err := c.b.DeleteActionRecord(ctx, action)
	if err != nil {
		return false, fmt.Errorf("cache: evict %s: %w", action, err)
	}
	return ok, nil
}

// LiveBlobs returns every blob any record references: outputs (trees by manifest; GC
// follows manifests), logs, the definition and attestations. Unreadable records are
// skipped: they are misses anyway.
func (c *Cache) LiveBlobs(ctx context.Context) ([]digest.Digest, error) {
	seen := map[digest.Digest]bool{}
	var out []digest.Digest
	add := func(d digest.Digest) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	err := c.b.EachActionRecord(ctx, func(_ digest.Digest, b []byte) error {
		var r Result
		if json.Unmarshal(b, &r) != nil {
			return nil
		}
		for _, o := range r.Outputs {
			add(o.Digest)
		}
		add(r.Definition)
		add(r.Stdout.Digest)
		add(r.Stderr.Digest)
		for _, a := range r.Attestations {
			add(a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache: live blobs: %w", err)
	}
	return out, nil
}

// GC deletes every blob in the store that neither a cache record nor extra references
// (see store.GC). Records stored while it runs are protected only by opt.MinAge, so run it
// under the project lock or with a MinAge.
func (c *Cache) GC(ctx context.Context, extra []digest.Digest, opt store.GCOptions) (store.GCStats, error) {
	roots, err := c.LiveBlobs(ctx)
	if err != nil {
		return store.GCStats{}, err
	}
	roots = append(roots, extra...)
	st, err := c.s.GC(roots, opt)
	if err != nil {
		return st, fmt.Errorf("cache: %w", err)
	}
	return st, nil
}
