package main

import (
	"strings"
	"testing"
)

// referenceEdits add to the reconstruct fixture a reference (busybox sort behind a JSON
// adapter, in its own sandbox) whose outputs a generated sealed batch expects; pipeline is
// the adapter's sort, and rights its rights.
func referenceEdits(sortFlags, rights string) []string {
	ref := "reference \"bbsort\" {\n      image      = seed.bb\n      entrypoint = [\"sh\", \"-c\", \"tr -d '[] \\\\n' | tr ',' '\\\\n' | sort " + sortFlags +
		" | paste -sd, - | sed 's/^/[/; s/$/]/'\"]\n      licence    = \"GPL-2.0-only\"\n      origin     = \"busybox, from the host\"\n      " + rights + "\n    }\n    builder {"
	return []string{
		"reconstruct {\n    builder {", "reconstruct {\n    " + ref,
		`suite "sealed" { cases = "sealed/*.json" }`, "suite \"sealed\" {\n    cases = \"sealed/*.json\"\n    generate {\n      count  = 12\n      expect = reference.bbsort\n    }\n  }",
		`budget { candidates = CANDIDATES }`, "budget {\n      candidates = 3\n      probes = 60\n    }",
	}
}

// A generated sealed batch takes its expected outputs from the reference, run in its own
// sandbox: round 1's sorter, which drops duplicates, is rejected; round 2's is admitted,
// and the admission says what was proven against the reference.
func TestReferenceDifferentialAdmission(t *testing.T) {
	dir := newReconstructFixture(t, "3", referenceEdits("-n", "observe = true")...)
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: failed the sealed suite",
		"ADM capability.sorter: reconstruct round 2 admitted as",
		"agreed with reference bbsort on ", " generated sealed case(s) from seed ", "0 disagreements; 1 hand-written sealed case(s) passed" /* dup.json was disclosed to round 2 */)
}

// A reference that disagrees with a hand-written sealed case stops the job, naming the case.
func TestReferenceContractDisagreement(t *testing.T) {
	dir := newReconstructFixture(t, "3", referenceEdits("-nu", "observe = true")...)
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr, "reference and contract disagree: reference bbsort on case sealed/dup.json")
	if strings.Contains(r.stderr, "admitted as") {
		t.Errorf("admitted:\n%s", r.stderr)
	}
}

// A candidate holding a file byte-identical to one of a reference that may not be
// distributed is refused before it is evaluated.
func TestReferenceNotDistributableRefused(t *testing.T) {
	edits := append(referenceEdits("-n", "observe = true\n      distribute = false"),
		`run     = ["sh", "/src/propose.sh"]`, `run     = ["sh", "-c", "sh /src/propose.sh && cp /bin/busybox /out/bb"]`,
		`outputs = ["/out/sorter"]`, `outputs = ["/out/sorter", "/out/bb"]`,
		`files = { "/bin/sorter" = "/out/sorter" }`, `files = { "/bin/sorter" = "/out/sorter", "/opt/bb" = "/out/bb" }`)
	dir := newReconstructFixture(t, "2", edits...)
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr, "its file /opt/bb is byte-identical to /bin/busybox of reference bbsort, whose dossier does not allow distributing its bytes")
	if strings.Contains(r.stderr, "admitted as") {
		t.Errorf("admitted:\n%s", r.stderr)
	}
}
