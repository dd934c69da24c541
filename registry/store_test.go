package registry

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// TestStoreConformance holds every Store to the same contract: what one backend does, the
// others do, so the verbs on top need not know which they talk to.
func TestStoreConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		blob := []byte("hello blob")
		bd := digest.FromBytes(blob)
		if err := putBytes(bg, s, bd, blob); err != nil {
			t.Fatalf("PutBlob: %v", err)
		}
		if err := putBytes(bg, s, bd, blob); err != nil {
			t.Fatalf("PutBlob twice: %v", err)
		}
		rc, err := s.Blob(bg, bd)
		if err != nil {
			t.Fatalf("Blob: %v", err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != string(blob) {
			t.Fatalf("Blob = %q, want %q", got, blob)
		}

		// Single-pass upload, where the store has it (both backends do).
		bs, ok := s.(blobStreamer)
		if !ok {
			t.Fatalf("%T cannot stream blobs", s)
		}
		streamed := []byte(strings.Repeat("streamed ", 10000))
		sd, sn, err := bs.putBlobStream(bg, strings.NewReader(string(streamed)))
		if err != nil || sd != digest.FromBytes(streamed) || sn != int64(len(streamed)) {
			t.Fatalf("putBlobStream = %s, %d, %v", sd, sn, err)
		}
		rc, err = s.Blob(bg, sd)
		if err != nil {
			t.Fatal(err)
		}
		got, _ = io.ReadAll(rc)
		rc.Close()
		if string(got) != string(streamed) {
			t.Fatal("streamed blob reads back differently")
		}

		// Content that does not match its digest never becomes the blob.
		wrong := digest.FromBytes([]byte("other"))
		if err := putBytes(bg, s, wrong, blob); err == nil {
			t.Fatal("PutBlob with a wrong digest succeeded")
		}

		cfg := descriptorOf(MediaTypeEmpty, emptyJSON)
		must(t, putBytes(bg, s, cfg.Digest, emptyJSON))
		m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: "application/vnd.test",
			Config: cfg, Layers: []Descriptor{{MediaType: "application/octet-stream", Digest: bd, Size: int64(len(blob))}}}
		raw, _ := json.Marshal(m)
		md, err := s.PutManifest(bg, raw, MediaTypeManifest)
		if err != nil {
			t.Fatalf("PutManifest: %v", err)
		}
		if md != digest.FromBytes(raw) {
			t.Fatalf("PutManifest digest %s, want %s", md, digest.FromBytes(raw))
		}
		back, mt, err := s.Manifest(bg, md)
		if err != nil {
			t.Fatalf("Manifest: %v", err)
		}
		if string(back) != string(raw) || mt != MediaTypeManifest {
			t.Fatalf("Manifest = %q (%s), want the exact bytes pushed", back, mt)
		}
		must(t, s.Tag(bg, "stable", md))
		if d, err := s.Resolve(bg, "stable"); err != nil || d != md {
			t.Fatalf("Resolve(stable) = %s, %v; want %s", d, err, md)
		}

		if _, err := s.Resolve(bg, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Resolve(missing) = %v, want ErrNotFound", err)
		}
		missing := digest.FromBytes([]byte("missing"))
		if _, _, err := s.Manifest(bg, missing); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Manifest(missing) = %v, want ErrNotFound", err)
		}
		if rc, err := s.Blob(bg, missing); err == nil {
			// Some registries answer a missing blob only when it is read.
			_, rerr := io.ReadAll(rc)
			rc.Close()
			if rerr == nil {
				t.Fatal("Blob(missing) succeeded")
			}
		}

		refs, err := s.Referrers(bg, md)
		if err != nil || len(refs) != 0 {
			t.Fatalf("Referrers before any = %v, %v", refs, err)
		}
		sub := Descriptor{MediaType: MediaTypeManifest, Digest: md, Size: int64(len(raw))}
		r := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: "application/vnd.test.ref",
			Config: cfg, Layers: []Descriptor{{MediaType: "application/octet-stream", Digest: bd, Size: int64(len(blob))}},
			Subject: &sub}
		rraw, _ := json.Marshal(r)
		rd, err := s.PushReferrer(bg, rraw, MediaTypeManifest)
		if err != nil {
			t.Fatalf("PushReferrer: %v", err)
		}
		refs, err = s.Referrers(bg, md)
		if err != nil {
			t.Fatalf("Referrers: %v", err)
		}
		if len(refs) != 1 || refs[0].Digest.String() != string(rd) {
			t.Fatalf("Referrers = %+v, want just %s", refs, rd)
		}
		if !strings.HasPrefix(s.String(), LayoutScheme) && strings.Contains(s.String(), "://") {
			t.Fatalf("String() = %q is not an address Open accepts", s.String())
		}
	})
}

func TestOpenAddresses(t *testing.T) {
	for _, bad := range []string{"oci-layout:", "http://127.0.0.1:5000/x", "UPPER CASE/x"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	s, err := Open("127.0.0.1:5000/foundry/caps")
	if err != nil || s.String() != "127.0.0.1:5000/foundry/caps" {
		t.Fatalf("Open remote = %v, %v", s, err)
	}
	// Plain HTTP is for loopback only.
	r, _ := OpenRemote("10.1.2.3:5000/x")
	if _, err := r.Resolve(bg, "latest"); err == nil || !strings.Contains(err.Error(), "plain HTTP") {
		t.Fatalf("resolve against an RFC 1918 host over HTTP: %v, want a refusal", err)
	}
}
