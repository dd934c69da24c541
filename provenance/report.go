package provenance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as indented JSON (the -json output of foundry verify).
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes the report for a person: the verdict first, then every artifact with
// each check as PASS or FAIL and its reason, candidates and dependencies indented under it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	ok := 0
	for _, a := range r.Artifacts {
		if a.OK {
			ok++
		}
	}
	verdict := "VERIFIED"
	if !r.OK {
		verdict = "NOT VERIFIED"
	}
	fmt.Fprintf(&b, "%s: %d of %d artifact(s) verified\n", verdict, ok, len(r.Artifacts))
	for _, k := range r.Keys {
		fmt.Fprintf(&b, "  trusted key: %s (%s)\n", k.Name, k.KeyID)
	}
	for _, id := range r.Builders {
		fmt.Fprintf(&b, "  allowed builder: %s\n", id)
	}
	for _, t := range r.Types {
		fmt.Fprintf(&b, "  required type: %s\n", t)
	}
	for _, id := range r.Evaluators {
		fmt.Fprintf(&b, "  allowed evaluator: %s\n", id)
	}
	for _, id := range r.Verifiers {
		fmt.Fprintf(&b, "  allowed verifier: %s\n", id)
	}
	for _, a := range r.Artifacts {
		b.WriteString("\n")
		writeArtifact(&b, a, "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mark(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func writeChecks(b *strings.Builder, cs []Check, indent string) {
	for _, c := range cs {
		code := ""
		if !c.OK && c.Code != "" {
			code = " [" + c.Code + "]"
		}
		fmt.Fprintf(b, "%s%s %s%s: %s\n", indent, mark(c.OK), c.Name, code, c.Detail)
	}
}

// writeArtifact writes an artifact's checks and its envelopes. For a verified artifact, the
// envelopes it relied on are written in full and the refused ones, which it did not need,
// are listed after them with one line each saying why; for an unverified one every
// envelope is written in full, since any of them may be the one that should have passed.
func writeArtifact(b *strings.Builder, a *ArtifactReport, indent string) {
	fmt.Fprintf(b, "%s%s %s %s\n", indent, mark(a.OK), a.Name, a.Digest)
	writeChecks(b, a.Checks, indent+"  ")
	// An envelope refused about the artifact itself may still be relied on as the input of
	// an accepted summary (step provenance names the step's outputs, not the package).
	relied := map[string]bool{}
	for _, at := range a.Attestations {
		for _, in := range at.Inputs {
			if at.OK && in.OK {
				relied[in.Digest] = true
			}
		}
	}
	var unneeded []*AttestationReport
	for _, at := range a.Attestations {
		if a.OK && !at.OK {
			if !relied[at.Digest] {
				unneeded = append(unneeded, at)
			}
			continue
		}
		writeAttestation(b, at, "envelope", indent+"  ")
	}
	if len(unneeded) > 0 {
		fmt.Fprintf(b, "%s  not needed (%d envelope(s) that do not bear on this artifact's verdict):\n", indent, len(unneeded))
		for _, at := range unneeded {
			fmt.Fprintf(b, "%s    %s (%s): %s\n", indent, at.Source, at.Digest, at.refusal(""))
		}
	}
}

func writeAttestation(b *strings.Builder, at *AttestationReport, what, indent string) {
	state := "accepted"
	if !at.OK {
		state = "refused"
	}
	src := at.Source
	if src == "" {
		src = "not found"
	}
	fmt.Fprintf(b, "%s%s %s (%s): %s\n", indent, what, src, at.Digest, state)
	writeChecks(b, at.Checks, indent+"  ")
	for _, d := range at.Dependencies {
		fmt.Fprintf(b, "%s  dependency:\n", indent)
		writeArtifact(b, d, indent+"    ")
	}
	for _, in := range at.Inputs {
		writeAttestation(b, in, "input attestation", indent+"  ")
	}
	if at.Provenance != nil {
		fmt.Fprintf(b, "%s  candidate's own provenance:\n", indent)
		writeArtifact(b, at.Provenance, indent+"    ")
	}
}
