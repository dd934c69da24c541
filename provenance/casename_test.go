package provenance

import (
	"regexp"
	"strings"
	"testing"
)

// validCaseName must accept exactly what the regular expression it replaced accepts.
func TestValidCaseNameMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,256}$`)
	for _, s := range []string{"", "a", "sealed/x.json", "a\nb", "tab\t", "\x7f", "\x00", "é", "\xff", "\xff\xfe",
		strings.Repeat("a", 256), strings.Repeat("a", 257), strings.Repeat("é", 256), strings.Repeat("é", 257),
		strings.Repeat("\xff", 256), strings.Repeat("\xff", 257), "\u2028", "x\r"} {
		if got, want := validCaseName(s), re.MatchString(s); got != want {
			t.Errorf("validCaseName(%q) = %v, regexp says %v", s, got, want)
		}
	}
}
