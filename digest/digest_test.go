package digest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	emptySHA = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	abcSHA   = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
)

func TestFromBytesKnownVectors(t *testing.T) {
	if got := FromBytes(nil); got != emptySHA {
		t.Errorf("FromBytes(nil) = %s, want %s", got, emptySHA)
	}
	d := FromBytes([]byte("abc"))
	if d != abcSHA {
		t.Errorf("FromBytes(abc) = %s, want %s", d, abcSHA)
	}
	if d.String() != abcSHA || d.Hex() != abcSHA[len("sha256:"):] {
		t.Errorf("String/Hex = %q, %q", d.String(), d.Hex())
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate(FromBytes) = %v", err)
	}
}

func TestParse(t *testing.T) {
	if d, err := Parse(abcSHA); err != nil || d != abcSHA {
		t.Errorf("Parse(valid) = %q, %v", d, err)
	}
	hexPart := abcSHA[len("sha256:"):]
	bad := []string{
		"",
		hexPart,                               // no algorithm
		"sha256:",                             // no hex
		"sha256:" + hexPart[:63],              // short
		"sha256:" + hexPart + "0",             // long
		"sha256:" + strings.ToUpper(hexPart),  // uppercase
		"SHA256:" + hexPart,                   // uppercase algorithm
		"sha512:" + hexPart,                   // other algorithm
		"sha256:" + hexPart[:63] + "g",        // non-hex
		" sha256:" + hexPart,                  // whitespace
		"sha256:" + hexPart + "\n",            // trailing newline
		"sha256:" + hexPart[:62] + "\xc3\xa9", // multi-byte
	}
	for _, s := range bad {
		if d, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %q, want error", s, d)
		}
	}
	// An arbitrary input must not make the error arbitrarily long.
	_, err := Parse(strings.Repeat("x", 1<<20))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("Parse(huge) error length %d", len(err.Error()))
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		k := min(r.n, len(p))
		r.n -= k
		return k, nil
	}
	return 0, errors.New("disk on fire")
}

func TestFromReader(t *testing.T) {
	data := bytes.Repeat([]byte("foundry"), 100000)
	d, n, err := FromReader(bytes.NewReader(data))
	if err != nil || n != int64(len(data)) || d != FromBytes(data) {
		t.Errorf("FromReader = %s, %d, %v; want %s, %d", d, n, err, FromBytes(data), len(data))
	}
	_, n, err = FromReader(&failingReader{n: 10})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || n != 10 {
		t.Errorf("FromReader(failing) = %d, %v", n, err)
	}
	if d, n, err := FromReader(io.LimitReader(nil, 0)); err != nil || n != 0 || d != emptySHA {
		t.Errorf("FromReader(empty) = %s, %d, %v", d, n, err)
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, n, err := File(p); err != nil || d != abcSHA || n != 3 {
		t.Errorf("File = %s, %d, %v", d, n, err)
	}
	if _, _, err := File(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("File(dir) = %v, want error naming %s", err, dir)
	}
	missing := filepath.Join(dir, "missing")
	if _, _, err := File(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("File(missing) = %v, want error naming the path", err)
	}
}
