package lang

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/foundry-build/foundry/digest"
)

// Digests are the file and tree digests a Changed computed, for the Load that follows a
// miss (Options.Digests): each input tree is then walked once, not once to find what
// changed and once more to load. The zero value holds none.
type Digests struct {
	hashed map[string]digest.Digest // as inputs.hashed: by kind and path
}

// Changed re-derives every read a load of the project in dir recorded (Config.Inputs and
// Config.Globs) as a new load would make it, and says which first differs: "" when none
// does, so that a load with the same files and options would read exactly what that one
// did. File and tree digests come from stat when it knows them unchanged; those it
// computed are returned for the load that follows.
func Changed(dir string, inputs []InputRecord, globs []GlobRecord, stat *digest.StatCache) (string, Digests) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err.Error(), Digests{}
	}
	in, err := newInputs(abs)
	if err != nil {
		return err.Error(), Digests{}
	}
	in.stat = stat
	return in.changed(inputs, globs), Digests{in.hashed}
}

func (in *inputs) changed(inputs []InputRecord, globs []GlobRecord) string {
	suites := map[string]GlobRecord{}
	for _, g := range globs {
		if g.Suite != "" {
			suites[g.Suite] = g
		}
		matches, err := in.glob(g.Base, g.Pattern, g.Suite)
		if err != nil {
			return fmt.Sprintf("glob %q in %s: %v", g.Pattern, g.Base, err)
		}
		if globDigest(matches) != g.Digest {
			return fmt.Sprintf("glob %q in %s matches other files", g.Pattern, g.Base)
		}
	}
	for _, r := range inputs {
		d, err := in.rederive(r, suites)
		if err != nil {
			return fmt.Sprintf("input %s %s: %v", r.Kind, r.Path, err)
		}
		if d != r.Digest {
			return fmt.Sprintf("input %s %s changed", r.Kind, r.Path)
		}
	}
	return ""
}

// rederive computes the digest of one recorded read as the function that made it would.
func (in *inputs) rederive(r InputRecord, suites map[string]GlobRecord) (digest.Digest, error) {
	switch ArtifactKind(r.Kind) {
	case ArtifactProjectFile:
		_, rec, err := in.readProject(r.Path)
		return rec.Digest, err
	case ArtifactProjectDir:
		abs, _, err := in.projectPath(r.Path)
		if err != nil {
			return "", err
		}
		if exists(filepath.Join(abs, ".foundry")) {
			return "", fmt.Errorf("it contains Foundry's state directory .foundry")
		}
		return in.hash(ArtifactProjectDir, abs, true)
	case ArtifactHostFile, ArtifactHostDir:
		dir := r.Kind == string(ArtifactHostDir)
		st, err := os.Stat(r.Path)
		if err != nil {
			return "", err
		}
		if dir != st.IsDir() || (!dir && !st.Mode().IsRegular()) {
			return "", fmt.Errorf("it is of another type")
		}
		if !dir && fileMode(st) != r.Mode {
			return "", fmt.Errorf("its mode changed")
		}
		return in.hash(ArtifactKind(r.Kind), r.Path, dir)
	case "suite":
		g, ok := suites[r.Path]
		if !ok {
			return "", fmt.Errorf("its cases pattern was not recorded")
		}
		files, err := in.glob(g.Base, g.Pattern, g.Suite)
		if err != nil {
			return "", err
		}
		d, errs := in.suiteDigest(files, func(string) {})
		if len(errs) > 0 {
			return "", errs[0]
		}
		return d, nil
	}
	return "", fmt.Errorf("unknown kind of input")
}
