// Package hugeheap tunes the Go heap for Foundry's two shapes of work: short commands, which
// should end before their first garbage collection (DelayFirstGC), and bursts of allocation
// such as loading a large project, which should fault memory in 2 MiB at a time and at once
// (Reserve).
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
// follow land in it. It faults in the first touch bytes of it at once, on every core, as the
// JVM's AlwaysPreTouch does, and leaves the rest untouched, so resident memory grows only by
// touch and by what the program really allocates; touch should be no more than the program
// is about to use. It reports whether it did anything: not for n under Threshold, not when
// an earlier call reserved at least as much, and not on kernels without transparent huge
// pages in "madvise" mode unless touch is at least Threshold. From n of Threshold up, it also
// ends DelayFirstGC's delay; when it reserves, the next collection then waits until the heap
// has grown into the touched memory, and later ones follow GOGC.
//
// Why touch: a virtual machine's host may back guest memory lazily and take back what the
// guest freed a few seconds ago. Faulting such memory in cost ~1.8 ms per MiB on our CI
// machines against 0.06 ms for memory a process freed just before, and a load that takes
// seconds met the costly kind for its later allocations. Touched at once, the heap is either
// all recently freed memory or, at worst, costs what it would have cost anyway, on every
// core.
//
// Reserve runs a garbage collection, so call it early, while the heap is small. Early also
// because on a heap that has held large objects and freed them, the runtime zeroes so large
// an allocation, which would fault all of it in (each command of the CLI is a new process).
func Reserve(n, touch int) bool {
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
	touch = min(touch, n)
	advise := advisable()
	if n < Threshold || (!advise && touch < Threshold) {
		return false
	}
	if !reserve(n, touch, advise) {
		return false
	}
	reserved = n
	// The first collection waits until the heap has grown into the touched memory. Sooner,
	// with a small heap, the scavenger would hand the free part of it back to the kernel
	// while the heap still grows into it: with 100k steps it gave back ~500 of 930 MB
	// during the load, to be faulted in again, by then no longer recently freed.
	if !userGOGC() {
		live, _ := heapNow()
		delayUntil(uint64(touch), live)
	}
	return true
}
