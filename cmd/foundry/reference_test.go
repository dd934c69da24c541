package main

import (
	"encoding/base64"
	"path/filepath"
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

	// The frozen dossier: in the job (jobs show, text and JSON), in each round's builder
	// provenance, and in the signed admission summary with what was proven against it.
	j := showJobJSON(t, dir, "sorter")
	if !strings.HasPrefix(string(j.Dossier), "sha256:") {
		t.Fatalf("jobs show -json: dossier %q", j.Dossier)
	}
	if code, out, errs := foundry(t, dir, "jobs", "show", "sorter"); code != 0 || !strings.Contains(out, "dossier    reference dossier "+string(j.Dossier)) {
		t.Errorf("jobs show: exit %d, no dossier %s\n%s%s", code, j.Dossier, out, errs)
	}
	builders, summaries := 0, 0
	for _, payload := range attestationPayloads(t, dir) {
		switch {
		case strings.Contains(payload, `"name":"/job"`):
			if strings.Contains(payload, `"name":"reference-dossier"`) && strings.Contains(payload, j.Dossier.Hex()) {
				builders++
			}
		case strings.Contains(payload, "https://slsa.dev/verification_summary/v1"):
			summaries++
			saysAll(t, "the admission summary", payload, `"foundry_reference_dossier":"`+string(j.Dossier)+`"`,
				`"foundry_evidence":"agreed with reference bbsort on `, ` generated sealed case(s) from seed `, `0 disagreements; 1 hand-written sealed case(s) passed"`)
		}
	}
	if builders != 2 || summaries != 1 {
		t.Errorf("%d builder provenance(s) name the dossier (want 2, one per round); %d admission summaries (want 1)", builders, summaries)
	}
	if code, out, errs := foundry(t, dir, "verify", "-key", filepath.Join(dir, ".foundry", "keys", "signing.pub"), j.Admitted); code != 0 {
		t.Errorf("verify %s: exit %d\n%s%s", j.Admitted, code, out, errs)
	}
}

// attestationPayloads are the statements (JSON, unverified) of the project's attestations.
func attestationPayloads(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, ".foundry", "attestations", "*.intoto.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		env, _ := readStatement(t, f)
		b, err := base64.StdEncoding.DecodeString(env["payload"].(string))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
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

// With inspect = true the builder finds the reference's files read-only at
// /reference/bbsort, what it found shows in foundry jobs show, and its provenance names
// that input; without inspect there is no /reference in its sandbox. The mount is an input
// of the builder's action: its cache key differs with inspect.
func TestReferenceInspectMount(t *testing.T) {
	look := []string{`run     = ["sh", "/src/propose.sh"]`,
		`run     = ["sh", "-c", "ls /reference/bbsort/bin >&2; (: > /reference/bbsort/x) 2>/dev/null || echo NOT-WRITABLE >&2; sh /src/propose.sh"]`}
	builderKeys := map[bool]string{}
	for _, inspect := range []bool{true, false} {
		rights := "observe = true"
		if inspect {
			rights += "\n      inspect = true"
		}
		dir := newReconstructFixture(t, "3", append(referenceEdits("-n", rights), look...)...)
		if r := apply(t, dir, nil, "-progress", "plain"); r.code != 0 {
			t.Fatalf("inspect %v: apply: exit %d\n%s", inspect, r.code, r.stderr)
		}
		code, out, errs := foundry(t, dir, "jobs", "show", "sorter", "-lines", "0")
		if code != 0 {
			t.Fatalf("jobs show: exit %d\n%s", code, errs)
		}
		round1 := out[strings.Index(out, "round 1 "):strings.Index(out, "round 2 ")]
		if inspect {
			saysAll(t, "jobs show, round 1", round1, "| busybox", "| sort", "| NOT-WRITABLE")
		} else if strings.Contains(round1, "busybox") || !strings.Contains(round1, "/reference/bbsort/bin: No such file or directory") {
			t.Errorf("without inspect, the builder saw the reference:\n%s", round1)
		}
		j := showJobJSON(t, dir, "sorter")
		builderKeys[inspect] = string(j.RoundList[0].Builder)
		// The builder's provenance names the reference it was shown, and only then.
		files, err := filepath.Glob(filepath.Join(dir, ".foundry", "attestations", "*.intoto.json"))
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, f := range files {
			_, st := readStatement(t, f)
			for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
				if d.Name == "/reference/bbsort" && strings.Contains(d.URI, "reference=bbsort") {
					named++
				}
			}
		}
		if want := map[bool]int{true: 2, false: 0}[inspect]; named != want {
			t.Errorf("inspect %v: %d builder provenance(s) name /reference/bbsort, want %d (one per round)", inspect, named, want)
		}
	}
	if builderKeys[true] == "" || builderKeys[true] == builderKeys[false] {
		t.Errorf("round 1's builder key with inspect %s, without %s: want two keys", builderKeys[true], builderKeys[false])
	}
}
