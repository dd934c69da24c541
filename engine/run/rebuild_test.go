package run

import (
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// describeDiff names the first differing byte and, for text, the first differing lines;
// binary content gets no lines.
func TestDescribeDiff(t *testing.T) {
	a, b := []byte("one\ntwo 10:01\nthree\n"), []byte("one\ntwo 10:02\nthree\n")
	got := describeDiff("/out/f", digest.FromBytes(a), digest.FromBytes(b), a, b)
	for _, want := range []string{"(20 bytes)", "first difference at byte 12", "  -2: two 10:01", "  +2: two 10:02", "  -3: three"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	bin := describeDiff("/out/b", "", "", []byte{0, 1, 2}, []byte{0, 1, 3, 4})
	if !strings.Contains(bin, "(3 bytes)") || !strings.Contains(bin, "(4 bytes)") || !strings.Contains(bin, "byte 2") || strings.Contains(bin, "-1:") {
		t.Errorf("binary report:\n%s", bin)
	}
	// One is a prefix of the other: the difference is where the shorter ends.
	if p := describeDiff("/out/p", "", "", []byte("abc"), []byte("abcd")); !strings.Contains(p, "byte 3") {
		t.Errorf("prefix report:\n%s", p)
	}
}
