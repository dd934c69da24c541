package provenance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// SignedTestResult is a test result read from a directory whose envelope verified with one
// of the trusted keys: evidence, unlike a row that indexes it.
type SignedTestResult struct {
	*TestResult
	Envelope []byte
	Digest   string // EnvelopeDigest of Envelope
	Path     string
}

// TestResultsIn reads every envelope in dir (not following links, skipping files over
// dsse.MaxEnvelopeSize and anything that is not a DSSE envelope) whose statement is a test
// result, and returns those that verify with one of keys (strict DSSE, in-toto payloadType,
// a signature by a trusted key, a well-formed Foundry test result) and come from one of
// evaluators (DefaultEvaluators() when empty). Whatever does not verify is left out: it is
// not evidence. A missing directory holds nothing.
func TestResultsIn(dir string, keys []*Verifier, evaluators []string) ([]SignedTestResult, error) {
	var vs []signature.Verifier
	for _, k := range keys {
		if k == nil || k.v == nil {
			return nil, errors.New("test results: nil key")
		}
		vs = append(vs, k.v)
	}
	if len(evaluators) == 0 {
		evaluators = DefaultEvaluators()
	}
	var out []SignedTestResult
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > dsse.MaxEnvelopeSize {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading attestation: %w", err)
		}
		if claimedPredicateType(b) != PredicateTestResult {
			return nil
		}
		st, err := openVerified(b, vs)
		if err != nil {
			return nil
		}
		tr, err := ParseTestResult(st)
		if err != nil {
			return nil
		}
		allowed := false
		for _, e := range evaluators {
			allowed = allowed || e == tr.Evaluator
		}
		if allowed {
			out = append(out, SignedTestResult{TestResult: tr, Envelope: b, Digest: EnvelopeDigest(b), Path: p})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attestation directory %s: %w", dir, err)
	}
	return out, nil
}
