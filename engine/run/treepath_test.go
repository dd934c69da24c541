package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tree's files are written inside its directory: a key that is not an absolute, clean
// path, and a key reached through a symlink an earlier file put in the tree, are refused.
func TestTreePathStaysInsideTheTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "srv", "x")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, want, err string }{
		{"/bin/app", filepath.Join(root, "bin", "app"), ""},
		{"/srv/y", filepath.Join(root, "srv", "y"), ""},
		{"/", root, ""},
		{"/../../etc/x", "", "not an absolute, clean path"},
		{"/srv/../../x", "", "not an absolute, clean path"},
		{"srv/y", "", "not an absolute, clean path"},
		{"/srv/x/y", "", "/srv/x is a symlink"},
		{"/srv/x", "", "/srv/x is a symlink"},
	} {
		got, err := treePath(root, c.key)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("treePath(%q) = %q, %v; want %q", c.key, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("treePath(%q) = %q, %v; want an error saying %q", c.key, got, err, c.err)
		}
	}
}
