package verdict

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Limits on counterexample text: enough to act on, never a dump of the candidate's output.
const (
	maxShown   = 200 // Expected and Got
	maxContext = 40  // bytes shown either side of a difference in text
)

// short truncates s to at most n bytes on a rune boundary, saying how much was cut.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(+%d bytes)", s[:cut], len(s)-cut)
}

// quoted renders text as a Go string literal, so that newlines, carriage returns, trailing
// spaces and invalid UTF-8 are all visible, truncated to about n bytes of input.
func quoted(b []byte, n int) string {
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(+%d bytes)", strconv.Quote(string(b[:cut])), len(b)-cut)
}

// window quotes the bytes of b around offset at, marking what was left out on either side.
func window(b []byte, at int) string {
	lo, hi := max(0, at-maxContext), min(len(b), at+maxContext)
	for lo > 0 && lo < len(b) && !utf8.RuneStart(b[lo]) {
		lo--
	}
	for hi < len(b) && !utf8.RuneStart(b[hi]) {
		hi++
	}
	s := strconv.Quote(string(b[lo:hi]))
	if lo > 0 {
		s = "…" + s
	}
	if hi < len(b) {
		s += "…"
	}
	return s
}
