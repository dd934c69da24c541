package verdict

import (
	"strconv"
	"strings"
	"testing"
)

func TestQuotedIsBounded(t *testing.T) {
	for _, in := range []string{"", "abc", "a\nb\r\n", strings.Repeat("\x95", 1000), strings.Repeat("é", 500), strings.Repeat("\u2028", 300)} {
		q := quoted([]byte(in), 50)
		lit := q
		if i := strings.Index(q, "…"); i >= 0 {
			lit = q[:i]
		} else if uq, err := strconv.Unquote(q); err != nil || uq != in {
			t.Errorf("quoted(%.20q) = %s does not round-trip", in, q)
		}
		if len(lit) > 52 {
			t.Errorf("quoted(%.20q) has %d bytes of literal, want ≤ 52", in, len(lit))
		}
	}
}

func TestWindow(t *testing.T) {
	b := []byte(strings.Repeat("a", 100) + "X" + strings.Repeat("\x95", 200))
	w := window(b, 100)
	if !strings.HasPrefix(w, "…\""+strings.Repeat("a", 40)+"X\\x95") || len(w) > 4*maxContext+2*maxContext+40 {
		t.Errorf("window = %s (%d bytes)", w, len(w))
	}
	if w := window([]byte("ab"), 1); w != `"ab"` {
		t.Errorf("window = %s", w)
	}
	if w := window([]byte("ab"), 2); w != `"ab"` {
		t.Errorf("window at end = %s", w)
	}
}
