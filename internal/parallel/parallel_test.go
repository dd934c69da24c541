package parallel

import (
	"runtime"
	"sync"
	"testing"
)

// Every index is visited exactly once, in parts no smaller than asked, whatever the size.
func TestPartsCoverEachIndexOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, 7, 15, 16, 63, 64, 65, 1000} {
		for _, least := range []int{0, 1, 16} {
			seen := make([]int, n)
			var mu sync.Mutex
			var parts [][2]int
			Parts(n, least, func(lo, hi int) {
				mu.Lock()
				parts = append(parts, [2]int{lo, hi})
				mu.Unlock()
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d least=%d: index %d visited %d times", n, least, i, c)
				}
			}
			if len(parts) > 1 {
				for _, p := range parts {
					if p[1]-p[0] < least {
						t.Fatalf("n=%d least=%d: part %v is smaller than asked", n, least, p)
					}
				}
			}
			if want := min(4, n/max(least, 1)); want >= 2 && len(parts) != want {
				t.Fatalf("n=%d least=%d: %d parts, want %d", n, least, len(parts), want)
			}
		}
	}
}
