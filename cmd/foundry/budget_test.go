package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/lang"
)

// writeMain writes a project of one main.hcl into a new directory.
func writeMain(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var budgetLineRE = regexp.MustCompile(`Error: Evaluation budget exceeded\n\n  on main\.hcl line (\d+)`)

// A few lines of HCL that would take minutes and gigabytes are refused, by validate, at the
// expression that took evaluation past its budget. The time each takes is logged (peak memory
// is measured by hand: see the commit that added this test).
func TestValidateRefusesRunawayEvaluation(t *testing.T) {
	doubling := []string{"locals {", `  a0 = "abcdefgh"`}
	for i := 1; i < 60; i++ {
		doubling = append(doubling, fmt.Sprintf(`  a%d = "${local.a%d}${local.a%d}"`, i, i-1, i-1))
	}
	doubling = append(doubling, "}")
	for _, tc := range []struct {
		name, src string
		limit     string // the variable the diagnostic names
		line      func(t *testing.T, line int)
	}{
		{"nested for over range(1000)", "locals {\n  x = [for a in range(1000) : [for b in range(1000) : [for c in range(1000) : c]]]\n}\n",
			lang.EnvMaxValues, lineIs(2)},
		{"nested joins over range(1000)", "locals {\n  x = join(\",\", [for a in range(1000) : join(\",\", [for b in range(1000) : join(\",\", [for c in range(1000) : tostring(c)])])])\n}\n",
			lang.EnvMaxValues, lineIs(2)},
		{"a string that doubles from local to local", strings.Join(doubling, "\n") + "\n", lang.EnvMaxBytes,
			func(t *testing.T, line int) {
				// The local that crossed the limit holds a string of the order of the limit.
				size := int64(8) << (line - 2)
				if line < 3 || line > 61 || size < lang.DefaultBudget.MaxBytes/16 || size > lang.DefaultBudget.MaxBytes {
					t.Errorf("refused at line %d, the local of %d bytes; want the one that crossed %d bytes", line, size, lang.DefaultBudget.MaxBytes)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeMain(t, tc.src)
			start := time.Now()
			code, _, stderr := runCLI(t, "validate", dir)
			t.Logf("refused in %v", time.Since(start))
			if code != exitError {
				t.Fatalf("validate exited %d, want %d:\n%s", code, exitError, stderr)
			}
			m := budgetLineRE.FindStringSubmatch(stderr)
			if m == nil || strings.Count(stderr, "Error:") != 1 || !strings.Contains(stderr, tc.limit) {
				t.Fatalf("want one «Evaluation budget exceeded» naming %s:\n%s", tc.limit, stderr)
			}
			line, _ := strconv.Atoi(m[1])
			tc.line(t, line)
		})
	}
}

func lineIs(want int) func(*testing.T, int) {
	return func(t *testing.T, line int) {
		if line != want {
			t.Errorf("refused at main.hcl line %d, want line %d", line, want)
		}
	}
}

// The operator sets the budget in the environment: a project over the default is refused,
// and validates once FOUNDRY_EVAL_MAX_VALUES is raised; a value that is not a number is
// refused before anything is loaded.
func TestEvalBudgetFromEnvironment(t *testing.T) {
	dir := writeMain(t, "locals {\n  ids = flatten([for i in range(300) : [for j in range(1000) : \"id-${i}-${j}\"]])\n}\n")
	if code, _, stderr := runCLI(t, "validate", dir); code != exitError || !strings.Contains(stderr, "Evaluation budget exceeded") {
		t.Fatalf("with the default budget: exit %d\n%s", code, stderr)
	}
	t.Setenv(lang.EnvMaxValues, "5000000")
	if code, out, stderr := runCLI(t, "validate", dir); code != exitOK {
		t.Fatalf("with %s=5000000: exit %d\n%s%s", lang.EnvMaxValues, code, out, stderr)
	}
	for _, bad := range [][2]string{{lang.EnvMaxValues, "many"}, {lang.EnvMaxBytes, "1 parsec"}, {lang.EnvTimeout, "-1s"}} {
		t.Setenv(bad[0], bad[1])
		code, _, stderr := runCLI(t, "validate", dir)
		if code != exitError || !strings.Contains(stderr, "Invalid evaluation budget") || !strings.Contains(stderr, bad[0]+"="+bad[1]) {
			t.Errorf("%s=%s: exit %d\n%s", bad[0], bad[1], code, stderr)
		}
		os.Unsetenv(bad[0])
	}
}
