package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Records shares action-cache records through the registry (spec/temporal.md §3): once a
// step has succeeded its apply pushes the record with its outputs, logs, definition and
// provenance; an apply that misses its own cache looks the cache key up there, and takes a
// record only if a provenance signed by one of its trusted keys, for a sandboxed execution,
// names that cache key and exactly the record's outputs. Then it fetches every blob, checked
// against its digest, and keeps the record in its own cache.
type Records struct {
	Registry registry.Store
	WS       *workspace.Workspace
	// Keys are the signers whose records are looked for and taken.
	Keys []*provenance.Verifier
	// Signer is the ID of the key this apply signs with: its records are pushed under it.
	Signer string
}

// Record shares res. A record no provenance vouches for (a step that made nothing) is not
// shared: nobody could verify it.
func (s *Records) Record(ctx context.Context, res *cache.Result) error {
	if len(res.Attestations) == 0 {
		return nil
	}
	st := s.WS.Store
	for _, o := range res.Outputs {
		var err error
		if o.Kind == cache.Tree {
			_, err = registry.PushTree(ctx, s.Registry, st, o.Digest)
		} else {
			_, err = registry.PushBlob(ctx, s.Registry, st, o.Digest)
		}
		if err != nil {
			return err
		}
	}
	for _, l := range []cache.Log{res.Stdout, res.Stderr} {
		if l.Digest != "" {
			if _, err := registry.PushBlob(ctx, s.Registry, st, l.Digest); err != nil {
				return err
			}
		}
	}
	shared := registry.SharedRecord{}
	var err error
	if shared.Record, err = json.Marshal(res); err != nil {
		return err
	}
	if res.Definition != "" {
		if shared.Definition, err = st.Get(res.Definition); err != nil {
			return err
		}
	}
	for _, a := range res.Attestations {
		env, err := st.Get(a)
		if err != nil {
			return err
		}
		shared.Envelopes = append(shared.Envelopes, env)
	}
	return registry.PutRecord(ctx, s.Registry, res.Action, s.Signer, shared)
}

// Lookup returns the shared record of key once verified and fetched, or nil when the
// registry has none under any trusted key. A record found that does not verify is refused:
// refused says why, and the step runs as if there were none.
func (s *Records) Lookup(ctx context.Context, key digest.Digest) (res *cache.Result, refused string, err error) {
	var shared registry.SharedRecord
	for _, k := range s.Keys {
		found := false
		if shared, found, err = registry.GetRecord(ctx, s.Registry, key, k.KeyID); err != nil {
			return nil, "", err
		}
		if !found {
			continue
		}
		if res, refused = s.verify(key, shared); res != nil {
			break
		}
	}
	if res == nil {
		return nil, refused, nil
	}
	if err := s.fetch(ctx, res, shared); err != nil {
		return nil, "", err
	}
	if err := s.WS.Cache.Put(ctx, res); err != nil {
		return nil, "", err
	}
	return res, "", nil
}

// verify decodes the record and checks it against its provenance; why is "" when it holds.
func (s *Records) verify(key digest.Digest, shared registry.SharedRecord) (res *cache.Result, why string) {
	res = &cache.Result{}
	dec := json.NewDecoder(bytes.NewReader(shared.Record))
	dec.DisallowUnknownFields()
	if err := dec.Decode(res); err != nil {
		return nil, fmt.Sprintf("the record does not decode: %v", err)
	}
	if res.Action != key {
		return nil, fmt.Sprintf("the record is of another action (%s)", res.Action.Short())
	}
	if err := res.Success(); err != nil {
		return nil, err.Error()
	}
	if res.Definition != "" && digest.FromBytes(shared.Definition) != res.Definition {
		return nil, "the record's definition does not match its digest"
	}
	// The subjects a step's provenance has: its outputs, or a check's result named by key.
	want := map[string]string{}
	for _, o := range res.Outputs {
		want[o.Path] = string(o.Digest)
	}
	if len(want) == 0 {
		want[provenance.CheckResultSubject] = string(key)
	}
	var vouched []digest.Digest
	last := "no provenance comes with it"
	for _, env := range shared.Envelopes {
		d := digest.FromBytes(env)
		claim, err := provenance.OpenExecution(env, s.Keys)
		switch {
		case err != nil:
			last = err.Error()
		case claim.CacheKey != string(key):
			last = fmt.Sprintf("its provenance is of cache key %s", digest.Digest(claim.CacheKey).Short())
		case !maps.Equal(claim.Subjects, want):
			last = "its provenance names other outputs than the record"
		default:
			vouched = append(vouched, d)
		}
	}
	if len(vouched) == 0 {
		return nil, last
	}
	// Only what was verified is kept with the record.
	res.Attestations = vouched
	return res, ""
}

// fetch brings the record's blobs into the workspace: outputs, logs, definition, envelopes.
func (s *Records) fetch(ctx context.Context, res *cache.Result, shared registry.SharedRecord) error {
	st := s.WS.Store
	for _, o := range res.Outputs {
		var err error
		if o.Kind == cache.Tree {
			err = registry.FetchTree(ctx, s.Registry, st, o.Digest, o.Size)
		} else {
			err = registry.FetchBlob(ctx, s.Registry, st, o.Digest, o.Size)
		}
		if err != nil {
			return err
		}
	}
	for _, l := range []cache.Log{res.Stdout, res.Stderr} {
		if l.Digest != "" {
			if err := registry.FetchBlob(ctx, s.Registry, st, l.Digest, l.Size); err != nil {
				return err
			}
		}
	}
	if len(shared.Definition) > 0 {
		if _, err := st.PutBytes(shared.Definition); err != nil {
			return err
		}
	}
	keep := map[digest.Digest]bool{}
	for _, a := range res.Attestations {
		keep[a] = true
	}
	for _, env := range shared.Envelopes {
		if !keep[digest.FromBytes(env)] {
			continue
		}
		if _, err := st.PutBytes(env); err != nil {
			return err
		}
		if _, err := provenance.WriteEnvelope(s.WS.AttestationDir(), env); err != nil {
			return err
		}
	}
	return nil
}
