package lang

import (
	"strings"
	"testing"
)

// A step's caches decode by name or {name, sharing}; bad paths, names, modes and a cache
// over a mount are refused; a reconstruction's builder and build may not mount one.
func TestStepCaches(t *testing.T) {
	step := func(caches string) string {
		return busyboxSeed + "step \"s\" {\n  image   = seed.bb\n  run     = [\"true\"]\n  outputs = [\"/out/y\"]\n  mounts  = { \"/src\" = \"text\" }\n  caches  = " + caches + "\n}\n"
	}
	cfg, diags := Load(writeProject(t, map[string]string{"main.hcl": step(`{ "/cache/go" = "go-build", "/cache/npm" = { name = "npm", sharing = "locked", max_size = "2GiB" } }`)}), Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := cfg.Steps["s"].Caches
	if c := got["/cache/go"]; c == nil || c.Name != "go-build" || c.Sharing != CacheShared {
		t.Errorf("/cache/go: %+v", c)
	}
	if c := got["/cache/go"]; c == nil || c.MaxSize != 0 {
		t.Errorf("/cache/go has a bound though none was given: %+v", c)
	}
	if c := got["/cache/npm"]; c == nil || c.Name != "npm" || c.Sharing != CacheLocked || c.MaxSize != 2<<30 {
		t.Errorf("/cache/npm: %+v", c)
	}
	for caches, want := range map[string]string{
		`{ "cache" = "x" }`:                                "Invalid cache path",
		`{ "/out/c" = "x" }`:                               "Reserved cache path",
		`{ "/src/c" = "x" }`:                               "Cache over a mount",
		`{ "/c" = "Bad Name" }`:                            "Invalid cache name",
		`{ "/c" = { name = "x", sharing = "sometimes" } }`: "Invalid cache sharing",
		`{ "/c" = { name = "x", size = 3 } }`:              "Invalid cache",
		`{ "/c" = { name = "x", max_size = "lots" } }`:     "main.hcl:10,13-57: Invalid size",
		`{ "/c" = { name = "x", max_size = "1MiB" } }`:     "main.hcl:10,13-57: Invalid cache size; caches[\"/c\"].max_size = \"1MiB\": a cache's bound is from 16MiB to 16TiB",
		`{ "/c" = { name = "x", max_size = "17TiB" } }`:    "Invalid cache size",
		`["x"]`: "Incorrect attribute value type",
	} {
		_, diags := Load(writeProject(t, map[string]string{"main.hcl": step(caches)}), Options{})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("caches = %s: want %q, got %v", caches, want, diags)
		}
	}
	for _, block := range []string{"builder", "build"} {
		body := "    " + block + " {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      caches = { \"/c\" = \"go-build\" }\n    }\n" +
			"    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n"
		if block == "build" {
			body = goodBuilder + body
		}
		_, diags := Load(writeProject(t, map[string]string{"sealed/1.json": "{}", "builder/propose.sh": "true\n", "main.hcl": reconstructCap(body)}), Options{})
		if len(diags) != 1 || diags[0].Summary != "Cache in a reconstruction" {
			t.Errorf("a %s with caches: %v", block, diags)
		}
	}
}

// caches is an attribute of a step (and a product's step or check, which are steps) only:
// anywhere else it is an error diagnostic at the caches line. Evaluation sandboxes have no
// block of their own in the language, so they cannot ask for one.
func TestCachesRefusedOutsideSteps(t *testing.T) {
	const c = "  caches = { \"/c\" = \"go-build\" }\n"
	builderWith := strings.Replace(goodBuilder, "      limits", "    "+c+"      limits", 1)
	buildWith := "    build {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n    " + c + "    }\n"
	pkg := "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n"
	for where, main := range map[string]string{
		"seed":       "seed \"bb\" {\n  layer { files = { \"/bin/busybox\" = host_file(\"/bin/sh\") } }\n" + c + "}\n",
		"seed layer": "seed \"bb\" {\n  layer {\n    files = { \"/bin/busybox\" = host_file(\"/bin/sh\") }\n  " + c + "  }\n}\n",
		"capability": busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/bin/x\"] }\n" + c + "}\n",
		"suite":      busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/bin/x\"] }\n  suite \"sealed\" {\n    cases = \"sealed/*.json\"\n  " + c + "  }\n}\n",
		"builder":    reconstructCap(builderWith + pkg),
		"build":      reconstructCap(goodBuilder + buildWith + pkg),
		"package":    reconstructCap(goodBuilder + "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    " + c + "    }\n"),
	} {
		line := strings.Count(main[:strings.Index(main, "caches =")], "\n") + 1
		_, diags := Load(writeProject(t, map[string]string{"sealed/1.json": "{}", "builder/propose.sh": "true\n", "main.hcl": main}), Options{})
		if !diags.HasErrors() {
			t.Errorf("%s: caches accepted", where)
			continue
		}
		found := false
		for _, d := range diags {
			if d.Subject != nil && strings.HasSuffix(d.Subject.Filename, "main.hcl") && d.Subject.Start.Line == line {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no diagnostic at main.hcl:%d: %v", where, line, diags)
		}
	}
}
