package lang

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

const busyboxSeed = `
seed "bb" {
  layer { files = { "/bin/busybox" = host_file("/bin/sh") } }
}
`

func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Each class of error yields one diagnostic with its summary, a source line, and (where one
// is obvious) a suggestion.
// A step's bad mounts are each reported, in target order, whatever the map's order.
func TestBadMountsReportedInTargetOrder(t *testing.T) {
	src := busyboxSeed + `step "a" {
  image   = seed.bb
  run     = ["x"]
  outputs = ["/out/o"]
  mounts  = { "/z" = "fine", "/out/x" = "t", "b/c" = "t", "/in" = step.a.output["/out/o"], "/a/../a" = "t", "/m" = "fine" }
}
`
	for i := 0; i < 5; i++ {
		_, diags := Load(writeProject(t, map[string]string{"main.hcl": src}), Options{})
		var got []string
		for _, d := range diags {
			got = append(got, d.Summary)
		}
		want := "Invalid mount path, Step mounts its own output, Reserved mount path, Invalid mount path" // /a/../a, /in, /out/x, b/c
		if strings.Join(got, ", ") != want {
			t.Fatalf("diagnostics %v\nwant %s", got, want)
		}
	}
}

func TestDiagnostics(t *testing.T) {
	cases := []struct {
		name    string
		hcl     string
		extra   map[string]string
		summary string
		line    int
		detail  string
	}{
		{"syntax", "step \"a\" {\n  run = [\n}", nil, "Invalid expression", 3, ""},
		{"unknown block", "sed \"x\" {}\n", nil, "Unsupported block type", 1, `Did you mean "seed"?`},
		{"unknown attribute", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"true\"]\n  imge = 1\n}\n", nil, "Unsupported argument", 8, `Did you mean "image"?`},
		{"wrong type", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = \"true\"\n}\n", nil, "Incorrect attribute value type", 7, "list of strings"},
		{"undeclared seed", "step \"a\" {\n  image = seed.bx\n  run = [\"true\"]\n}\n" + busyboxSeed, nil, "Reference to undeclared seed", 2, `Did you mean "bb"?`},
		{"undeclared variable", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [var.x]\n}\n", nil, "Reference to undeclared variable", 7, ""},
		{"unknown root", busyboxSeed + "step \"a\" {\n  image = sed.bb\n  run = [\"x\"]\n}\n", nil, "Unknown reference", 6, `Did you mean "seed"?`},
		{"undeclared output", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/a\"]\n}\nstep \"b\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/a\" = step.a.output[\"/out/b\"] }\n}\n", nil, "Reference to undeclared output", 13, `Did you mean "/out/a"?`},
		{"step out of scope", busyboxSeed + "step \"top\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/a\"]\n}\ncapability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n}\nrecipe \"r\" {\n  provides = capability.c\n  step \"s\" {\n    image = seed.bb\n    run = [\"x\"]\n    mounts = { \"/a\" = step.top.output[\"/out/a\"] }\n  }\n  package { files = {} }\n}\n", nil, "Reference to undeclared step", 18, "own recipe"},
		{"duplicate block", busyboxSeed + busyboxSeed, nil, "Duplicate seed", 6, "already declared"},
		{"name with a dot", busyboxSeed + "step \"a.b\" {\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid name", 5, `step "a.b": a name is a letter`},
		{"name with a space", "variable \"my var\" {\n  default = 1\n}\n", nil, "Invalid name", 1, "letters, digits, underscores or dashes"},
		{"name starting with a digit", busyboxSeed + "product \"p\" {\n  check \"1st\" {\n    image = seed.bb\n    run = [\"x\"]\n  }\n}\n", nil, "Invalid name", 6, `check "1st"`},
		{"name spelling another block's address", busyboxSeed + "product \"p\" {\n  step \"x\" {\n    image = seed.bb\n    run = [\"x\"]\n  }\n}\nproduct \"p.step.x\" {}\n", nil, "Invalid name", 11, `product "p.step.x"`},
		{"project escape", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/s\" = dir(\"../x\") }\n}\n", nil, "Invalid function argument", 8, `contains ".."`},
		{"absolute project path", "project \"p\" {\n  brief = file(\"/etc/hostname\")\n}\n", nil, "Invalid function argument", 2, "is absolute"},
		{"output outside /out", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/tmp/a\"]\n}\n", nil, "Invalid output path", 8, "under /out"},
		{"reserved mount", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/out/x\" = \"text\" }\n}\n", nil, "Reserved mount path", 8, ""},
		{"relative mount", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"src\" = \"text\" }\n}\n", nil, "Invalid mount path", 8, "absolute, clean"},
		{"own output", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/o\"]\n  mounts = { \"/in\" = step.a.output[\"/out/o\"] }\n}\n", nil, "Step mounts its own output", 9, "does not exist until the step has run"},
		{"network", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  network = \"host\"\n}\n", nil, "Network not granted", 8, "grant"},
		{"egress without output digest", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"egress\"\n  egress = [\"proxy.example:443\"]\n}\n", nil, "Network without output digest", 9, "sha256: and 64 zeros"},
		{"egress without hosts", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"egress\"\n  output_digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n}\n", nil, "Egress without hosts", 9, `grant "network"`},
		{"egress empty hosts", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"egress\"\n  egress = []\n  output_digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n}\n", nil, "Egress without hosts", 10, "at least one"},
		{"egress host without port", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"egress\"\n  egress = [\"proxy.example\"]\n  output_digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n}\n", nil, "Invalid egress host", 10, "HOST:PORT"},
		{"bad output digest", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"egress\"\n  egress = [\"proxy.example:443\"]\n  output_digest = \"sha256:abc\"\n}\n", nil, "Invalid output digest", 11, "64 lowercase hex"},
		{"egress without network", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  egress = [\"proxy.example:443\"]\n}\n", nil, "Egress without network", 9, `network = "egress"`},
		{"output digest without network", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  network = \"none\"\n  output_digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n}\n", nil, "Egress without network", 10, "output_digest belongs"},
		{"egress limit without network", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/src\"]\n  limits { egress = \"1GiB\" }\n}\n", nil, "Egress without network", 9, "limits.egress"},
		{"fixed output without outputs", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  network = \"egress\"\n  egress = [\"proxy.example:443\"]\n  output_digest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n}\n", nil, "Fixed output without outputs", 8, "declares the outputs"},
		{"check with network", busyboxSeed + "product \"p\" {\n  check \"c\" {\n    image = seed.bb\n    run = [\"x\"]\n    network = \"egress\"\n  }\n}\n", nil, "Network not granted", 9, "A check runs with loopback only"},
		{"bad size", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  limits { memory = \"1 parsec\" }\n}\n", nil, "Invalid size", 8, "unknown unit"},
		{"bad disk", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  limits { disk = \"1.5GiB\" }\n}\n", nil, "Invalid size", 8, "disk"},
		{"bad inodes", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  limits { inodes = 0 }\n}\n", nil, "Invalid inodes", 8, "inodes = 0"},
		{"fractional inodes", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  limits { inodes = 1.5 }\n}\n", nil, "Invalid inodes", 8, "inodes = 1.5"},
		{"unpinned image", "seed \"x\" {\n  image = \"docker.io/library/busybox:latest\"\n}\n", nil, "Unpinned image reference", 2, "pinned by digest"},
		{"seed without source", "seed \"x\" {\n  env = {}\n}\n", nil, "Invalid seed", 1, "exactly one source"},
		{"image not a seed", busyboxSeed + "step \"a\" {\n  image = \"busybox\"\n  run = [\"x\"]\n}\n", nil, "Invalid value", 6, "seed"},
		{"required variable", "variable \"v\" {\n  type = string\n}\n", nil, "No value for required variable", 1, "-var v="},
		{"for_each from a step", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/o\"]\n}\nstep \"b\" {\n  for_each = step.a.output\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid for_each argument", 11, "must be known when the configuration is loaded"},
		{"duplicate for_each key", busyboxSeed + "step \"a\" {\n  for_each = [\"x\", \"y\", \"x\"]\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid for_each argument", 6, `the key "x" appears twice`},
		{"for_each of a number", busyboxSeed + "step \"a\" {\n  for_each = 3\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid for_each argument", 6, "must be a map, or a set of strings, not number"},
		{"negative count", busyboxSeed + "step \"a\" {\n  count = -1\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid count argument", 6, "whole number from 0"},
		{"count and for_each", busyboxSeed + "step \"a\" {\n  for_each = [\"x\"]\n  count = 2\n  image = seed.bb\n  run = [\"x\"]\n}\n", nil, "Invalid combination of count and for_each", 7, "takes one of them"},
		{"missing instance", busyboxSeed + "step \"a\" {\n  for_each = toset([\"amd64\", \"arm64\"])\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/o\"]\n}\nstep \"b\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/a\" = step.a[\"arm46\"].output[\"/out/o\"] }\n}\n", nil, "Reference to undeclared instance", 14, `step "a" has no instance ["arm46"]; its for_each gives ["amd64"], ["arm64"]. Did you mean "arm64"?`},
		{"missing index", busyboxSeed + "step \"a\" {\n  count = 2\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/o\"]\n}\nstep \"b\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/a\" = step.a[2].output[\"/out/o\"] }\n}\n", nil, "Reference to undeclared instance", 14, `has no instance [2]; its count gives [0] to [1]`},
		{"instance without key", busyboxSeed + "step \"a\" {\n  count = 2\n  image = seed.bb\n  run = [\"x\"]\n  outputs = [\"/out/o\"]\n}\nstep \"b\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/a\" = step.a.output[\"/out/o\"] }\n}\n", nil, "Missing instance key", 14, "refer to one instance as step.a[INDEX]"},
		{"each outside for_each", busyboxSeed + "step \"a\" {\n  image = seed.bb\n  run = [each.key]\n}\n", nil, "Reference to each outside a repeated block", 7, "has for_each"},
		{"seed instance missing", "seed \"bb\" {\n  for_each = toset([\"a\"])\n  layer { files = { \"/bin/busybox\" = host_file(\"/bin/sh\") } }\n}\nstep \"a\" {\n  image = seed.bb[\"b\"]\n  run = [\"x\"]\n}\n", nil, "Reference to undeclared instance", 6, `seed "bb" has no instance ["b"]`},
		{"local cycle", "locals {\n  a = local.b\n  b = local.a\n}\n", nil, "Cycle in local values", 2, "local.a → local.b → local.a"},
		{"bad equivalence", "capability \"c\" {\n  equivalence = \"jsn\"\n  interface \"cli\" { entrypoint = [\"/x\"] }\n}\n", nil, "Invalid equivalence", 2, `Did you mean "json"?`},
		{"cli exit code", "capability \"c\" {\n  interface \"cli\" {\n    entrypoint = [\"/x\"]\n    errors = { bad = 400 }\n  }\n}\n", nil, "Invalid exit code", 4, "1 to 255"},
		{"service error status", "capability \"c\" {\n  interface \"service\" {\n    entrypoint = [\"/x\"]\n    port = 8080\n    errors = { bad = 2 }\n  }\n}\n", nil, "Invalid error status", 5, "400 to 599"},
		{"service port", "capability \"c\" {\n  interface \"service\" {\n    entrypoint = [\"/x\"]\n    port = 70000\n  }\n}\n", nil, "Invalid port", 4, "1-65535"},
		{"service ready path", "capability \"c\" {\n  interface \"service\" {\n    entrypoint = [\"/x\"]\n    port = 8080\n    ready = \"healthz\"\n  }\n}\n", nil, "Invalid ready path", 5, "starting with"},
		{"ready on cli", "capability \"c\" {\n  interface \"cli\" {\n    entrypoint = [\"/x\"]\n    ready = \"/\"\n  }\n}\n", nil, "Unsupported argument", 4, ""},
		{"bad schema", "capability \"c\" {\n  interface \"cli\" {\n    entrypoint = [\"/x\"]\n    input = jsonschema(\"s.json\")\n  }\n}\n", map[string]string{"s.json": `{"type": 12}`}, "Invalid function argument", 4, "not a valid JSON Schema"},
		{"duplicate key schema", "capability \"c\" {\n  interface \"cli\" {\n    entrypoint = [\"/x\"]\n    input = jsonschema(\"s.json\")\n  }\n}\n", map[string]string{"s.json": `{"type": "array", "type": "object"}`}, "Invalid function argument", 4, "not valid JSON"},
		{"sealed mount", busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"cases/sealed/*.json\" }\n}\nstep \"a\" {\n  image = seed.bb\n  run = [\"x\"]\n  mounts = { \"/cases\" = dir(\"cases\") }\n}\n", map[string]string{"cases/sealed/1.json": "{}", "cases/dev/1.json": "{}"}, "Configuration reads sealed cases", 12, `dir("cases") reaches cases/sealed/1.json`},
		{"sealed file read", "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"sealed/*.json\" }\n}\nlocals {\n  leak = file(\"sealed/1.json\")\n}\n", map[string]string{"sealed/1.json": "{}"}, "Configuration reads sealed cases", 6, `file("sealed/1.json")`},
		{"sealed via symlink alias", busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"sealed/*.json\" }\n}\nseed \"s\" {\n  layer {\n    dir = dir(\"alias\")\n  }\n}\n", map[string]string{"sealed/1.json": "{}", "alias": "->sealed"}, "Configuration reads sealed cases", 11, "sealed/1.json"},
		{"sealed fileset", "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"cases/sealed/*.json\" }\n}\nlocals {\n  names = fileset(\"cases\", \"**\")\n}\n", map[string]string{"cases/sealed/1.json": "{}", "cases/dev/1.json": "{}"}, "Configuration reads sealed cases", 6, `fileset("cases", "**") reaches cases/sealed/1.json`},
		{"dev suite overlaps sealed", "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"cases/sealed/*.json\" }\n  suite \"dev\" { cases = \"cases/**/*.json\" }\n}\n", map[string]string{"cases/sealed/1.json": "{}", "cases/dev/1.json": "{}"}, "Suite includes sealed cases", 4, "cases/sealed/1.json"},
		{"no case files", "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"dev\" { cases = \"nothing/*.json\" }\n}\n", nil, "No case files", 3, ""},
		{"accept kind", busyboxSeed + "product \"p\" {\n  accept \"cli\" {}\n}\n", nil, "Invalid acceptance kind", 6, "check block"},
		{"accept data reserved", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 8080\n    cases = \"a/*.json\"\n    data = \"/tmp/d\"\n  }\n}\n", map[string]string{"a/1.json": "{}"}, "Invalid data path", 11, "reserved"},
		{"accept data over files", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 8080\n    cases = \"a/*.json\"\n    files = { \"/data/x\" = \"x\" }\n    data = \"/data\"\n  }\n}\n", map[string]string{"a/1.json": "{}"}, "Invalid data path", 12, `overlaps files["/data/x"]`},
		{"accept port", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 0\n    cases = \"a/*.json\"\n  }\n}\n", map[string]string{"a/1.json": "{}"}, "Invalid port", 9, "1-65535"},
		{"accept no cases", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 8080\n    cases = \"a/*.json\"\n  }\n}\n", nil, "No case files", 10, ""},
		{"accept reads sealed", busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n  suite \"sealed\" { cases = \"sealed/*.json\" }\n}\n" + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 8080\n    cases = \"sealed/*.json\"\n  }\n}\n", map[string]string{"sealed/1.json": "{}"}, "Suite includes sealed cases", 10, "sealed/1.json"},
		{"deliver key escapes", busyboxSeed + "product \"p\" {\n  check \"c\" {\n    image = seed.bb\n    run = [\"true\"]\n  }\n  deliver {\n    to = \"dir:/tmp/r\"\n    files = { \"/../../../tmp/escaped\" = \"x\" }\n  }\n}\n", nil, "Invalid artifact path", 12, `"/../../../tmp/escaped" must be an absolute, clean path such as "/bin/app"`},
		{"deliver key relative", busyboxSeed + "product \"p\" {\n  check \"c\" {\n    image = seed.bb\n    run = [\"true\"]\n  }\n  deliver {\n    to = \"dir:/tmp/r\"\n    files = {\n      \"/ok\" = \"x\"\n      \"srv/../../x\" = \"y\"\n    }\n  }\n}\n", nil, "Invalid artifact path", 12, `"srv/../../x" must be an absolute, clean path`},
		{"deliver without acceptance", busyboxSeed + "product \"p\" {\n  deliver {\n    to = \"dir:/tmp/r\"\n    files = { \"/a\" = \"x\" }\n  }\n}\n", nil, "Delivery without acceptance", 6, `product "p" is delivered only after its acceptance passes, and it has none`},
		{"deliver file not checked", busyboxSeed + "product \"p\" {\n  check \"c\" {\n    image = seed.bb\n    mounts = { \"/a\" = \"x\" }\n    run = [\"true\"]\n  }\n  deliver {\n    to = \"dir:/tmp/r\"\n    files = { \"/a\" = \"x\", \"/b\" = \"y\" }\n  }\n}\n", nil, "Delivered file not checked", 13, `files["/b"] = inline(1 bytes) is mounted by none of product "p"'s checks`},
		{"deliver start not accepted", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\", \"/data\"]\n    port = 8080\n    cases = \"a/*.json\"\n  }\n  deliver {\n    to = \"dir:/tmp/r\"\n    files = { \"/x\" = \"y\" }\n    start = [\"/x\", \"../data\"]\n  }\n}\n", map[string]string{"a/1.json": "{}"}, "Start differs from the accepted entrypoint", 15, `start = ["/x" "../data"], but the service was accepted as entrypoint = ["/x" "/data"]`},
		{"duplicate accept", busyboxSeed + "product \"p\" {\n  accept \"service\" {\n    image = seed.bb\n    entrypoint = [\"/x\"]\n    port = 8080\n    cases = \"a/*.json\"\n  }\n  accept \"service\" {}\n}\n", map[string]string{"a/1.json": "{}"}, "Duplicate accept block", 12, "one accept block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"main.hcl": c.hcl}
			for k, v := range c.extra {
				files[k] = v
			}
			dir := writeProject(t, files)
			_, diags := Load(dir, Options{})
			if !diags.HasErrors() {
				t.Fatalf("no error; want %q", c.summary)
			}
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Summary == c.summary {
					found = d
					break
				}
			}
			if found == nil {
				t.Fatalf("want summary %q, got: %s", c.summary, diags.Error())
			}
			if found.Subject == nil || found.Subject.Start.Line != c.line || found.Subject.Filename != "main.hcl" {
				t.Errorf("want main.hcl line %d, got %v", c.line, found.Subject)
			}
			if !strings.Contains(found.Detail, c.detail) {
				t.Errorf("detail %q does not contain %q", found.Detail, c.detail)
			}
		})
	}
}

func TestVariablesPrecedence(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"main.hcl":   "variable \"a\" { default = \"d\" }\nvariable \"b\" {\n  type = number\n  default = 1\n}\nvariable \"c\" { type = list(string) }\n",
		"vars.hcl.x": "a = \"file\"\nb = 2\nc = [\"x\"]\n",
	})
	cfg, diags := Load(dir, Options{VarFiles: []string{filepath.Join(dir, "vars.hcl.x")}, Vars: map[string]string{"b": "3"}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Variables["a"].Value.AsString(); got != "file" {
		t.Errorf("a = %q, want the -var-file value", got)
	}
	if got, _ := cfg.Variables["b"].Value.AsBigFloat().Int64(); got != 3 {
		t.Errorf("b = %d, want the -var value 3", got)
	}
	if cfg.Variables["c"].Value.LengthInt() != 1 {
		t.Errorf("c = %#v", cfg.Variables["c"].Value)
	}
	_, diags = Load(dir, Options{Vars: map[string]string{"b": "three", "c": "[]"}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Invalid value for variable") {
		t.Errorf("want a type error for b=three, got %v", diags)
	}
	_, diags = Load(dir, Options{Vars: map[string]string{"bb": "1", "c": "[]"}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `Did you mean "b"?`) {
		t.Errorf("want an undeclared variable error with a suggestion, got %v", diags)
	}
}

func TestFunctions(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"main.hcl": `
locals {
  brief  = file("BRIEF.md")
  files  = fileset("src", "**/*.go")
  sum    = sha256("abc")
  fsum   = filesha256("BRIEF.md")
  doc    = jsondecode(jsonencode({ a = [1, 2] }))
  upper  = upper("x")
}
`,
		"BRIEF.md":        "make it work\n",
		"src/a.go":        "package a",
		"src/sub/b.go":    "package b",
		"src/sub/c.txt":   "no",
		".foundry/x.go":   "state",
		"src/deep/x/y.go": "package y",
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Locals["brief"].AsString(); got != "make it work\n" {
		t.Errorf("file() = %q", got)
	}
	var files []string
	for it := cfg.Locals["files"].ElementIterator(); it.Next(); {
		_, v := it.Element()
		files = append(files, v.AsString())
	}
	if strings.Join(files, ",") != "a.go,deep/x/y.go,sub/b.go" {
		t.Errorf("fileset = %v", files)
	}
	if got := cfg.Locals["sum"].AsString(); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("sha256 = %s", got)
	}
	if cfg.Locals["upper"].AsString() != "X" {
		t.Errorf("upper")
	}
	// The brief is an input: a saved plan must notice when it changes.
	found := false
	for _, in := range cfg.Inputs {
		found = found || (in.Kind == "project_file" && in.Path == "BRIEF.md")
	}
	if !found {
		t.Errorf("BRIEF.md not recorded as an input: %v", cfg.Inputs)
	}
}

func TestSymlinkEscapeRefused(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": `locals { x = file("link/hostname") }`})
	if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, diags := Load(dir, Options{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "outside the project directory") {
		t.Fatalf("want a symlink escape error, got %v", diags)
	}
}

func TestUntypedVariableTakesHCLValues(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": "variable \"x\" {}\nvariable \"s\" {}\n"})
	cfg, diags := Load(dir, Options{Vars: map[string]string{"x": "[1, 2]", "s": "hello world"}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if v := cfg.Variables["x"].Value; !v.Type().IsTupleType() || v.LengthInt() != 2 {
		t.Errorf("-var x=[1, 2] gave %#v, want a two-element list", v)
	}
	if v := cfg.Variables["s"].Value; v.AsString() != "hello world" {
		t.Errorf("-var s=hello world gave %#v", v)
	}
}

// A schema keeps its numbers exactly: canonicalization would round 2^63-1 to a double.
func TestSchemaKeepsLargeIntegers(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"main.hcl": "capability \"c\" {\n  interface \"cli\" {\n    entrypoint = [\"/x\"]\n    input = jsonschema(\"s.json\")\n  }\n}\n",
		"s.json":   `{"type": "integer", "maximum": 9223372036854775807}`,
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Capabilities["c"].Interface.InputSchema; !strings.Contains(got, "9223372036854775807") {
		t.Fatalf("schema lost its bound: %s", got)
	}
}

// TestStepOutputStringQuotesAsFmt: Artifact.String builds step output names without fmt,
// and must still quote paths exactly as %q does (plans show and compare them).
func TestStepOutputStringQuotesAsFmt(t *testing.T) {
	for _, p := range []string{"/out/o", "/out/a b", "/out/\"q\"", "/out/\\", "/out/\n\t", "/out/é", "/out/\x00\xff", ""} {
		a := &Artifact{Kind: ArtifactStepOutput, Node: "step.x", Path: p}
		if got, want := a.String(), fmt.Sprintf("%s.output[%q]", a.Node, a.Path); got != want {
			t.Errorf("String() = %s, want %s", got, want)
		}
	}
}

// A product's check is decoded in its product's step scope without being one of its steps:
// it sees the steps' outputs and declares none of its own, even when a step shares its name.
func TestProductCheckSeesItsProductsSteps(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": busyboxSeed + `
product "p" {
  step "render" {
    image   = seed.bb
    run     = ["sh", "-c", "echo hi > /out/r"]
    outputs = ["/out/r"]
  }
  step "twin" {
    image   = seed.bb
    run     = ["sh", "-c", "echo hi > /out/t"]
    outputs = ["/out/t"]
  }
  check "nonempty" {
    image  = seed.bb
    mounts = { "/r" = step.render.output["/out/r"] }
    run    = ["test", "-s", "/r"]
  }
  check "twin" {
    image = seed.bb
    run   = ["true"]
  }
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := cfg.Products["p"]
	chk := p.Checks["nonempty"]
	if chk == nil || chk.Kind != "check" || chk.Outputs != nil {
		t.Fatalf("check = %+v, want a check without outputs", chk)
	}
	if m := chk.Mounts["/r"]; m == nil || m.Node != "product.p.step.render" || m.Path != "/out/r" {
		t.Fatalf("check mount = %+v, want product.p.step.render's /out/r", m)
	}
	if twin := p.Checks["twin"]; twin == nil || twin.Outputs != nil {
		t.Fatalf("check twin = %+v, want no outputs beside its same-named step", twin)
	}
}

// cleanContent gives what hclsyntax's Content gives for every body Content has nothing to
// report about, and gives up on every other, so that Content reports it.
func TestCleanContentIsContent(t *testing.T) {
	schemas := []*hcl.BodySchema{
		stepSchema, limitsSchema,
		{Attributes: []hcl.AttributeSchema{{Name: "to", Required: true}, {Name: "files"}}},
		{Blocks: []hcl.BlockHeaderSchema{{Type: "step", LabelNames: []string{"name"}}, {Type: "package"}}},
	}
	bodies := []string{
		"",
		"run = [\"x\"]\nimage = seed.base\n",
		"run = [\"x\"]\nnope = 1\n",
		"to = \"a\"\nfiles = {}\n",
		"files = {}\n",
		"to = \"a\"\nfiles = {}\nextra = true\n",
		"limits {\n  memory = \"1GiB\"\n}\nrun = [\"x\"]\n",
		"limits {\n}\nlimits {\n}\n",
		"limits \"x\" {\n}\n",
		"memory = \"1GiB\"\ncpus = 2\n",
		"step \"a\" {\n}\npackage {\n}\nstep \"b\" {\n}\n",
		"step {\n}\n",
		"step \"a\" \"b\" {\n}\n",
		"package \"p\" {\n}\n",
		"other {\n}\n",
		"limits = 1\n",
		"step = 1\n",
	}
	for _, schema := range schemas {
		for _, src := range bodies {
			f, diags := hclsyntax.ParseConfig([]byte(src), "x.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatalf("%q: %s", src, diags)
			}
			want, wdiags := f.Body.Content(schema)
			got, ok := cleanContent(f.Body, schema)
			if ok != (len(wdiags) == 0) {
				t.Errorf("%q against %v: clean %v, but Content reports %v", src, schema, ok, wdiags)
				continue
			}
			if ok && !reflect.DeepEqual(got, want) {
				t.Errorf("%q against %v:\nclean   %#v\ncontent %#v", src, schema, got, want)
			}
		}
	}
}

// A name that is not an identifier is reported once, as such, wherever the block is: not as
// the duplicate of the block whose address it spells, and also among many valid steps.
func TestInvalidNamesAreReportedAsSuch(t *testing.T) {
	step := func(name string) string {
		return fmt.Sprintf("  step %q {\n    image = seed.bb\n    run = [\"x\"]\n  }\n", name)
	}
	for name, files := range map[string]map[string]string{
		"spelling a product's step": {"main.hcl": busyboxSeed + "product \"p\" {\n" + step("x") + "}\nproduct \"p.step.x\" {\n" + step("y") + "}\n"},
		"a recipe's step": {"main.hcl": busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n}\n" +
			"recipe \"r\" {\n  provides = capability.c\n" + step("has space") + "  package { files = {} }\n}\n"},
		"among many steps": {"main.hcl": manyMain, "sh": "#!/bin/sh\n", "steps.hcl": manySteps(200, "{}") + strings.TrimPrefix(strings.ReplaceAll(step("a.b"), "seed.bb", "seed.base"), "  ")},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := Load(writeProject(t, files), Options{})
			var got []string
			for _, d := range diags {
				got = append(got, d.Summary)
			}
			if len(got) != 1 || got[0] != "Invalid name" {
				t.Fatalf("diagnostics %q, want one «Invalid name»: %s", got, diags.Error())
			}
		})
	}
}

// manySteps returns n steps s0... that each mount the output of the one before, and the
// first one's mounts given.
func manySteps(n int, first string) string { return namedSteps("s", n, first) }

// namedSteps is manySteps with another prefix of names than "s".
func namedSteps(prefix string, n int, first string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		mounts := first
		if i > 0 {
			mounts = fmt.Sprintf(`{ "/in" = step.%s%d.output["/out/o"] }`, prefix, i-1)
		}
		fmt.Fprintf(&b, "step \"%s%d\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo %d > /out/o\"]\n  mounts  = %s\n  outputs = [\"/out/o\"]\n}\n", prefix, i, i, mounts)
	}
	return b.String()
}

// manyMain is the main.hcl of projects made with manySteps.
const manyMain = `
locals {
  key = "/out/o"
}
seed "base" {
  layer { files = { "/bin/sh" = file("sh") } }
}
`

// The configuration keeps the project's files for rendering diagnostics.
func TestLoadKeepsFiles(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": manyMain, "sh": "x", "steps.hcl": manySteps(50, "{}")})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, name := range []string{"main.hcl", "steps.hcl"} {
		src, _ := os.ReadFile(filepath.Join(dir, name))
		if f := cfg.Files[name]; f == nil || string(f.Bytes) != string(src) {
			t.Errorf("Files[%q] is not the file's text", name)
		}
	}
}

// EachStep gives a loaded configuration's top-level steps in declaration order: files in
// name order, blocks in file order, whatever the steps refer to.
func TestEachStepInDeclarationOrder(t *testing.T) {
	step := func(name, mounts string) string {
		return fmt.Sprintf("step %q {\n  image   = seed.base\n  run     = [\"true\"]\n  mounts  = %s\n  outputs = [\"/out/o\"]\n}\n", name, mounts)
	}
	files := map[string]string{"sh": "#!/bin/sh\n",
		"main.hcl": manyMain + step("m", "{}"),
		"a.hcl":    step("zz", "{}") + step("held", `{ "/in" = step.zz.output[local.key] }`) + step("aa", "{}"),
		"b.hcl":    namedSteps("t", 150, "{}")}
	want := []string{"zz", "held", "aa"}
	for i := 0; i < 150; i++ {
		want = append(want, fmt.Sprintf("t%d", i))
	}
	want = append(want, "m")
	cfg, diags := Load(writeProject(t, files), Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	cfg.EachStep(func(s *Step) { got = append(got, s.Name) })
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("EachStep order:\n got %v\nwant %v", got, want)
	}
}

// for_each and count make one step (or seed) per key or index, addressed NAME["KEY"] and
// NAME[INDEX]; their expressions see each.key, each.value and count.index, and references
// reach one instance, or all of them through values() or a for expression.
func TestForEachAndCountInstances(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": `
variable "platforms" {
  default = { amd64 = "linux/amd64", arm64 = "linux/arm64" }
}
seed "bb" {
  for_each = toset(["a", "b"])
  layer { files = { "/bin/busybox" = host_file("/bin/sh") } }
  env = { WHICH = each.key }
}
step "build" {
  for_each = var.platforms
  image    = seed.bb["a"]
  run      = ["build", each.key, each.value]
  outputs  = ["/out/${each.key}"]
}
step "shard" {
  count   = 3
  image   = seed.bb["b"]
  mounts  = { "/app" = step.build["arm64"].output["/out/arm64"] }
  run     = ["test", "${count.index}"]
  outputs = ["/out/r"]
}
step "all" {
  image   = seed.bb["a"]
  mounts  = merge({ for i, s in step.shard : "/shard/${i}" => s.output["/out/r"] }, { for k, b in step.build : "/app/${k}" => b.output["/out/${k}"] })
  run     = ["cat"]
  outputs = ["/out/all"]
}
step "first" {
  image  = seed.bb["a"]
  mounts = { "/r" = values(step.build)[0].output["/out/amd64"], "/s" = (step.shard[*].output["/out/r"])[1] }
  run    = ["true"]
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := sortedKeys(cfg.Seeds); strings.Join(got, " ") != `bb["a"] bb["b"]` {
		t.Fatalf("seeds: %q", got)
	}
	if e := cfg.Seeds[`bb["b"]`].Env["WHICH"]; e != "b" {
		t.Errorf(`seed bb["b"] sees each.key %q`, e)
	}
	want := []string{`all`, `build["amd64"]`, `build["arm64"]`, `first`, `shard[0]`, `shard[1]`, `shard[2]`}
	if got := sortedKeys(cfg.Steps); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("steps: %q, want %q", got, want)
	}
	b := cfg.Steps[`build["arm64"]`]
	if b.Address() != `step.build["arm64"]` || strings.Join(b.Run, " ") != "build arm64 linux/arm64" || b.Outputs[0] != "/out/arm64" {
		t.Errorf("build[arm64]: %s %q %q", b.Address(), b.Run, b.Outputs)
	}
	if i := b.Instance; i == nil || i.Block != "build" || i.Key != "arm64" || i.Count {
		t.Errorf("build[arm64]'s instance: %+v", i)
	}
	if i := cfg.Steps["shard[2]"].Instance; i == nil || i.Block != "shard" || i.Key != "2" || !i.Count {
		t.Errorf("shard[2]'s instance: %+v", i)
	}
	if cfg.Steps["all"].Instance != nil || cfg.Seeds[`bb["a"]`].Instance.Key != "a" {
		t.Error("instances of lone blocks, or of seeds, are wrong")
	}
	if b.Image.Node != `seed.bb["a"]` {
		t.Errorf("image %s", b.Image.Node)
	}
	s2 := cfg.Steps["shard[2]"]
	if s2.Run[1] != "2" || s2.Mounts["/app"].Node != `step.build["arm64"]` || s2.Image.Node != `seed.bb["b"]` {
		t.Errorf("shard[2]: %q %v %s", s2.Run, s2.Mounts["/app"], s2.Image.Node)
	}
	all := cfg.Steps["all"].Mounts
	if len(all) != 5 || all["/shard/1"].Node != "step.shard[1]" || all["/app/amd64"].Node != `step.build["amd64"]` || all["/app/amd64"].Path != "/out/amd64" {
		t.Errorf("all's mounts: %v", all)
	}
	if m := cfg.Steps["first"].Mounts; m["/r"].Node != `step.build["amd64"]` || m["/s"].Node != "step.shard[1]" {
		t.Errorf("values(step.build)[0] and step.shard[*]: %v", m)
	}
}
