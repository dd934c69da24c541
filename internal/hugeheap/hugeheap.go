// Package hugeheap tunes the Go heap for Foundry's two shapes of work: short commands, which
// should end before their first garbage collection (DelayFirstGC), and bursts of allocation
// such as loading a large project, which should fault memory in 2 MiB at a time (Reserve).
//
// Loading a large project allocates hundreds of MiB within a second, nearly all of it fresh
// memory that the kernel must fault in page by page. On virtual machines a 4 KiB fault can
// cost ~12 µs (measured on our CI machines: 3 ms per MiB), which made page faults a third of
// the time to plan a 10,000-step project. The Go runtime no longer asks for huge pages itself
// (Go 1.21.1 dropped it), and where the kernel's THP mode is "madvise" nothing else does, so
// a 2 MiB fault in place of 512 small ones is ours to ask for.
package hugeheap

import "sync"

// Threshold is the smallest reservation worth making: below it the forced collection that
// Reserve needs costs more than the faults it saves.
const Threshold = 32 << 20

var (
	mu       sync.Mutex
	reserved int
)

// Reserve grows the Go heap by about n bytes of address space that the kernel is advised to
// back with huge pages, and hands it back to the runtime free, so that the allocations that
// follow land in it. It never touches the memory, so resident memory grows only as the
// program really allocates. It reports whether it advised anything: it does not on kernels
// without transparent huge pages in "madvise" mode, for n under Threshold, or when an
// earlier call reserved at least as much. From n of Threshold up, it also ends
// DelayFirstGC's delay: the heap then grows by GOGC's default, so that a large load keeps
// its memory goal.
//
// Reserve runs a garbage collection, so call it early, while the heap is small.
func Reserve(n int) bool {
	if n < Threshold {
		return false
	}
	restoreGC()
	mu.Lock()
	defer mu.Unlock()
	if n <= reserved {
		return false
	}
	n = min(n, limit())
	if n < Threshold || !advisable() {
		return false
	}
	if !reserve(n) {
		return false
	}
	reserved = n
	return true
}
