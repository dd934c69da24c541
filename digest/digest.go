// Package digest is Foundry's content addressing: SHA-256 digests of bytes,
// files and directory trees, and of JSON values after RFC 8785 (JCS)
// canonicalization.
//
// Everything Foundry caches or compares by identity (action digests, blobs in
// the local store, directory inputs) is addressed through this package, so two
// rules hold throughout:
//
//   - A digest is always of exact bytes. JSON is canonicalized first and the
//     digest is of the canonical bytes, which are returned beside it.
//   - A value outside JCS's domain (invalid UTF-8, lone surrogates, duplicate
//     keys, numbers that are not finite IEEE 754 doubles) is an error, never a
//     silent approximation: two different inputs must never be made to look
//     the same.
//
// This package must never follow symbolic links when hashing a tree, and never
// hash anything it could not reproduce from the same bytes on another machine
// (no timestamps, owners or inode numbers).
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// Algorithm is the only digest algorithm Foundry uses.
const Algorithm = "sha256"

const (
	prefix = Algorithm + ":"
	hexLen = sha256.Size * 2
)

// Digest is a content digest in the form "sha256:<64 lowercase hex digits>".
// The zero value is the empty string and is not a valid digest.
type Digest string

// Parse returns s as a Digest after checking that it has exactly the form
// "sha256:" followed by 64 lowercase hexadecimal digits.
func Parse(s string) (Digest, error) {
	d := Digest(s)
	if err := d.Validate(); err != nil {
		return "", err
	}
	return d, nil
}

// Validate reports whether d has the form "sha256:<64 lowercase hex>".
// Uppercase hex is rejected, so that every digest has exactly one spelling and
// digests can be compared as strings.
func (d Digest) Validate() error {
	s := string(d)
	if s == "" {
		return fmt.Errorf("digest: empty digest")
	}
	if !strings.HasPrefix(s, prefix) {
		return fmt.Errorf("digest: %s: want prefix %q", quoteShort(s), prefix)
	}
	h := s[len(prefix):]
	if len(h) != hexLen {
		return fmt.Errorf("digest: %s: want %d hex digits after %q, got %d", quoteShort(s), hexLen, prefix, len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("digest: %s: byte %d (%q) is not a lowercase hex digit", quoteShort(s), len(prefix)+i, c)
		}
	}
	return nil
}

// Hex returns the hexadecimal part of d, without the "sha256:" prefix. It
// does not validate d.
func (d Digest) Hex() string {
	return strings.TrimPrefix(string(d), prefix)
}

// String returns d in its full "sha256:<hex>" form.
func (d Digest) String() string { return string(d) }

// Short abbreviates d for people: "sha256:" and the first 12 hex digits.
func (d Digest) Short() string {
	s := string(d)
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

// FromBytes returns the SHA-256 digest of b.
func FromBytes(b []byte) Digest {
	sum := sha256.Sum256(b)
	return fromSum(sum[:])
}

// fromSum is the digest of a SHA-256 sum: the prefix and the hex written into one buffer,
// one allocation where concatenating hex.EncodeToString's string took two (every node of a
// plan, and every input hashed).
func fromSum(sum []byte) Digest {
	var b [len(prefix) + 2*sha256.Size]byte
	copy(b[:], prefix)
	hex.Encode(b[len(prefix):], sum)
	return Digest(b[:])
}

// FromReader returns the SHA-256 digest of everything read from r until EOF,
// and the number of bytes read.
func FromReader(r io.Reader) (Digest, int64, error) {
	d, n, err := hashReader(r)
	if err != nil {
		return "", n, fmt.Errorf("digest: %w", err)
	}
	return d, n, nil
}

// File returns the digest and size of the regular file at path. Unlike Dir it
// opens path with os.Open, so a symbolic link named by path is followed.
func File(path string) (Digest, int64, error) { return FileCached(path, nil) }

// FileCached is File, answered from c (nil for none) when the file is unchanged since c
// last saw it. path should be absolute for c to remember it.
func FileCached(path string, c *StatCache) (Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("digest: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("digest: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("digest: %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if d, ok := c.Lookup(path, fi); ok {
		return d, fi.Size(), nil
	}
	d, n, err := hashAndRemember(f, path, fi, c)
	if err != nil {
		return "", 0, fmt.Errorf("digest: %s: %w", path, err)
	}
	return d, n, nil
}

// hashAndRemember hashes the open regular file f (at path, described by fi) and, if it
// did not change while it was read, remembers the digest in c (nil for none).
func hashAndRemember(f *os.File, path string, fi os.FileInfo, c *StatCache) (Digest, int64, error) {
	d, n, err := hashReader(f)
	if err != nil {
		return "", n, err
	}
	if c != nil {
		if after, err := f.Stat(); err == nil && sameStat(fi, after) {
			c.Store(path, fi, d)
		}
	}
	return d, n, nil
}

// hashReader hashes r to EOF. Its errors carry no "digest:" prefix so that
// callers can add their own context once.
func hashReader(r io.Reader) (Digest, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", n, fmt.Errorf("reading after %d bytes: %w", n, err)
	}
	return fromSum(h.Sum(nil)), n, nil
}

// quoteShort quotes s for an error message, truncated so that an arbitrary
// input can never make an error message arbitrarily long.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q (truncated from %d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}
