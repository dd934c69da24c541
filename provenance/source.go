package provenance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// DirSource is an AttestationSource over a directory of envelope files (any names, any
// depth). It indexes the files by the subject digests their statements claim, and by their
// own envelope digest (an EnvelopeSource); the index is built from unverified bytes, which
// is safe because Verify checks every candidate it is given and a wrong candidate can only
// be refused.
type DirSource struct {
	dir        string
	byDigest   map[string][]string // subject digest → file paths
	byEnvelope map[string][]string // envelope digest → file paths
	// Skipped lists files that are not envelopes Foundry could index, with the reason.
	Skipped []SkippedFile
}

// SkippedFile is a file DirSource did not index.
type SkippedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// NewDirSource scans dir. Symbolic links are not followed and files larger than
// dsse.MaxEnvelopeSize are skipped.
func NewDirSource(dir string) (*DirSource, error) {
	// The directory itself may be a link (e.g. to a shared store); links inside it are not
	// followed.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("attestation directory: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("attestation directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("attestation directory %s: not a directory", dir)
	}
	s := &DirSource{dir: dir, byDigest: map[string][]string{}, byEnvelope: map[string][]string{}}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		// Name files under dir as the caller gave it, not under the resolved root.
		shown := p
		if rel, err := filepath.Rel(root, p); err == nil {
			shown = filepath.Join(dir, rel)
		}
		if !d.Type().IsRegular() {
			s.Skipped = append(s.Skipped, SkippedFile{shown, "not a regular file"})
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > dsse.MaxEnvelopeSize {
			s.Skipped = append(s.Skipped, SkippedFile{shown, fmt.Sprintf("larger than %d bytes", dsse.MaxEnvelopeSize)})
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := dsse.Parse(b); err == nil {
			// Indexed by its own digest even if its statement does not parse, so that a
			// summary listing it is told why it is refused, not that it is missing.
			ed := EnvelopeDigest(b)
			s.byEnvelope[ed] = append(s.byEnvelope[ed], shown)
		}
		subjects, err := ClaimedSubjects(b)
		if err != nil {
			s.Skipped = append(s.Skipped, SkippedFile{shown, err.Error()})
			return nil
		}
		for _, d := range subjects {
			s.byDigest[d] = append(s.byDigest[d], shown)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attestation directory %s: %w", dir, err)
	}
	for _, ps := range s.byDigest {
		sort.Strings(ps)
	}
	for _, ps := range s.byEnvelope {
		sort.Strings(ps)
	}
	return s, nil
}

// Lookup reads the files whose statements claim digest d. It reads them again rather than
// returning what was scanned, so a file replaced since the scan is verified as it is now.
func (s *DirSource) Lookup(_ context.Context, d string) ([]Attestation, error) {
	return s.read(s.byDigest[d])
}

// LookupEnvelope implements EnvelopeSource: the files whose bytes had envelope digest d
// when scanned, read again (Verify keeps them only if they still hash to d).
func (s *DirSource) LookupEnvelope(_ context.Context, d string) ([]Attestation, error) {
	return s.read(s.byEnvelope[d])
}

func (s *DirSource) read(paths []string) ([]Attestation, error) {
	var out []Attestation
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading attestation: %w", err)
		}
		out = append(out, Attestation{Source: p, Envelope: b})
	}
	return out, nil
}

// WriteEnvelope stores envelope bytes, unchanged, in dir as sha256-<hex>.intoto.json, named
// by EnvelopeDigest, so that a DirSource over dir finds them. The write is atomic (temporary
// file, fsync, rename); storing the same bytes twice is a no-op. Bytes that are not a DSSE
// envelope are refused, so the directory never holds garbage Foundry wrote itself.
func WriteEnvelope(dir string, envelope []byte) (string, error) {
	if _, err := dsse.Parse(envelope); err != nil {
		return "", fmt.Errorf("storing attestation: %w", err)
	}
	d := EnvelopeDigest(envelope)
	p := filepath.Join(dir, "sha256-"+d[len("sha256:"):]+".intoto.json")
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, envelope) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("storing attestation: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("storing attestation: %w", err)
	}
	_, werr := f.Write(envelope)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("storing attestation %s: %w", p, werr)
	}
	return p, nil
}

// ClaimedSubjects returns the sha256 subject digests ("sha256:<hex>", deduplicated) that the
// statement inside an envelope claims, WITHOUT verifying anything. It is for indexing and
// routing candidates only: nothing it returns is evidence.
func ClaimedSubjects(envelope []byte) ([]string, error) {
	env, err := dsse.Parse(envelope)
	if err != nil {
		return nil, err
	}
	st, err := ParseStatement(env.Payload)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, sub := range st.GetSubject() {
		if h, ok := sub.GetDigest()["sha256"]; ok && !seen[h] {
			seen[h] = true
			out = append(out, "sha256:"+h)
		}
	}
	return out, nil
}

// SignedSubjects verifies envelope (strict DSSE, the in-toto payloadType, a signature by
// one of keys) and returns the predicateType and the sha256 subject digests
// ("sha256:<hex>") its statement names. It judges nothing else: it is for recognising an
// attestation a signer already made (a publish that a crash cut short, performed again,
// reuses the summary it attached rather than minting another), never for admitting.
func SignedSubjects(envelope []byte, keys []*Verifier) (string, []string, error) {
	var vs []signature.Verifier
	for _, k := range keys {
		if k != nil && k.v != nil {
			vs = append(vs, k.v)
		}
	}
	if len(vs) == 0 {
		return "", nil, errors.New("no keys to verify the envelope with")
	}
	st, err := openVerified(envelope, vs)
	if err != nil {
		return "", nil, err
	}
	var out []string
	for _, sub := range st.GetSubject() {
		if h, ok := sub.GetDigest()["sha256"]; ok && !slices.Contains(out, "sha256:"+h) {
			out = append(out, "sha256:"+h)
		}
	}
	return st.GetPredicateType(), out, nil
}

// LookupEnvelope implements EnvelopeSource over the sources that implement it.
func (m MultiSource) LookupEnvelope(ctx context.Context, d string) ([]Attestation, error) {
	var out []Attestation
	for _, s := range m {
		es, ok := s.(EnvelopeSource)
		if !ok {
			continue
		}
		found, err := es.LookupEnvelope(ctx, d)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// MultiSource looks attestations up in each source in turn and returns all they find, so
// that, e.g., a local directory and a registry can be searched together. A failing source
// fails the lookup: silently ignoring it could hide the attestation that would verify.
type MultiSource []AttestationSource

// Lookup implements AttestationSource.
func (m MultiSource) Lookup(ctx context.Context, d string) ([]Attestation, error) {
	var out []Attestation
	for _, s := range m {
		found, err := s.Lookup(ctx, d)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}
