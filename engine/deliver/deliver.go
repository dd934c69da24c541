// Package deliver writes a product's release to its destination once the product's checks
// passed (spec/language.md §10, spec/grants.md): a release manifest (release.json) naming
// the source, the delivered files, the start command and target, the acceptance evidence
// and restart instructions; the files; the evidence envelopes; and a signed delivery
// receipt (provenance.NewDeliveryReceipt) beside them.
//
// It holds invariant 6 of ARCHITECTURE.md for deliveries: every delivery goes through the
// effects outbox (engine/outbox) under a logical action ID of project, release digest,
// product, "deliver" and destination, and every destination is idempotent by content: a
// dir: release is written to a temporary directory and renamed into DEST/<release hex>, an
// oci-layout: or oci: (registry) release is a content-addressed artifact tagged only once
// its receipt is attached; so a delivery whose outcome a crash lost is reconciled by looking for its
// digest, never written twice. It never decides whether a destination is granted: the
// plan does (needs-grant), and engine/run refuses a product the plan did not grant. It does
// make sure a dir: or oci-layout: destination is reached from the directory its grant names
// without following a link or entering an earlier release (beneath.go).
//
// Each successful delivery is recorded in the state's releases table and moves the
// product's release channel at the destination to it (channel.go).
//
// It never imports engine/plan, engine/admit or engine/run (ARCHITECTURE.md's import rules,
// checked by internal/architecture).
package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Fault points of a delivery, after the outbox's (outbox.FaultBeforeDispatch and
// FaultAfterDispatch), with the product's address.
const (
	// FaultAfterCommit: the release is in place at the destination (a dir: release renamed
	// into DEST/<hex>; an oci-layout: artifact stored with its evidence, untagged); its
	// receipt is not written yet, and nothing of it is recorded locally.
	FaultAfterCommit = outbox.FaultAfterCommit
	// FaultBeforeRecord: the receipt is beside the release (attached, and the tag moved, in
	// a layout) and in .foundry/attestations; the outbox does not say the delivery
	// succeeded yet.
	FaultBeforeRecord = outbox.FaultBeforeRecord
)

// ReleaseType is the type of a release manifest.
const ReleaseType = "https://foundry.dev/release/v1"

// Files of a dir: release, in DEST/<release hex>/.
const (
	ManifestFile = "release.json"        // the release manifest, whose digest names the release
	FilesDir     = "files"               // the delivered files, whose tree digest is the artifact
	EvidenceDir  = "evidence"            // the acceptance envelopes, sha256-<hex>.intoto.json
	ReceiptFile  = "receipt.intoto.json" // the signed delivery receipt, written once the rest is in place
)

// Manifest is a release manifest. Its canonical JSON (RFC 8785) is release.json, and the
// SHA-256 of those bytes is the release's digest: the same product, source, files and
// evidence make the same release.
type Manifest struct {
	Type       string       `json:"type"`
	Project    string       `json:"project"`
	Product    string       `json:"product"`
	Revision   string       `json:"revision"` // the product's definition digest
	Source     string       `json:"source"`   // the plan's digest: the configuration and every input it read
	Artifact   string       `json:"artifact"` // the tree digest of the delivered files
	Target     string       `json:"target"`   // the platform the files are for
	Start      []string     `json:"start,omitempty"`
	Runtime    *Runtime     `json:"runtime,omitempty"`
	Acceptance []Acceptance `json:"acceptance"`
	Restart    string       `json:"restart"`
}

// Runtime is what an accepted release runs on: the image its acceptance ran the service on,
// by digest, with the release's files laid over that image's root. The files alone are
// not what was accepted when they need the image's (a shell, a server, libraries).
type Runtime struct {
	Image string `json:"image"` // the image's digest
	Seed  string `json:"seed"`  // the seed it was built from (the accept block's image)
}

// Acceptance is one check the release passed: its address, the cache key its passing
// result is recorded under, and the envelopes minted about it.
type Acceptance struct {
	Check        string   `json:"check"`
	Result       string   `json:"result"`
	Attestations []string `json:"attestations"`
}

// Check is a passed check as the run hands it over: its address, result key and envelopes.
type Check struct {
	Address   string
	Result    digest.Digest
	Envelopes [][]byte
}

// Request is one product to deliver.
type Request struct {
	Product  string // its address
	Revision digest.Digest
	Source   digest.Digest // the plan's digest
	Target   string
	Start    []string
	Runtime  *Runtime // the image the acceptance ran on; nil for a product with no accept block
	Dest     lang.Destination
	// Root is the granted directory a dir: or oci-layout: Dest is under (the grant the plan
	// found for it, lang.Grants.DeliveryGrant): Dest is reached from it following no
	// symbolic link and entering no earlier release (beneath.go).
	Root   string
	Tree   digest.Digest // the delivered files, in the workspace's store
	Checks []Check
}

// A Deliverer delivers the products of one run.
type Deliverer struct {
	Workspace *workspace.Workspace
	Attester  *workspace.Attester // signs the receipt
	// Keys verify the acceptance envelopes the receipt names (the signer's own key among them).
	Keys    []*provenance.Verifier
	Project string
	RunID   string
	Emit    func(event.Event)        // effect_reconciled
	Fault   func(point, node string) // the fault points above and the outbox's
}

// release is a request made into its manifest.
type release struct {
	*Request
	manifest []byte // release.json
	digest   digest.Digest
	evidence []provenance.Attestation // Source: the check's address
}

// Deliver writes req's release to its destination through the outbox and returns where it
// is ("dir:/srv/releases/<hex>", "oci-layout:/srv/oci@sha256:…", and for an oci:
// destination the registry reference "host[:port]/repo@sha256:…").
func (d *Deliverer) Deliver(ctx context.Context, req *Request) (string, error) {
	rel, err := makeRelease(d.Project, req)
	if err != nil {
		return "", err
	}
	var dest destination
	switch req.Dest.Scheme {
	case lang.SchemeDir:
		dest = &dirDest{d: d, rel: rel, at: filepath.Join(req.Dest.Path, rel.digest.Hex())}
	case lang.SchemeOCILayout, lang.SchemeOCI:
		dest = &layoutDest{d: d, rel: rel}
	default:
		return "", fmt.Errorf("%s: cannot deliver to %s", req.Product, req.Dest)
	}
	ob := &outbox.Outbox{State: d.Workspace.State, RunID: d.RunID, Fault: d.Fault}
	loc, err := ob.Do(ctx, &outbox.Effect{
		Project: d.Project, Revision: string(rel.digest), Address: req.Product, Kind: "deliver", Destination: req.Dest.String(),
		Perform: dest.write,
		Find:    dest.find,
		Reconciled: func(msg string) {
			d.Emit(event.Event{Type: "effect_reconciled", Node: req.Product, Message: msg})
		},
	})
	if err != nil {
		return "", err
	}
	// The delivery succeeded: its release is recorded, and the product's channel moves to
	// it (channel.go).
	if err := d.advance(ctx, rel, loc); err != nil {
		return "", fmt.Errorf("%s: delivered to %s, but its release channel did not move: %w", req.Product, loc, err)
	}
	return loc, nil
}

// destination is one kind of destination: write is idempotent, and find looks for the
// release by its digest.
type destination interface {
	write(ctx context.Context) (location string, err error)
	find(ctx context.Context) (location string, found bool, err error)
}

// makeRelease makes the release manifest of req.
func makeRelease(project string, req *Request) (*release, error) {
	m := Manifest{Type: ReleaseType, Project: project, Product: req.Product, Revision: string(req.Revision),
		Source: string(req.Source), Artifact: string(req.Tree), Target: req.Target, Start: req.Start,
		Runtime: req.Runtime, Acceptance: []Acceptance{}, Restart: restartInstructions(req.Start, req.Runtime)}
	rel := &release{Request: req}
	checks := slices.Clone(req.Checks)
	slices.SortFunc(checks, func(a, b Check) int { return strings.Compare(a.Address, b.Address) })
	for _, c := range checks {
		a := Acceptance{Check: c.Address, Result: string(c.Result), Attestations: []string{}}
		for _, env := range c.Envelopes {
			a.Attestations = append(a.Attestations, provenance.EnvelopeDigest(env))
			rel.evidence = append(rel.evidence, provenance.Attestation{Source: c.Address, Envelope: env})
		}
		slices.Sort(a.Attestations)
		m.Acceptance = append(m.Acceptance, a)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if rel.manifest, err = digest.Canonicalize(b); err != nil {
		return nil, fmt.Errorf("release manifest of %s: %w", req.Product, err)
	}
	rel.digest = digest.FromBytes(rel.manifest)
	return rel, nil
}

// restartInstructions say how a person starts the release, and starts it again after a
// stop, from what it holds.
func restartInstructions(start []string, rt *Runtime) string {
	if len(start) == 0 {
		return "This release declares no start command (deliver { start = [...] }). Its files are under " + FilesDir + "/ (in an OCI destination, the artifact's layer)."
	}
	s := fmt.Sprintf("Start it from the release's files (%s/ in a dir: destination; the layer of the artifact in an OCI one), where the command's paths are relative to that root: %s. To restart, stop that process and run the same command again: the release's files never change, and the data the command is pointed at is kept.",
		FilesDir, strings.Join(quoteArgs(start), " "))
	if rt != nil {
		s += fmt.Sprintf(" It was accepted running on the image %s (%s) with these files laid over its root: that image is the runtime it needs.", rt.Image, rt.Seed)
	}
	return s
}

func quoteArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 && strings.HasPrefix(a, "/") {
			a = "." + a
		}
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// receipt signs the receipt of rel delivered to location (manifest: its OCI manifest, or "").
func (d *Deliverer) receipt(rel *release, location string, manifest digest.Digest) ([]byte, error) {
	return d.Attester.Sign(provenance.NewDeliveryReceipt(&provenance.Delivery{
		Project: d.Project, Product: rel.Product, Revision: string(rel.Revision), Source: string(rel.Source),
		Release: string(rel.digest), Artifact: string(rel.Tree), Manifest: string(manifest),
		Destination: rel.Dest.String(), Location: location,
		Acceptance: rel.evidence, Keys: d.Keys, DeliveredOn: time.Now(),
	}))
}

func (d *Deliverer) fault(point, node string) {
	if d.Fault != nil {
		d.Fault(point, node)
	}
}

// dirDest is a dir: destination; the release is the directory at.
type dirDest struct {
	d   *Deliverer
	rel *release
	at  string
}

func (x *dirDest) location() string { return lang.SchemeDir + ":" + x.at }

// write puts the release in place, if it is not, by renaming a directory written beside
// it; then writes its receipt, if it has none. Everything is written under the destination
// directory resolved beneath its grant (OpenBeneath).
func (x *dirDest) write(ctx context.Context) (string, error) {
	b, err := OpenBeneath(x.rel.Root, x.rel.Dest.Path)
	if err != nil {
		return "", fmt.Errorf("%s: %w; nothing was delivered", x.rel.Product, err)
	}
	defer b.Close()
	at := filepath.Join(b.Path, x.rel.digest.Hex())
	complete, err := x.complete(at)
	if err != nil {
		return "", err
	}
	if !complete {
		if err := x.commit(b.Path, at); err != nil {
			return "", fmt.Errorf("delivering %s to %s: %w", x.rel.Product, x.rel.Dest, err)
		}
	}
	x.d.fault(FaultAfterCommit, x.rel.Product)
	rp := filepath.Join(at, ReceiptFile)
	env, err := os.ReadFile(rp)
	if errors.Is(err, os.ErrNotExist) {
		if env, err = x.d.receipt(x.rel, x.location(), ""); err != nil {
			return "", err
		}
		if err = writeFileAtomic(rp, env, 0o444); err != nil {
			return "", fmt.Errorf("delivering %s: receipt: %w", x.rel.Product, err)
		}
	} else if err != nil {
		return "", err
	} else if _, err := provenance.WriteEnvelope(x.d.Workspace.AttestationDir(), env); err != nil {
		// A receipt that an earlier, killed apply wrote beside the release is kept with the
		// project's attestations too.
		return "", err
	}
	x.d.fault(FaultBeforeRecord, x.rel.Product)
	return x.location(), nil
}

// commit writes the release (manifest, files, evidence) into a temporary directory in
// parent, the destination directory, and renames it to at.
func (x *dirDest) commit(parent, at string) error {
	prefix := ".tmp-" + x.rel.digest.Hex()[:16] + "-"
	// What a killed delivery of this release left half-written is not a release.
	if old, _ := filepath.Glob(filepath.Join(parent, prefix+"*")); len(old) > 0 {
		for _, o := range old {
			if err := os.RemoveAll(o); err != nil {
				return err
			}
		}
	}
	tmp, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone by the rename when all went well
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(tmp, ManifestFile), x.rel.manifest, 0o444); err != nil {
		return err
	}
	if err := x.d.Workspace.Store.Materialize(x.rel.Tree, filepath.Join(tmp, FilesDir)); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(tmp, EvidenceDir), 0o755); err != nil {
		return err
	}
	for _, e := range x.rel.evidence {
		if _, err := provenance.WriteEnvelope(filepath.Join(tmp, EvidenceDir), e.Envelope); err != nil {
			return err
		}
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, at); err != nil {
		// Another delivery of the same release may have put it there first.
		if ok, _ := x.complete(at); ok {
			return nil
		}
		return fmt.Errorf("%s is there and is not this release (%w); move it away to deliver again", x.at, err)
	}
	return syncDir(parent)
}

// complete reports whether the release is in place at at: its manifest, with the digest
// that names it, files whose tree digest is the artifact, and its evidence.
func (x *dirDest) complete(at string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(at, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil || digest.FromBytes(b) != x.rel.digest {
		return false, err
	}
	_, tree, err := digest.Dir(filepath.Join(at, FilesDir))
	if err != nil || tree != x.rel.Tree {
		return false, nil
	}
	for _, e := range x.rel.evidence {
		p := filepath.Join(at, EvidenceDir, "sha256-"+strings.TrimPrefix(provenance.EnvelopeDigest(e.Envelope), "sha256:")+".intoto.json")
		if b, err := os.ReadFile(p); err != nil || provenance.EnvelopeDigest(b) != provenance.EnvelopeDigest(e.Envelope) {
			return false, nil
		}
	}
	return true, nil
}

// find reconciles by digest: the release is delivered when it is complete at its place
// and has its receipt.
func (x *dirDest) find(context.Context) (string, bool, error) {
	b, found, err := lookBeneath(x.rel.Root, x.rel.Dest.Path)
	if err != nil {
		return "", false, err
	}
	if !found {
		return fmt.Sprintf("release %s is not at %s, so it is delivered again", x.rel.digest.Short(), x.at), false, nil
	}
	defer b.Close()
	at := filepath.Join(b.Path, x.rel.digest.Hex())
	complete, err := x.complete(at)
	if err != nil {
		return "", false, err
	}
	if !complete {
		return fmt.Sprintf("release %s is not at %s, so it is delivered again", x.rel.digest.Short(), x.at), false, nil
	}
	if _, err := os.Stat(filepath.Join(at, ReceiptFile)); err != nil {
		return fmt.Sprintf("release %s is at %s without its receipt, so the delivery is completed", x.rel.digest.Short(), x.at), false, nil
	}
	return x.location(), true, nil
}

// layoutDest is an oci-layout: or oci: destination, an OCI image layout or a registry
// repository opened as a registry.Store: the release is an artifact, tagged release-<hex>
// once its evidence and receipt are attached.
type layoutDest struct {
	d   *Deliverer
	rel *release
}

// ReleaseTag is the tag of the release whose digest is d in an OCI destination.
func ReleaseTag(d digest.Digest) string { return "release-" + d.Hex() }

func (x *layoutDest) tag() string { return ReleaseTag(x.rel.digest) }

// open opens the destination's store: the layout (created if missing), its directory
// resolved beneath its grant (OpenBeneath), or the registry repository, as registry.Open
// does for a project's registry. done releases it.
func (x *layoutDest) open() (l registry.Store, done func(), err error) {
	if x.rel.Dest.Scheme == lang.SchemeOCI {
		l, err = registry.Open(x.rel.Dest.Path)
		return l, func() {}, err
	}
	b, err := OpenBeneath(x.rel.Root, x.rel.Dest.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w; nothing was delivered", x.rel.Product, err)
	}
	if l, err = registry.OpenLayout(b.Path); err != nil {
		b.Close()
		return nil, nil, err
	}
	return l, func() { b.Close() }, nil
}

// location is where the release whose OCI manifest is m is: in a layout by the
// destination's name (not the descriptor it was written through).
func (x *layoutDest) location(l registry.Store, m digest.Digest) string {
	if x.rel.Dest.Scheme == lang.SchemeOCILayout {
		return registry.LayoutScheme + x.rel.Dest.Path + "@" + string(m)
	}
	return l.String() + "@" + string(m)
}

func (x *layoutDest) write(ctx context.Context) (string, error) {
	l, done, err := x.open()
	if err != nil {
		return "", err
	}
	defer done()
	m, err := registry.PublishRelease(ctx, l, x.d.Workspace.Store, x.rel.Product, x.rel.manifest, x.rel.Tree)
	if err != nil {
		return "", err
	}
	for _, e := range x.rel.evidence {
		if _, err := registry.Attach(ctx, l, m, e.Envelope, claimedType(e.Envelope)); err != nil {
			return "", err
		}
	}
	x.d.fault(FaultAfterCommit, x.rel.Product)
	location := x.location(l, m)
	if env, found, err := x.receiptOf(ctx, l, m); err != nil {
		return "", err
	} else if !found {
		env, err := x.d.receipt(x.rel, location, m)
		if err != nil {
			return "", err
		}
		if _, err := registry.Attach(ctx, l, m, env, provenance.PredicateDeliveryReceipt); err != nil {
			return "", err
		}
	} else if _, err := provenance.WriteEnvelope(x.d.Workspace.AttestationDir(), env); err != nil {
		// A receipt that an earlier, killed apply attached is kept with the project's
		// attestations too.
		return "", err
	}
	// The tag names the release only with its receipt attached.
	if err := l.Tag(ctx, x.tag(), m); err != nil {
		return "", err
	}
	x.d.fault(FaultBeforeRecord, x.rel.Product)
	return location, nil
}

// receiptOf finds a delivery receipt attached to manifest m.
func (x *layoutDest) receiptOf(ctx context.Context, l registry.Store, m digest.Digest) ([]byte, bool, error) {
	atts, _, err := registry.Referrers(ctx, l, m)
	if err != nil {
		return nil, false, err
	}
	for _, a := range atts {
		if a.PredicateType == provenance.PredicateDeliveryReceipt {
			if subj, _ := provenance.ClaimedSubjects(a.Envelope); slices.Contains(subj, string(x.rel.digest)) {
				return a.Envelope, true, nil
			}
		}
	}
	return nil, false, nil
}

func (x *layoutDest) find(ctx context.Context) (string, bool, error) {
	notThere := fmt.Sprintf("release %s is not in %s, so it is delivered again", x.rel.digest.Short(), x.rel.Dest)
	if x.rel.Dest.Scheme == lang.SchemeOCILayout {
		b, found, err := lookBeneath(x.rel.Root, x.rel.Dest.Path)
		if err != nil {
			return "", false, err
		}
		if !found {
			return notThere, false, nil
		}
		_, err = os.Stat(filepath.Join(b.Path, "oci-layout"))
		b.Close()
		if err != nil {
			return notThere, false, nil
		}
	}
	l, done, err := x.open()
	if err != nil {
		return "", false, err
	}
	defer done()
	m, err := l.Resolve(ctx, x.tag())
	if errors.Is(err, registry.ErrNotFound) {
		return notThere, false, nil
	}
	if err != nil {
		// A layout or registry that cannot be read leaves the outcome unknown: the effect
		// stays unknown, and blocks, until it can be looked up (or the operator decides).
		return "", false, fmt.Errorf("looking for release %s in %s: %w", x.rel.digest.Short(), x.rel.Dest, err)
	}
	env, found, err := x.receiptOf(ctx, l, m)
	if err != nil || !found {
		return notThere, false, err
	}
	if _, err := provenance.WriteEnvelope(x.d.Workspace.AttestationDir(), env); err != nil {
		return "", false, err
	}
	return x.location(l, m), true, nil
}

// claimedType is the predicateType an envelope's statement claims, unverified: the
// annotation a referrer is listed under (verification reads the signed statement).
func claimedType(env []byte) string {
	var e struct{ Payload []byte }
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if json.Unmarshal(env, &e) == nil && json.Unmarshal(e.Payload, &st) == nil && st.PredicateType != "" {
		return st.PredicateType
	}
	return provenance.PredicateSLSAProvenance
}

// writeFileAtomic writes b to p through a temporary file and a rename.
func writeFileAtomic(p string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), mode); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
