// Package parallel splits loops over large inputs across the processors.
package parallel

import (
	"runtime"
	"sync"
)

// Parts calls fn on contiguous parts of [0, n) that together cover it: one part per
// processor, each of at least minPart, or a single part on the calling goroutine. fn must
// write only what its part owns.
func Parts(n, minPart int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	if workers < 2 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(w*n/workers, (w+1)*n/workers)
	}
	wg.Wait()
}
