//go:build unix

package digest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDirRejectsSpecialFiles(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "sub", "pipe")
		if err := os.Mkdir(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		// Must fail without opening the FIFO (which would block forever).
		if _, _, err := Dir(root); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("Dir = %v, want error naming %s as a named pipe", err, p)
		}
	})
	t.Run("socket", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "sock")
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Skipf("unix socket: %v", err)
		}
		defer l.Close()
		if _, _, err := Dir(root); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "socket") {
			t.Errorf("Dir = %v, want error naming %s as a socket", err, p)
		}
	})
}
