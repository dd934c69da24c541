package graph

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/lang"
)

// The cache keys of a reconstruction's builder and build are those every earlier Foundry
// computed for the same definition (pinned here), so that a round an apply died in still
// finds the run it finished, and they change with what the step mounts.
func TestReconstructStepKeys(t *testing.T) {
	dir := t.TempDir()
	graphtest.Must(t, os.MkdirAll(filepath.Join(dir, "builder"), 0o755))
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "builder", "propose.sh"), []byte("echo hi\n"), 0o644))
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`
project "pin" { platform = "linux/amd64" }
capability "helper" {
  interface "cli" { entrypoint = ["/bin/helper"] }
}
seed "bb" {
  layer { files = { "/bin/tool" = "#!/bin/sh\n" } }
  env = { PATH = "/bin" }
}
capability "sorter" {
  interface "cli" { entrypoint = ["/bin/sorter"] }
  reconstruct {
    builder {
      image   = seed.bb
      mounts  = { "/src" = dir("builder"), "/note" = "inline text", "/tools" = capability.helper }
      run     = ["sh", "/src/propose.sh"]
      outputs = ["/out/sorter"]
      limits { time = "60s" }
    }
    build {
      image   = seed.bb
      run     = ["sh", "-c", "cp /proposal/sorter /out/sorter"]
      outputs = ["/out/sorter"]
    }
    package {
      base  = seed.bb
      files = { "/bin/sorter" = "/out/sorter" }
    }
  }
}
`), 0o644))
	g, diags := Compile(graphtest.LoadConfig(t, dir))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	c := g.Nodes["capability.sorter"]
	rc := c.Capability.Reconstruct
	const image = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	tree := func(d string) func(string) digest.Digest {
		return func(string) digest.Digest { return digest.Digest(d) }
	}
	helper := tree("sha256:4444444444444444444444444444444444444444444444444444444444444444")
	b, err := ReconstructStep(c, rc.Builder, image, map[string]digest.Digest{lang.JobDir: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}, helper)
	if err != nil {
		t.Fatal(err)
	}
	if want := digest.Digest("sha256:bcdde170c306de39979b9aa7cab2cd592a8668d28dca7d641e715a6a85ea70af"); b.Digest != want || digest.FromBytes(b.Definition) != want {
		t.Errorf("builder key %s, want %s (the key every earlier Foundry gave it)\n%s", b.Digest, want, b.Definition)
	}
	if b.Address != "capability.sorter.reconstruct.builder" || b.Kind != KindStep || b.Step != rc.Builder {
		t.Errorf("builder node %s %s", b.Address, b.Kind)
	}
	bd, err := ReconstructStep(c, rc.Build, image, map[string]digest.Digest{lang.ProposalDir: "sha256:3333333333333333333333333333333333333333333333333333333333333333"}, helper)
	if err != nil {
		t.Fatal(err)
	}
	if want := digest.Digest("sha256:7a3c9242d60511c509bf35872e71b1c52f72b35af4351c6720d75842da910d16"); bd.Digest != want {
		t.Errorf("build key %s, want %s\n%s", bd.Digest, want, bd.Definition)
	}
	if bd.Address != "capability.sorter.reconstruct.build" {
		t.Errorf("build address %s", bd.Address)
	}

	// Another job, another image, another version of a mounted capability, a reference it
	// may inspect: another action.
	for what, d := range map[string]func() (*Node, error){
		"job": func() (*Node, error) {
			return ReconstructStep(c, rc.Builder, image, map[string]digest.Digest{lang.JobDir: "sha256:5555555555555555555555555555555555555555555555555555555555555555"}, helper)
		},
		"image": func() (*Node, error) {
			return ReconstructStep(c, rc.Builder, "sha256:6666666666666666666666666666666666666666666666666666666666666666", map[string]digest.Digest{lang.JobDir: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}, helper)
		},
		"inspected reference": func() (*Node, error) {
			return ReconstructStep(c, rc.Builder, image, map[string]digest.Digest{lang.JobDir: "sha256:2222222222222222222222222222222222222222222222222222222222222222",
				lang.ReferenceDir + "/bbsort": "sha256:8888888888888888888888888888888888888888888888888888888888888888"}, helper)
		},
		"capability": func() (*Node, error) {
			return ReconstructStep(c, rc.Builder, image, map[string]digest.Digest{lang.JobDir: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}, tree("sha256:7777777777777777777777777777777777777777777777777777777777777777"))
		},
	} {
		n, err := d()
		if err != nil || n.Digest == b.Digest {
			t.Errorf("another %s: key %v, %v; want a new key", what, n, err)
		}
	}
	if _, err := ReconstructStep(c, rc.Builder, image, map[string]digest.Digest{lang.JobDir: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}, tree("")); err == nil {
		t.Error("a builder mounting an unsettled capability was keyed")
	}
}
