package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/foundry-build/foundry/digest"
)

// ErrDigestMismatch is wrapped when content does not match the digest or size it was asked
// for: a registry (or a disk) returned something else.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrTooLarge is wrapped when content exceeds a size limit.
var ErrTooLarge = errors.New("too large")

// fetchManifest gets manifest d and checks that its bytes hash to d, whatever the store
// claims: the digest of the exact bytes is the identity, never a re-serialization.
func fetchManifest(ctx context.Context, s Store, d digest.Digest) ([]byte, string, error) {
	raw, mt, err := s.Manifest(ctx, d)
	if err != nil {
		return nil, "", err
	}
	if len(raw) > MaxManifestSize {
		return nil, "", fmt.Errorf("%s: manifest of %d bytes: %w (limit %d)", refString(s, d), len(raw), ErrTooLarge, MaxManifestSize)
	}
	if got := digest.FromBytes(raw); got != d {
		return nil, "", fmt.Errorf("%s: manifest bytes hash to %s: %w", refString(s, d), got, ErrDigestMismatch)
	}
	return raw, mt, nil
}

// fetchBlobBytes reads a small blob whole (a config, an envelope), checked against desc.
func fetchBlobBytes(ctx context.Context, s Store, desc Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("%s: blob of %d bytes: %w (limit %d)", refString(s, desc.Digest), desc.Size, ErrTooLarge, limit)
	}
	if desc.Data != nil { // checked against size and digest when the descriptor was parsed
		return desc.Data, nil
	}
	rc, err := openVerified(ctx, s, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// openVerified opens blob desc.Digest and returns a reader that yields at most desc.Size
// bytes and fails at the end unless exactly desc.Size bytes hashing to desc.Digest came.
// Callers must read to EOF before trusting anything they read.
func openVerified(ctx context.Context, s Store, desc Descriptor) (io.ReadCloser, error) {
	rc, err := s.Blob(ctx, desc.Digest)
	if err != nil {
		return nil, err
	}
	return &verifyReader{rc: rc, r: io.LimitReader(rc, desc.Size+1), h: sha256.New(), want: desc, where: refString(s, desc.Digest)}, nil
}

type verifyReader struct {
	rc    io.ReadCloser
	r     io.Reader
	h     hash.Hash
	n     int64
	want  Descriptor
	where string
	err   error
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.want.Size {
		v.err = fmt.Errorf("%s: blob is longer than its descriptor's %d bytes: %w", v.where, v.want.Size, ErrDigestMismatch)
		return 0, v.err
	}
	if err == io.EOF {
		got := digest.Digest("sha256:" + hex.EncodeToString(v.h.Sum(nil)))
		if v.n != v.want.Size || got != v.want.Digest {
			v.err = fmt.Errorf("%s: blob has %d bytes with digest %s, want %d bytes: %w", v.where, v.n, got, v.want.Size, ErrDigestMismatch)
			return n, v.err
		}
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }
