package verdict

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on counterexample text: enough to act on, never a dump of the candidate's output.
const (
	maxShown   = 200 // Expected and Got
	maxContext = 40  // bytes of text shown before a difference (twice that after it)
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
// spaces and invalid UTF-8 are all visible, with at most about n bytes of escaped text:
// escapes can make the literal four times longer than its input, so the bound is on the
// output.
func quoted(b []byte, n int) string {
	var sb strings.Builder
	sb.WriteByte('"')
	i := 0
	for i < len(b) {
		_, size := utf8.DecodeRune(b[i:]) // size 1 for an invalid byte, quoted as \xNN
		q := strconv.Quote(string(b[i : i+size]))
		if sb.Len()+len(q)-2 > n {
			break
		}
		sb.WriteString(q[1 : len(q)-1])
		i += size
	}
	sb.WriteByte('"')
	if i < len(b) {
		fmt.Fprintf(&sb, "…(+%d bytes)", len(b)-i)
	}
	return sb.String()
}

// window quotes the bytes of b around offset at: up to maxContext bytes before it and about
// 2*maxContext bytes of escaped text from it on, marking what was left out.
func window(b []byte, at int) string {
	lo := max(0, at-maxContext)
	for k := 0; k < utf8.UTFMax-1 && lo > 0 && !utf8.RuneStart(b[lo]); k++ {
		lo-- // do not start inside a character
	}
	left := strconv.Quote(string(b[lo:at]))
	s := left[:len(left)-1] + quoted(b[at:], 2*maxContext)[1:]
	if lo > 0 {
		s = "…" + s
	}
	return s
}
