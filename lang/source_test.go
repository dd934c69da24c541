package lang

import (
	"strings"
	"testing"
	"time"
)

const (
	sha   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sha40 = "0123456789abcdef0123456789abcdef01234567"
)

// A source decodes to its kind, pin, URLs in order and how its bytes become a tree, and
// source.NAME is usable wherever a directory is: mounts, a seed's layer, a package.
func TestSourceDecodes(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": busyboxSeed + `
source "go" {
  url     = "https://downloads.example/go1.26.src.tar.gz"
  mirrors = ["https://mirror.example/go/go1.26.src.tar.gz"]
  sha256  = "sha256:` + sha + `"
  strip   = 1
  limits {
    download = "1GiB"
    time     = "5m"
  }
}
source "lib" {
  git    = "https://git.example/lib.git"
  commit = "` + sha40 + `"
}
source "img" {
  oci = "registry.example:5000/team/tool@sha256:` + sha + `"
}
source "blob" {
  url    = "https://downloads.example/files/tool-linux-amd64"
  sha256 = "` + sha + `"
}
seed "tools" {
  layer { from = seed.bb }
  layer {
    dir = source.go
    at  = "/usr/local/go"
  }
}
step "build" {
  image   = seed.tools
  mounts  = { "/lib" = source.lib, "/img" = source.img, "/bin/tool" = source.blob }
  run     = ["true"]
  outputs = ["/out/x"]
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g := cfg.Sources["go"]
	if g.Type != SourceHTTP || g.Pin != "sha256:"+sha || g.Archive != ArchiveTarGz || g.Strip != 1 || len(g.URLs) != 2 ||
		g.URLs[1] != "https://mirror.example/go/go1.26.src.tar.gz" || g.Limits.Download != 1<<30 || g.Limits.Time != 5*time.Minute ||
		g.Limits.Entries != DefaultSourceLimits.Entries {
		t.Errorf("source go: %+v", g)
	}
	if l := cfg.Sources["lib"]; l.Type != SourceGit || l.Pin != sha40 || l.URLs[0] != "https://git.example/lib.git" {
		t.Errorf("source lib: %+v", l)
	}
	if i := cfg.Sources["img"]; i.Type != SourceOCI || i.Pin != "sha256:"+sha {
		t.Errorf("source img: %+v", i)
	}
	if b := cfg.Sources["blob"]; b.Archive != ArchiveFile || b.File != "tool-linux-amd64" {
		t.Errorf("source blob: %+v", b)
	}
	if d := cfg.Seeds["tools"].Layers[1].Dir; d.Kind != ArtifactSource || d.Node != "source.go" {
		t.Errorf("the seed's layer: %+v", d)
	}
	if m := cfg.Steps["build"].Mounts["/lib"]; m.Kind != ArtifactSource || m.Node != "source.lib" || !m.IsDir {
		t.Errorf("the step's mount: %+v", m)
	}
	for _, c := range []struct{ in, want string }{
		{"/a/b.TGZ", ArchiveTarGz}, {"/x.tar.xz", ArchiveTarXz}, {"/x.txz", ArchiveTarXz}, {"/x.tar", ArchiveTar},
		{"/x.zip", ArchiveZip}, {"/x.gz", ArchiveFile}, {"/x", ArchiveFile},
	} {
		if got := ArchiveOf(c.in); got != c.want {
			t.Errorf("ArchiveOf(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// What a source must not be is an error with its place: unpinned, pinned loosely, two
// kinds at once, another kind's attributes, a URL Foundry cannot be granted or that
// carries a secret, an unknown source referred to, a source a builder mounts.
func TestSourceErrors(t *testing.T) {
	for body, want := range map[string]string{
		`source "s" { url = "https://h.example/a.tgz" }`:                                                                         "needs sha256",
		`source "s" {` + "\n" + `url = "https://h.example/a.tgz"` + "\n" + `sha256 = "abc" }`:                                    "is not a SHA-256",
		`source "s" {` + "\n" + `git = "https://h.example/r.git"` + "\n" + `commit = "main" }`:                                   "not the full id of a commit",
		`source "s" { git = "https://h.example/r.git" }`:                                                                         "needs commit",
		`source "s" { oci = "registry.example/team/tool:v1" }`:                                                                   "is not pinned",
		`source "s" { oci = "team/tool@sha256:` + sha + `" }`:                                                                    "not a registry repository",
		`source "s" {` + "\n" + `url = "https://h.example/a"` + "\n" + `git = "https://h.example/r" }`:                           "exactly one of url",
		`source "s" { sha256 = "` + sha + `" }`:                                                                                  "it has none",
		`source "s" {` + "\n" + `git = "https://h.example/r.git"` + "\n" + `commit = "` + sha40 + `"` + "\n" + `strip = 1 }`:     "does not belong to a source with git",
		`source "s" {` + "\n" + `url = "ftp://h.example/a.tgz"` + "\n" + `sha256 = "` + sha + `" }`:                              "over https (or http) only",
		`source "s" {` + "\n" + `url = "https://u:pw@h.example/a.tgz"` + "\n" + `sha256 = "` + sha + `" }`:                       "carries credentials",
		`source "s" {` + "\n" + `url = "https://127.1/a.tgz"` + "\n" + `sha256 = "` + sha + `" }`:                                "looks like an IPv4",
		`source "s" {` + "\n" + `url = "https://h.example/a.bin"` + "\n" + `sha256 = "` + sha + `"` + "\n" + `strip = 1 }`:       "strip applies to an archive",
		`source "s" {` + "\n" + `url = "https://h.example/a.tgz"` + "\n" + `sha256 = "` + sha + `"` + "\n" + `archive = "rar" }`: `archive = "rar"`,
		`source "s" {` + "\n" + `url = "https://h.example/"` + "\n" + `sha256 = "` + sha + `" }`:                                 "names no file",
		`source "s" {` + "\n" + `url = "https://h.example/a.tgz"` + "\n" + `sha256 = "` + sha + `"` + "\n" + `ref = "x" }`:       "Unsupported argument",
		`step "x" {` + "\n" + `image = seed.bb` + "\n" + `mounts = { "/s" = source.nope }` + "\n" + `run = ["true"] }`:           `No source "nope" is declared`,
	} {
		src := body
		if strings.Contains(src, "\n") { // one argument a line, and the brace on its own
			src = strings.TrimSuffix(src, " }") + "\n}"
		}
		dir := writeProject(t, map[string]string{"main.hcl": busyboxSeed + src + "\n"})
		_, diags := Load(dir, Options{})
		var all strings.Builder
		for _, d := range diags {
			all.WriteString(d.Error() + "\n")
		}
		if !diags.HasErrors() || !strings.Contains(all.String(), want) || !strings.Contains(all.String(), "main.hcl:") {
			t.Errorf("%s:\n%s\nwant an error with %q and its place", body, all.String(), want)
		}
	}
}
