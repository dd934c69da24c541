package temporal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

func newSigner(t testing.TB) (*provenance.Signer, *provenance.Verifier) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := provenance.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Verifier("test key")
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// sharedFixture is a genuine shared record of action key with one output, and the
// provenance that vouches for it, signed by s; edit changes the execution before it is
// signed, rec the record after.
func sharedFixture(t testing.TB, s *provenance.Signer, key digest.Digest, edit func(*provenance.Execution), rec func(*cache.Result)) registry.SharedRecord {
	t.Helper()
	out := digest.FromBytes([]byte("the output\n"))
	e := &provenance.Execution{
		InvocationID: "run/step.x/1", Executor: "runc", Isolation: provenance.IsolationContainer,
		Versions: map[string]string{"foundry": "dev", "worker": "w1"}, Step: json.RawMessage(`{"run":["true"]}`),
		ActionDigest: string(digest.FromBytes([]byte("action"))), CacheKey: string(key), Platform: "linux/amd64",
		Network: provenance.Network{Mode: "none"}, User: "65534:65534",
		Image:     provenance.Dependency{Name: "image", URI: "foundry:seed.s", Digest: string(digest.FromBytes([]byte("image")))},
		Outputs:   []provenance.Artifact{{Name: "/out/x", Digest: string(out)}},
		StartedOn: time.Unix(1000, 0).UTC(), FinishedOn: time.Unix(1001, 0).UTC(),
	}
	if edit != nil {
		edit(e)
	}
	st, err := provenance.NewProvenance(e)
	if err != nil {
		t.Fatal(err)
	}
	env, err := provenance.Sign(s, st)
	if err != nil {
		t.Fatal(err)
	}
	res := &cache.Result{Version: cache.RecordVersion, Action: key, Executor: "runc", Isolation: "container",
		Outputs:      []cache.Output{{Path: "/out/x", Kind: cache.File, Digest: out, Size: 11, Mode: 0o644}},
		Attestations: []digest.Digest{digest.FromBytes(env)}, Started: e.StartedOn, Finished: e.FinishedOn}
	if rec != nil {
		rec(res)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return registry.SharedRecord{Record: raw, Envelopes: [][]byte{env}}
}

// A shared record is taken only when a trusted, sandboxed provenance binds its cache key to
// exactly its outputs; each way of breaking that is refused, for what it is.
func TestRecordsVerify(t *testing.T) {
	signer, trusted := newSigner(t)
	other, _ := newSigner(t)
	key := digest.FromBytes([]byte("cache key"))
	s := &Records{Keys: []*provenance.Verifier{trusted}}
	for _, tc := range []struct {
		name   string
		signer *provenance.Signer
		edit   func(*provenance.Execution)
		rec    func(*cache.Result)
		want   string // "" accepted, else a part of why it was refused
	}{
		{name: "genuine"},
		{name: "untrusted key", signer: other, want: "no signature verifies"},
		{name: "unsandboxed", edit: func(e *provenance.Execution) { e.Executor, e.Isolation = "local", provenance.IsolationNone }, want: "not a sandboxed executor"},
		{name: "another cache key", edit: func(e *provenance.Execution) { e.CacheKey = string(digest.FromBytes([]byte("other"))) }, want: "its provenance is of cache key"},
		{name: "output swapped", rec: func(r *cache.Result) { r.Outputs[0].Digest = digest.FromBytes([]byte("forged")) }, want: "other outputs"},
		{name: "output added", rec: func(r *cache.Result) {
			r.Outputs = append(r.Outputs, cache.Output{Path: "/out/y", Kind: cache.File, Digest: digest.FromBytes([]byte("y"))})
		}, want: "other outputs"},
		{name: "another action", rec: func(r *cache.Result) { r.Action = digest.FromBytes([]byte("else")) }, want: "another action"},
		{name: "a failure", rec: func(r *cache.Result) { r.ExitCode = 1 }, want: "exited with code 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sg := signer
			if tc.signer != nil {
				sg = tc.signer
			}
			res, why := s.verify(key, sharedFixture(t, sg, key, tc.edit, tc.rec))
			switch {
			case tc.want == "" && why != "":
				t.Fatalf("refused: %s", why)
			case tc.want == "" && (res == nil || len(res.Attestations) != 1):
				t.Fatalf("accepted without its attestation: %+v", res)
			case tc.want != "" && !strings.Contains(why, tc.want):
				t.Fatalf("refused as %q, want %q (accepted: %v)", why, tc.want, res != nil)
			}
		})
	}
	// Without any envelope nothing vouches for the record.
	sr := sharedFixture(t, signer, key, nil, nil)
	sr.Envelopes = nil
	if _, why := s.verify(key, sr); !strings.Contains(why, "no provenance") {
		t.Errorf("a record without provenance: %q", why)
	}
}

// Whatever a registry serves as a shared record, verify never panics, and what it accepts
// is a success of the key asked for, vouched for by an envelope it was given.
func FuzzSharedRecord(f *testing.F) {
	signer, trusted := newSigner(f)
	key := digest.FromBytes([]byte("cache key"))
	good := sharedFixture(f, signer, key, nil, nil)
	f.Add(good.Record, good.Envelopes[0])
	f.Add([]byte(`{"action":"`+string(key)+`"}`), good.Envelopes[0])
	f.Add(good.Record, []byte(`{"payloadType":"application/vnd.in-toto+json","payload":"","signatures":[]}`))
	s := &Records{Keys: []*provenance.Verifier{trusted}}
	f.Fuzz(func(t *testing.T, record, envelope []byte) {
		res, why := s.verify(key, registry.SharedRecord{Record: record, Envelopes: [][]byte{envelope}})
		if why != "" {
			return
		}
		if res.Action != key || res.Success() != nil || len(res.Attestations) != 1 || res.Attestations[0] != digest.FromBytes(envelope) {
			t.Fatalf("accepted %+v", res)
		}
	})
}
