package run

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/egress"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// fixedOutput is what a fixed-output step (network egress, spec/language.md §9a) adds to
// its run: the broker that is its only way out, and the check of its outputs against its
// output_digest before anything of them is stored.
type fixedOutput struct {
	step   *lang.Step
	broker *egress.Broker
}

// fixedOutputFor readies n's action when n is a fixed-output step, and returns nil for any
// other. It refuses a step the plan did not find granted, whatever a caller did with the
// plan, before it runs; the broker it gives the action admits the step's egress (every
// endpoint granted) and relays at most its limits.egress.
func (r *runner) fixedOutputFor(n *graph.Node, a *executors.Action) (*fixedOutput, error) {
	st := n.Step
	if st.Network != lang.NetworkEgress {
		return nil, nil
	}
	pn := r.planned.nodes[n.Address]
	if pn == nil || pn.Egress == nil || !pn.Egress.Granted() {
		var hosts []string
		if pn != nil && pn.Egress != nil {
			hosts = pn.Egress.Ungranted()
		}
		return nil, &StepError{Reason: fmt.Sprintf("no grant allows reaching %s; nothing was run", strings.Join(hosts, ", ")), ExitCode: -1, NotRun: true}
	}
	b := egress.New(egress.Options{Policy: &lang.Grants{Network: st.Egress}, MaxBytes: graph.EgressBytes(st)})
	a.Network, a.Egress = executors.NetworkEgress, b.Serve
	return &fixedOutput{step: st, broker: b}, nil
}

// check compares the tree digest of the step's declared outputs, as they lie in outDir,
// with its output_digest. A mismatch fails the step with the digest it got, which a user
// who wants the new content pins (as Nix's "got:"), and nothing is stored.
func (f *fixedOutput) check(outDir string) error {
	if f == nil {
		return nil
	}
	got, err := OutputsDigest(outDir, f.step.Outputs)
	if err != nil {
		return err
	}
	if got != f.step.OutputDigest {
		return fmt.Errorf("its outputs have the tree digest %s, not its output_digest %s; nothing of them was stored. If they are what the step should make, pin them: output_digest = %q",
			got, f.step.OutputDigest, got)
	}
	return nil
}

// OutputsDigest is the tree digest (digest.Dir) of the tree that holds exactly the
// declared outputs, at their paths under /out (outDir on the host), with the directories
// that lead to them: what a fixed-output step's output_digest pins. With /out holding
// nothing else, it is digest.Dir of /out.
func OutputsDigest(outDir string, declared []string) (digest.Digest, error) {
	m := &digest.Manifest{}
	dirs := map[string]bool{}
	for _, p := range declared {
		rel := strings.TrimPrefix(p, "/out/")
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			m.Entries = append(m.Entries, digest.Entry{Path: d, Type: digest.TypeDir, Mode: digest.ModeDir})
		}
		host := filepath.Join(outDir, filepath.FromSlash(rel))
		fi, err := os.Lstat(host)
		if err != nil {
			return "", fmt.Errorf("declared output %s was not produced", p)
		}
		switch {
		case fi.Mode().IsRegular():
			d, size, err := digest.File(host)
			if err != nil {
				return "", err
			}
			mode := digest.ModeFile
			if fi.Mode().Perm()&0o100 != 0 {
				mode = digest.ModeExecutable
			}
			m.Entries = append(m.Entries, digest.Entry{Path: rel, Type: digest.TypeFile, Mode: mode, Size: size, Digest: d})
		case fi.IsDir():
			sub, _, err := digest.Dir(host)
			if err != nil {
				return "", err
			}
			dirs[rel] = true
			m.Entries = append(m.Entries, digest.Entry{Path: rel, Type: digest.TypeDir, Mode: digest.ModeDir})
			for _, e := range sub.Entries {
				e.Path = rel + "/" + e.Path
				m.Entries = append(m.Entries, e)
			}
		default:
			return "", fmt.Errorf("declared output %s is a %s; outputs are files or directories", p, fi.Mode().Type())
		}
	}
	return m.Digest()
}

// network is the network the step's provenance records: its mode, and for a fixed-output
// step the endpoints its broker admitted, the output digest its outputs were checked
// against, and every connection the broker handled.
func (f *fixedOutput) network() (provenance.Network, []provenance.Connection) {
	if f == nil {
		return provenance.Network{Mode: executors.NetworkNone}, nil
	}
	nw := provenance.Network{Mode: executors.NetworkEgress, OutputDigest: string(f.step.OutputDigest)}
	for _, h := range f.step.Egress {
		nw.Hosts = append(nw.Hosts, h.String())
	}
	var conns []provenance.Connection
	for _, c := range f.broker.Connections() {
		conns = append(conns, provenance.Connection(c))
	}
	return nw, conns
}

// explain adds to a failed fixed-output step's log tail the connections its broker did not
// relay to their end (refused, failed, cut), which are often why it failed.
func (f *fixedOutput) explain(se *StepError) {
	if f == nil {
		return
	}
	const most = 5
	n := 0
	for _, c := range f.broker.Connections() {
		if c.Outcome == egress.OutcomeRelayed || c.Outcome == egress.OutcomeEnded {
			continue
		}
		if n++; n > most {
			se.LogTail = append(se.LogTail, "[foundry egress] … and more")
			return
		}
		se.LogTail = append(se.LogTail, fmt.Sprintf("[foundry egress] %s %s:%d %s: %s", c.Method, c.Host, c.Port, c.Outcome, c.Reason))
	}
}
