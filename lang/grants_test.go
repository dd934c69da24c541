package lang

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseDestination(t *testing.T) {
	for _, c := range []struct{ in, base, want, err string }{
		{"dir:/srv/releases/", "", "dir:/srv/releases", ""},
		{"oci-layout:out", "/p", "oci-layout:/p/out", ""},
		{"dir:rel", "", "", "must be absolute"},
		{"oci:127.0.0.1:5000/team/app", "/p", "oci:127.0.0.1:5000/team/app", ""},
		{"oci:reg.example/app", "", "oci:reg.example/app", ""},
		{"oci:localhost/app", "", "oci:localhost/app", ""},
		{"oci:host/repo", "/p", "", "not a registry repository"},        // no dot, port or localhost: Docker Hub
		{"oci:reg.example/app:v1", "", "", "not a registry repository"}, // a tag
		{"oci:reg.example/app@sha256:00", "", "", "not a registry repository"},
		{"oci:Reg.example/App", "", "", "not a registry repository"},
		{"oci:https://reg.example/app", "", "", "not a registry repository"},
		{"oci:reg.example", "", "", "not a registry repository"},
		{"oci:reg.example/../app", "", "", "not a registry repository"},
		{"oci:", "", "", "names no path"},
		{"dir:", "/p", "", "names no path"},
		{"/srv", "/p", "", "not a destination"},
	} {
		d, err := ParseDestination(c.in, c.base)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDestination(%q) = %v, %v; want an error with %q", c.in, d, err, c.err)
			}
			continue
		}
		if err != nil || d.String() != c.want {
			t.Errorf("ParseDestination(%q) = %v, %v; want %s", c.in, d, err, c.want)
		}
	}
}

// A grant allows its path and what is under it, of its own scheme only; a grants file that
// is not exactly the grammar is an error, never fewer grants.
func TestGrants(t *testing.T) {
	g, _, diags := ParseGrants("g.hcl", []byte(`
grant "deliver" { to = ["dir:/srv/releases", "oci-layout:/srv/oci"] }
grant "deliver" { to = ["dir:/srv/releases", "oci:reg.example/app", "oci:127.0.0.1:5000/team"] }
`))
	if diags.HasErrors() || len(g.Deliver) != 4 {
		t.Fatalf("grants: %v %v", g, diags)
	}
	for dest, want := range map[string]bool{
		"dir:/srv/releases": true, "dir:/srv/releases/app": true, "dir:/srv/releases-old": false,
		"oci-layout:/srv/releases": false, "oci-layout:/srv/oci/x": true, "dir:/srv": false,
		// A registry grant: the same host and port, the same repository or one under it.
		"oci:reg.example/app": true, "oci:reg.example/app/web": true, "oci:reg.example/app-evil": false,
		"oci:reg.example/ap": false, "oci:reg.example.evil/app": false, "oci:reg.example:5000/app": false,
		"oci:evil.reg.example/app": false, "oci:127.0.0.1:5000/team/app": true, "oci:127.0.0.1:5001/team/app": false,
		"oci:127.0.0.1/team": false, "oci-layout:/reg.example/app": false, "dir:/reg.example/app": false,
	} {
		d, _ := ParseDestination(dest, "")
		if got := g.AllowsDelivery(d); got != want {
			t.Errorf("AllowsDelivery(%s) = %v, want %v", dest, got, want)
		}
	}
	if (*Grants)(nil).AllowsDelivery(Destination{Scheme: SchemeDir, Path: "/"}) {
		t.Error("no grants allow a delivery")
	}
	for src, want := range map[string]string{
		`grant "deliverr" { to = ["dir:/x"] }`:                "Unknown grant",
		`grant "deliver" { to = ["dir:x"] }`:                  "must be absolute",
		`grant "deliver" { to = "dir:/x" }`:                   "list of destinations",
		"grant \"deliver\" {\n to = [\"dir:/x\"]\n by = 1\n}": "Unsupported argument",
		`grants "deliver" { to = ["dir:/x"] }`:                "Unsupported block type",
		`grant "deliver" { to = ["oci:host/r:tag"] }`:         "not a registry repository",
		`grant "deliver" { to = ["registry:host/r"] }`:        "not a destination",
	} {
		_, _, diags := ParseGrants("g.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("%s: %v, want %q", src, diags, want)
		}
	}
	if g, _, diags := LoadGrants(filepath.Join(t.TempDir(), "none.hcl"), true); diags.HasErrors() || len(g.Deliver) != 0 {
		t.Errorf("a missing optional grants file: %v %v", g, diags)
	}
	if _, _, diags := LoadGrants(filepath.Join(t.TempDir(), "none.hcl"), false); !diags.HasErrors() {
		t.Error("a missing grants file named by -grants is an error")
	}
}

func TestDeliverDestinationValidated(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": busyboxSeed + `
product "p" {
  check "c" {
    image  = seed.bb
    mounts = { "/a" = "x" }
    run    = ["test", "-s", "/a"]
  }
  deliver {
    to    = "s3://bucket"
    files = { "/a" = "x" }
  }
}
product "q" {
  check "c" {
    image  = seed.bb
    mounts = { "/a" = "x" }
    run    = ["test", "-s", "/a"]
  }
  deliver {
    to    = "dir:out"
    files = { "/a" = "x" }
    start = ["/a", "serve"]
  }
}
`})
	cfg, diags := Load(dir, Options{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Invalid destination") || !strings.Contains(diags.Error(), "s3://bucket") {
		t.Fatalf("an invalid destination: %v", diags)
	}
	if len(diags) != 1 {
		t.Errorf("want one diagnostic, have %v", diags)
	}
	if q := cfg.Products["q"].Deliver; q.Dest.String() != "dir:"+filepath.Join(dir, "out") || len(q.Start) != 2 {
		t.Errorf("deliver of q: %+v", q)
	}
}

// A delivered product accepted through its service starts the way it was accepted: start
// defaults to the accepted entrypoint.
func TestDeliverStartDefaultsToTheAcceptedEntrypoint(t *testing.T) {
	dir := writeProject(t, map[string]string{"a/1.json": "{}", "main.hcl": busyboxSeed + `
product "p" {
  accept "service" {
    image      = seed.bb
    files      = { "/srv" = dir("srv") }
    entrypoint = ["/srv/start", "../data"]
    port       = 8080
    cases      = "a/*.json"
  }
  deliver {
    to    = "dir:out"
    files = { "/srv" = dir("srv") }
  }
}
`, "srv/start": "#!/bin/sh\n"})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Products["p"].Deliver.Start; !slices.Equal(got, []string{"/srv/start", "../data"}) {
		t.Errorf("start = %q, want the accepted entrypoint", got)
	}
}
