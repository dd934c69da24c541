package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileset() of a directory that holds sealed cases is refused as dir() of it is: the names of
// sealed cases are for the evaluator too.
func TestValidateRefusesFilesetOfSealedCases(t *testing.T) {
	dir := writeMain(t, `capability "c" {
  interface "cli" { entrypoint = ["/x"] }
  suite "sealed" { cases = "sealed/*.json" }
}
locals {
  names = fileset("sealed", "*")
}
`)
	if err := os.MkdirAll(filepath.Join(dir, "sealed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sealed", "1.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "validate", dir)
	for _, want := range []string{"Error: Configuration reads sealed cases", "on main.hcl line 6", `fileset("sealed", "*") reaches sealed/1.json, a sealed case of capability "c"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, stderr)
		}
	}
	if code != exitError {
		t.Errorf("validate exited %d, want %d", code, exitError)
	}
}
