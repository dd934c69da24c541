package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/store"
)

// contentFixture is a tree pushed from one content store to a registry (a layout, whose
// blobs an attacker who controls the registry can rewrite), and an empty store to fetch into.
func contentFixture(t *testing.T) (reg *Layout, tree digest.Digest, size int64, file digest.Digest, dst *store.Store) {
	t.Helper()
	src, err := store.Open(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte("the real bytes\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	tree, man, err := src.PutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Entries {
		if e.Path == "sub/a.txt" {
			file = e.Digest
		}
	}
	if reg, err = OpenLayout(filepath.Join(t.TempDir(), "reg")); err != nil {
		t.Fatal(err)
	}
	if size, err = PushTree(context.Background(), reg, src, tree); err != nil {
		t.Fatal(err)
	}
	if dst, err = store.Open(filepath.Join(t.TempDir(), "dst")); err != nil {
		t.Fatal(err)
	}
	return reg, tree, size, file, dst
}

// A tree pushed is fetched whole, and materializes to the same digest.
func TestContentTreeRoundTrip(t *testing.T) {
	reg, tree, size, _, dst := contentFixture(t)
	if err := FetchTree(context.Background(), reg, dst, tree, size); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := dst.Materialize(tree, out); err != nil {
		t.Fatal(err)
	}
	if _, d, err := digest.Dir(out); err != nil || d != tree {
		t.Fatalf("the fetched tree hashes to %s (%v), want %s", d, err, tree)
	}
}

// A registry that serves other bytes under a file's digest, or under the manifest's, or a
// size other than the one asked for, is refused, and the store fetched into keeps nothing
// under the forged digest.
func TestContentForgedBlobsRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("file", func(t *testing.T) {
		reg, tree, size, file, dst := contentFixture(t)
		forge(t, reg, file, "forged bytes!!\n")
		err := FetchTree(ctx, reg, dst, tree, size)
		if !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("FetchTree of a tree with a forged file: %v, want a digest mismatch", err)
		}
		if ok, _ := dst.Has(file); ok {
			t.Error("the forged file is in the store")
		}
	})
	t.Run("manifest", func(t *testing.T) {
		reg, tree, size, _, dst := contentFixture(t)
		forge(t, reg, tree, `{"entries":[{"path":"evil","type":"file","mode":420,"size":1,"digest":"sha256:`+
			"0000000000000000000000000000000000000000000000000000000000000000"+`"}]}`)
		if err := FetchTree(ctx, reg, dst, tree, size); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("FetchTree of a forged manifest: %v, want a digest mismatch", err)
		}
		if ok, _ := dst.Has(tree); ok {
			t.Error("the forged manifest is in the store")
		}
	})
	t.Run("size", func(t *testing.T) {
		reg, tree, size, _, dst := contentFixture(t)
		if err := FetchBlob(ctx, reg, dst, tree, size-1); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("FetchBlob with the wrong size: %v, want a digest mismatch", err)
		}
	})
}

// forge replaces the registry's blob d with other bytes, as its operator could.
func forge(t *testing.T, reg *Layout, d digest.Digest, body string) {
	t.Helper()
	p := reg.blobPath(d)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
