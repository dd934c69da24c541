package evaluate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/generate"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// SeedDependency is the name, in a sealed test result's configuration, of the secret seed
// its generated cases were drawn from: revealed there, after the judgement, and nowhere
// before (spec/capability.md §6b).
const SeedDependency = "generated-seed"

// generatedCases makes count cases of suite from seed with the built-in generators over
// capability capb's input schema. Each expects only what the contract says of every valid
// input (verdict.Expectation.Contract); an input the schema refuses, or made twice, is
// dropped, so a suite may hold fewer. A dev or repair case is named by its seed and index, which builders
// know; a sealed one, like every sealed case, by its digest.
func generatedCases(capb *lang.Capability, suite, seed string, count int) ([]suiteCase, error) {
	schema := "{}"
	if capb.Interface != nil && capb.Interface.InputSchema != "" {
		schema = capb.Interface.InputSchema
	}
	values, err := generate.Values([]byte(schema), seed, count)
	if err != nil {
		return nil, fmt.Errorf("capability %s, suite %s, generate: %w", capb.Name, suite, err)
	}
	var out []suiteCase
	seen := map[digest.Digest]bool{}
	for i, v := range values {
		if !verdict.ValidInput(capb, v) {
			continue
		}
		d := digest.FromBytes(fmt.Appendf(nil, `{"generated":%q,"input":%s}`, suite, v))
		if seen[d] { // the same input twice is one case (a test result names each once)
			continue
		}
		seen[d] = true
		name := fmt.Sprintf("generated/%s/%s/%d", suite, seed, i)
		if suite == provenance.SuiteSealed {
			name = string(d)
		}
		sc := suiteCase{c: &verdict.Case{Name: name, Input: v, Expect: verdict.Expectation{Contract: true}}, digest: d, name: name}
		if s := capb.Suites[suite]; s != nil && s.Generate != nil {
			sc.ref = s.Generate.Expect
		}
		out = append(out, sc)
	}
	return out, nil
}

// freshSeed draws a sealed batch's secret seed: 128 bits from the system's randomness, so
// no one can compute the batch before its signed result reveals the seed.
func freshSeed() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("drawing a sealed seed: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// seedDependency records seed in a signed sealed result: its URI names the seed and the
// count (anyone may regenerate the batch from it), its digest is the seed's.
func seedDependency(seed string, count int) provenance.Dependency {
	return provenance.Dependency{Name: SeedDependency, URI: fmt.Sprintf("foundry:generate?count=%d&seed=%s", count, seed), Digest: string(digest.FromBytes([]byte(seed)))}
}

// GeneratedInputs are the inputs of the generated cases of capability capb's dev or repair
// suite, as the evaluator runs them (none when the suite has no generate block): what a
// reconstruction's /job shows builders beside the case files.
func GeneratedInputs(capb *lang.Capability, suite string) ([][]byte, error) {
	s := capb.Suites[suite]
	if s == nil || s.Generate == nil || s.Sealed {
		return nil, nil
	}
	cases, err := generatedCases(capb, suite, s.Generate.Seed, s.Generate.Count)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(cases))
	for i, c := range cases {
		out[i] = c.c.Input
	}
	return out, nil
}

// evidence says what a sealed suite with generate block g proved when it passed: count
// cases generated from seed (with their reference's outputs expected, when g names one) and
// handWritten hand-written sealed cases.
func evidence(g *lang.Generate, seed string, count, handWritten int) string {
	if g.Expect != "" {
		return fmt.Sprintf("agreed with reference %s on %d generated sealed case(s) from seed %s, 0 disagreements; %d hand-written sealed case(s) passed", g.Expect, count, seed, handWritten)
	}
	return fmt.Sprintf("met the contract on %d generated sealed case(s) from seed %s; %d hand-written sealed case(s) passed", count, seed, handWritten)
}

// referenced reports whether a suite of capb expects a reference's outputs.
func referenced(capb *lang.Capability) bool {
	for _, s := range capb.Suites {
		if s.Reference() != "" {
			return true
		}
	}
	return false
}
