package provenance

import (
	"strings"
	"testing"
)

// A source's tree is named by where its content came from and its pin: a git source by its
// commit (digest gitCommit, no sha256), an http one by the bytes' sha256, each with the
// source's address and the tree mounted; a source without a tree, or a commit that is not
// one, is refused rather than signed. The statement still verifies under the usual policy.
func TestSourceDependencies(t *testing.T) {
	commit := strings.Repeat("a1", 20)
	e := testExecution(sha("out"))
	e.Inputs = append(e.Inputs,
		Dependency{Name: "/lib", URI: "git+https://git.example/lib.git@" + commit, GitCommit: commit, Source: "source.lib", Tree: sha("lib tree")},
		Dependency{Name: "/zlib", URI: "https://downloads.example/zlib.tgz", Digest: sha("zlib bytes"), Source: "source.zlib", Tree: sha("zlib tree")},
	)
	st, err := NewProvenance(e)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProvenance(st.InToto())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		ann := d.GetAnnotations().GetFields()
		switch d.GetName() {
		case "/lib":
			found++
			if d.GetDigest()["gitCommit"] != commit || d.GetDigest()["sha256"] != "" || ann[AnnotationSource].GetStringValue() != "source.lib" ||
				ann[AnnotationTree].GetStringValue() != sha("lib tree") {
				t.Errorf("git source: %v %v", d.GetDigest(), ann)
			}
		case "/zlib":
			found++
			if "sha256:"+d.GetDigest()["sha256"] != sha("zlib bytes") || ann[AnnotationTree].GetStringValue() != sha("zlib tree") {
				t.Errorf("http source: %v %v", d.GetDigest(), ann)
			}
		}
	}
	if found != 2 {
		t.Fatalf("%d source dependencies in the statement", found)
	}
	kp := newKeyPair(t, "")
	if rep := verifyOne(t, kp.keys, mint(t, kp, e), sha("out"), Policy{}); !rep.OK {
		t.Errorf("a statement with sources does not verify: %+v", rep)
	}
	for _, bad := range []Dependency{
		{Name: "/lib", URI: "git+x", GitCommit: "main", Source: "source.lib", Tree: sha("t")},
		{Name: "/lib", URI: "git+x", GitCommit: commit, Source: "source.lib"},
	} {
		e := testExecution(sha("out"))
		e.Inputs = append(e.Inputs, bad)
		if _, err := NewProvenance(e); err == nil {
			t.Errorf("%+v was signed", bad)
		}
	}
}
