package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// FuzzMaterialize stores arbitrary bytes as a manifest and materializes them: whatever the
// bytes, nothing may be created outside the destination, and a tree that materializes must
// hash back to its manifest digest.
func FuzzMaterialize(f *testing.F) {
	x := digest.FromBytes([]byte("x"))
	f.Add(`{"entries":[]}`)
	f.Add(`{"entries":[{"digest":"` + string(x) + `","mode":420,"path":"a","size":1,"type":"file"}]}`)
	f.Add(`{"entries":[{"mode":493,"path":"d","type":"dir"},{"digest":"` + string(x) + `","mode":493,"path":"d/x","size":1,"type":"file"}]}`)
	f.Add(`{"entries":[{"mode":511,"path":"l","target":"..","type":"symlink"},{"digest":"` + string(x) + `","mode":420,"path":"l/x","size":1,"type":"file"}]}`)
	f.Add(`{"entries":[{"digest":"` + string(x) + `","mode":420,"path":"../x","size":1,"type":"file"}]}`)
	f.Fuzz(func(t *testing.T, manifest string) {
		base := t.TempDir()
		s, err := Open(filepath.Join(base, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutBytes([]byte("x")); err != nil {
			t.Fatal(err)
		}
		md, err := s.PutBytes([]byte(manifest))
		if err != nil {
			t.Fatal(err)
		}
		work := filepath.Join(base, "work")
		os.Mkdir(work, 0o755)
		dest := filepath.Join(work, "dest")
		merr := s.Materialize(md, dest)
		filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if p == base || p == work || strings.HasPrefix(p, filepath.Join(base, "blobs")) {
				return nil
			}
			if merr == nil && (p == dest || strings.HasPrefix(p, dest+string(filepath.Separator))) {
				return nil
			}
			t.Fatalf("Materialize (err %v) created %s", merr, p)
			return nil
		})
		if merr == nil {
			if _, got, err := digest.Dir(dest); err != nil || got != md {
				t.Fatalf("materialized tree hashes to %s (%v), want %s", got, err, md)
			}
		}
	})
}
