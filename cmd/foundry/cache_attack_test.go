package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cacheProject is a project named name on a busybox seed whose steps mount the cache
// "shared-name" at /cache: with put, step.put writes secret there and step.get (after it)
// reads it into /out/seen; without, only step.get.
func cacheProject(t *testing.T, dir, name, secret string, put bool) {
	t.Helper()
	hcl := fmt.Sprintf(`project %q {}
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "echo"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}
`, name)
	get := `step "get" {
  image   = seed.bb
  caches  = { "/cache" = "shared-name" }
  run     = ["sh", "-c", "cat /cache/secret > /out/seen 2>/dev/null || echo none > /out/seen"]
  outputs = ["/out/seen"]
}
`
	if put {
		hcl += fmt.Sprintf(`step "put" {
  image   = seed.bb
  caches  = { "/cache" = "shared-name" }
  run     = ["sh", "-c", "echo %s > /cache/secret && echo done > /out/done"]
  outputs = ["/out/done"]
}
`, secret)
		get = strings.Replace(get, `image   = seed.bb`, "image   = seed.bb\n  mounts  = { \"/after\" = step.put.output[\"/out/done\"] }", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl+get), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A step writes a secret into a cache volume: a second step of the same project sees it; a
// step of another project with the same cache name and image does not, even in the same
// directory (and so the same state directory, where the volumes are): the project is part
// of a volume's key. Under runc and containerd.
func TestCacheUnseenByOtherProject(t *testing.T) {
	needSandbox(t)
	for _, ex := range []string{"runc", "containerd"} {
		t.Run(ex, func(t *testing.T) {
			if ex == "containerd" {
				needContainerd(t)
			}
			secret := "s3cret-" + ex
			seen := func(dir string) string {
				t.Helper()
				code, _, errs := foundry(t, dir, "apply", "-auto-approve", "-executor", ex)
				if code != 0 {
					t.Fatalf("apply in %s: exit %d\n%s", dir, code, errs)
				}
				_, out, _ := foundry(t, dir, "output", "step.get", "/out/seen")
				return strings.TrimSpace(out)
			}
			dir := t.TempDir()
			cacheProject(t, dir, "owner", secret, true)
			if got := seen(dir); got != secret {
				t.Fatalf("a second step of the same project read %q from the cache, want the secret", got)
			}
			cacheProject(t, dir, "other", secret, false)
			if got := seen(dir); got != "none" {
				t.Fatalf("a step of another project read %q from a cache of the same name and image", got)
			}
		})
	}
}
