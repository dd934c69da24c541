package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
)

type fakeQuarantine map[digest.Digest]string

func (q fakeQuarantine) QuarantinedAmong(_ context.Context, ds []digest.Digest) (map[digest.Digest]string, error) {
	out := map[digest.Digest]string{}
	for _, d := range ds {
		if r, ok := q[d]; ok {
			out[d] = r
		}
	}
	return out, nil
}

func TestPublishAttachPull(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		f := newFixture(t)
		md, err := Publish(bg, s, f.src, f.capability("stable"))
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
		again, err := Publish(bg, s, f.src, f.capability(""))
		if err != nil || again != md {
			t.Fatalf("publishing the same capability again = %s, %v; want %s (deterministic)", again, err, md)
		}
		raw, mt, err := s.Manifest(bg, md)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseCapability(raw)
		if err != nil || mt != MediaTypeManifest {
			t.Fatalf("published manifest (%s): %v", mt, err)
		}
		if m.Annotations[AnnotationTree] != string(f.tree) || m.Annotations[AnnotationTitle] != "int-sort" ||
			m.Config.MediaType != MediaTypeContract {
			t.Fatalf("manifest = %s", raw)
		}

		dest := filepath.Join(t.TempDir(), "out")
		// Unverified pulls must be asked for.
		if _, err := Pull(bg, s, "stable", dest, PullOptions{}); err == nil {
			t.Fatal("Pull without keys and without NoVerify succeeded")
		}
		// No attestation yet: refused, nothing written.
		_, err = Pull(bg, s, "stable", dest, PullOptions{Keys: f.keys})
		var ve *VerificationError
		if !errors.As(err, &ve) {
			t.Fatalf("Pull with nothing attached = %v, want a VerificationError", err)
		}
		assertAbsent(t, dest)

		// Provenance naming the manifest digest (what cosign checks) and a second statement
		// naming the tree (what a packaging step's provenance names).
		env1 := f.attest(t, "capability", md)
		env2 := f.attest(t, "package", f.tree)
		a1, err := Attach(bg, s, md, env1, provenance.PredicateSLSAProvenance)
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		if a1.Digest != digest.Digest(provenance.EnvelopeDigest(env1)) {
			t.Fatalf("attestation digest %s, want the envelope's %s", a1.Digest, provenance.EnvelopeDigest(env1))
		}
		if _, err := Attach(bg, s, md, env2, ""); err != nil {
			t.Fatalf("Attach: %v", err)
		}
		if _, err := Attach(bg, s, md, env1, ""); err != nil { // idempotent
			t.Fatalf("Attach again: %v", err)
		}
		if _, err := Attach(bg, s, md, env1, "https://example.com/other"); err == nil {
			t.Fatal("Attach with a predicate type the statement does not have succeeded")
		}
		atts, _, err := Referrers(bg, s, md)
		if err != nil {
			t.Fatalf("Referrers: %v", err)
		}
		if len(atts) != 2 {
			t.Fatalf("Referrers = %d attestations, want 2", len(atts))
		}
		for _, a := range atts {
			if string(a.Envelope) != string(env1) && string(a.Envelope) != string(env2) {
				t.Fatalf("envelope bytes changed on the way: %s", a.Envelope)
			}
			if a.PredicateType != provenance.PredicateSLSAProvenance {
				t.Fatalf("predicate type %q", a.PredicateType)
			}
		}

		got, err := Pull(bg, s, "stable", dest, PullOptions{Keys: f.keys})
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		if !got.Verified || got.Digest != md || got.Tree != f.tree || got.VerifiedSubject != md {
			t.Fatalf("Pulled = %+v", got)
		}
		_, td, err := digest.Dir(dest)
		if err != nil || td != f.tree {
			t.Fatalf("pulled tree %s, %v; want %s", td, err, f.tree)
		}

		// By digest, with the repository prefix a user would copy from a listing.
		dest2 := filepath.Join(t.TempDir(), "out")
		if _, err := Pull(bg, s, s.String()+"@"+string(md), dest2, PullOptions{Keys: f.keys}); err != nil {
			t.Fatalf("Pull by digest: %v", err)
		}

		// A key that signed nothing here: refused before anything is written.
		other := newFixture(t)
		dest3 := filepath.Join(t.TempDir(), "out")
		if _, err := Pull(bg, s, string(md), dest3, PullOptions{Keys: other.keys}); !errors.As(err, &ve) {
			t.Fatalf("Pull with an untrusted key = %v, want a VerificationError", err)
		}
		assertAbsent(t, dest3)

		// Quarantine: by manifest digest and by tree digest.
		for _, q := range []digest.Digest{md, f.tree} {
			_, err := Pull(bg, s, "stable", dest3, PullOptions{Keys: f.keys, Quarantine: fakeQuarantine{q: "CVE-2026-0001"}})
			var qe *QuarantinedError
			if !errors.As(err, &qe) || qe.Digest != q {
				t.Fatalf("Pull of quarantined %s = %v", q, err)
			}
			assertAbsent(t, dest3)
		}

		// The provenance source sees the same attestations.
		rep, err := provenance.Verify(bg, provenance.Options{Keys: f.keys, Source: RemoteSource{s}},
			provenance.Subject{Name: "cap", Digest: string(md)})
		if err != nil || !rep.OK {
			t.Fatalf("provenance.Verify through RemoteSource: ok=%v err=%v", rep != nil && rep.OK, err)
		}
	})
}

func assertAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Fatalf("%s was written", p)
	}
}

// TestConcurrentAttach attaches many envelopes to one subject at once: the referrers tag
// index (distribution) and index.json (layout) must keep every one.
func TestConcurrentAttach(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		f := newFixture(t)
		md, err := Publish(bg, s, f.src, f.capability(""))
		if err != nil {
			t.Fatal(err)
		}
		const n = 12
		envs := make([][]byte, n)
		for i := range envs {
			envs[i] = f.attest(t, fmt.Sprintf("step%d", i), md)
		}
		// Two handles on one store, as two processes would have for a layout.
		stores := []Store{s, s}
		if l, ok := s.(*Layout); ok {
			l2, err := OpenLayout(l.Dir())
			if err != nil {
				t.Fatal(err)
			}
			stores[1] = l2
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range envs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = Attach(bg, stores[i%2], md, envs[i], "")
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("attach %d: %v", i, err)
			}
		}
		atts, _, err := Referrers(bg, s, md)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, a := range atts {
			got = append(got, string(a.Digest))
		}
		for _, e := range envs {
			want = append(want, provenance.EnvelopeDigest(e))
		}
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after %d concurrent attaches, %d referrers", n, len(got))
		}
		// cosign's .att image holds every envelope too.
		attRaw, _, err := fetchManifest(bg, s, mustResolve(t, s, cosignAttTag(md)))
		if err != nil {
			t.Fatal(err)
		}
		var am Manifest
		must(t, json.Unmarshal(attRaw, &am))
		if len(am.Layers) != n {
			t.Fatalf(".att image has %d layers, want %d", len(am.Layers), n)
		}
	})
}

func mustResolve(t *testing.T, s Store, tag string) digest.Digest {
	t.Helper()
	d, err := s.Resolve(bg, tag)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestServePersists restarts the served layout and finds what a client pushed through it.
func TestServePersists(t *testing.T) {
	addr, l := startServe(t)
	s, err := Open(addr + "/foundry")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	md, err := Publish(bg, s, f.src, f.capability("stable"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(bg, s, md, f.attest(t, "cap", md), ""); err != nil {
		t.Fatal(err)
	}
	// A second server over the same directory: a restart.
	l2, err := OpenLayout(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l2.Resolve(bg, "stable"); err != nil || d != md {
		t.Fatalf("layout after serve: tag stable = %s, %v", d, err)
	}
	h, err := Handler(l2, "foundry", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr2 := startHandler(t, h)
	s2, _ := Open(addr2 + "/foundry")
	if _, err := Pull(bg, s2, "stable", filepath.Join(t.TempDir(), "out"), PullOptions{Keys: f.keys}); err != nil {
		t.Fatalf("pull after restart: %v", err)
	}
	// Tags are per repository: another repository does not have this one.
	s3, _ := Open(addr2 + "/other")
	if _, err := s3.Resolve(bg, "stable"); err == nil {
		t.Fatal("resolved a tag in a repository the server does not serve")
	}
}
