// Package benchutil holds what the bench programs share: copying an example project to a
// fresh directory, and the tail of a command's output for an error message.
package benchutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/engine/workspace"
)

// CopyProject copies the project at src into dst, without any state directory: each copy
// starts with no state database, cache or registry.
func CopyProject(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && d.Name() == workspace.StateDir:
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}

// Tail is the last 20 lines of s.
func Tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
