package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// GCOptions tune a collection.
type GCOptions struct {
	// MinAge spares blobs modified less than MinAge ago, so that a blob another process
	// has just stored but not yet recorded anywhere survives. Use 0 only when no other
	// process can be writing (the caller holds the project lock).
	MinAge time.Duration
	// DryRun reports what would be deleted without deleting it.
	DryRun bool
}

// GCStats reports a collection.
type GCStats struct {
	Live         int   // blobs reachable from the roots and present
	Deleted      int   // blobs deleted (or that would be, in a dry run)
	BytesFreed   int64 // their total size
	Spared       int   // unreachable blobs younger than MinAge
	MissingRoots int   // roots (or tree entries) not in the store
}

// GC deletes every blob that is not reachable from roots. A root that is a tree manifest
// keeps the manifest and every file blob it lists; any root that parses as a canonical
// manifest is treated as one, which can only keep more, never less. Callers build roots
// from everything that must survive — engine/cache's LiveBlobs gives the blobs of every
// cache entry — so GC never deletes a blob referenced by a live cache entry.
func (s *Store) GC(roots []digest.Digest, opt GCOptions) (GCStats, error) {
	var st GCStats
	live := make(map[digest.Digest]bool, len(roots))
	for _, r := range roots {
		if err := r.Validate(); err != nil {
			return st, fmt.Errorf("store: gc: root %w", err)
		}
		if live[r] {
			continue
		}
		if ok, err := s.Has(r); err != nil {
			return st, fmt.Errorf("store: gc: %w", err)
		} else if !ok {
			st.MissingRoots++
			continue
		}
		live[r] = true
		isTree, err := s.IsTree(r)
		if err != nil && !errors.Is(err, ErrDigestMismatch) {
			return st, fmt.Errorf("store: gc: %w", err)
		}
		if !isTree {
			continue
		}
		m, err := s.ReadManifest(r)
		if err != nil {
			return st, fmt.Errorf("store: gc: %w", err)
		}
		for _, e := range m.Entries {
			if e.Type != digest.TypeFile || live[e.Digest] {
				continue
			}
			if ok, _ := s.Has(e.Digest); !ok {
				st.MissingRoots++
				continue
			}
			live[e.Digest] = true
		}
	}
	st.Live = len(live)
	cutoff := time.Now().Add(-opt.MinAge)
	err := s.Walk(func(d digest.Digest, size int64, mod time.Time) error {
		if live[d] {
			return nil
		}
		if opt.MinAge > 0 && mod.After(cutoff) {
			st.Spared++
			return nil
		}
		if !opt.DryRun {
			if err := s.Delete(d); err != nil {
				return err
			}
		}
		st.Deleted++
		st.BytesFreed += size
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("store: gc: %w", err)
	}
	if !opt.DryRun && st.Deleted > 0 {
		if err := s.syncDir(); err != nil {
			return st, err
		}
	}
	return st, nil
}
