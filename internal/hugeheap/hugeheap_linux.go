package hugeheap

import (
	"bytes"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// advisable reports whether the kernel backs memory with huge pages only where asked. In
// "always" mode the heap gets them already; in "never" asking does nothing.
func advisable() bool {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && bytes.Contains(mode, []byte("[madvise]"))
}

// limit caps a reservation at a quarter of physical memory: the runtime maps the address
// space read-write, and the kernel's overcommit heuristic refuses one mapping larger than the
// machine, which the runtime treats as fatal.
func limit() int {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int(uint64(si.Totalram) * uint64(si.Unit) / 4)
}

func reserve(n int) bool {
	// A large allocation on an empty heap makes the runtime map fresh address space for it
	// and leaves it untouched (fresh memory is known to be zero). Advise that span, then let
	// the collection below free it: its pages go back to the runtime's page allocator, which
	// hands out the lowest free addresses first, so the small objects allocated next fill it.
	// mmap replaces the advice of any range it maps, but the runtime maps heap memory once
	// and reuses it, so the advice stays for the life of the process.
	b := make([]byte, n+hugePage)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p+hugePage-1)&^(hugePage-1) - p
	end := (p+uintptr(len(b)))&^(hugePage-1) - p
	err := unix.Madvise(b[start:end], unix.MADV_HUGEPAGE)
	b = nil
	runtime.GC()
	return err == nil
}
