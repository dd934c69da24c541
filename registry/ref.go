package registry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/foundry-build/foundry/digest"
)

// SplitReference splits a full reference into a store address (for Open) and a tag or
// digest (for Pull):
//
//	host[:port]/repo:TAG           → host[:port]/repo, TAG
//	host[:port]/repo@sha256:HEX    → host[:port]/repo, sha256:HEX
//	oci-layout:PATH:TAG            → oci-layout:PATH, TAG
//	oci-layout:PATH@sha256:HEX     → oci-layout:PATH, sha256:HEX
//
// A reference without a tag or digest is refused: Foundry never guesses "latest".
func SplitReference(s string) (addr, ref string, err error) {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		d, err := digest.Parse(s[i+1:])
		if err != nil {
			return "", "", fmt.Errorf("reference %q: %w", s, err)
		}
		if s[:i] == "" {
			return "", "", fmt.Errorf("reference %q: no repository before @", s)
		}
		return s[:i], string(d), nil
	}
	slash := strings.LastIndex(s, "/")
	colon := strings.LastIndex(s, ":")
	if colon > slash && colon < len(s)-1 && s[:colon] != strings.TrimSuffix(LayoutScheme, ":") && s[:colon] != "" {
		return s[:colon], s[colon+1:], nil
	}
	return "", "", fmt.Errorf("reference %q has no tag or digest (want REPO:TAG or REPO@sha256:HEX)", s)
}

// OpenReference opens the store a full reference names and resolves it to a manifest
// digest, resolving a tag exactly once. It is what a command that takes "REPO:TAG" or
// "REPO@sha256:HEX" (foundry verify with OCI references) needs before it looks anything up
// by digest: afterwards only the digest is used.
func OpenReference(ctx context.Context, ref string) (Store, digest.Digest, error) {
	addr, tagOrDigest, err := SplitReference(ref)
	if err != nil {
		return nil, "", err
	}
	s, err := Open(addr)
	if err != nil {
		return nil, "", err
	}
	d, err := resolveRef(ctx, s, tagOrDigest)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", ref, err)
	}
	return s, d, nil
}

// ReadOnly wraps a registry handler so that only reads (GET, HEAD) reach it; writes get
// 405 UNSUPPORTED. foundry registry serve uses it when listening beyond loopback without
// -allow-push, since the server has no authentication.
func ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only (foundry registry serve without -allow-push)")
			return
		}
		h.ServeHTTP(w, r)
	})
}
