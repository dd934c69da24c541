package hugeheap

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// forgetReservations lets a test reserve again, whatever ran before it in this process
// (go test -count=N runs each test N times).
func forgetReservations() {
	mu.Lock()
	defer mu.Unlock()
	reserved = 0
}

// TestReservedHeapIsAdvised checks the effect that matters: the small objects allocated
// after Reserve live in memory that the kernel was asked to back with huge pages.
func TestReservedHeapIsAdvised(t *testing.T) {
	forgetReservations()
	if Reserve(Threshold - 1) {
		t.Fatal("Reserve below the threshold advised memory")
	}
	if !advisable() {
		if Reserve(64 << 20) {
			t.Fatal("Reserve advised memory on a kernel whose THP mode is not madvise")
		}
		t.Skip("this kernel's transparent huge pages are not in madvise mode; Reserve does nothing here")
	}
	if !Reserve(64 << 20) {
		t.Fatal("Reserve(64 MiB) did nothing on a kernel in madvise mode")
	}
	if Reserve(32 << 20) {
		t.Fatal("a second, smaller Reserve advised memory again")
	}
	// Allocate like a parser does: many small pointerful objects, kept alive.
	type node struct {
		next *node
		pad  [6]int
	}
	var keep []*node
	for i := 0; i < 200_000; i++ { // ~11 MiB
		keep = append(keep, &node{})
	}
	advised := 0
	for _, n := range keep[len(keep)/2:] {
		if flagged(t, uintptr(unsafe.Pointer(n))) {
			advised++
		}
	}
	if half := len(keep) / 2; advised < half*9/10 {
		t.Fatalf("only %d of %d objects allocated after Reserve are in huge-page-advised memory", advised, half)
	}
}

var vmas []vma

type vma struct {
	lo, hi uintptr
	hg     bool
}

// flagged reports whether the mapping holding addr carries the "hg" (MADV_HUGEPAGE) flag,
// reading /proc/self/smaps once.
func flagged(t *testing.T, addr uintptr) bool {
	if vmas == nil {
		f, err := os.Open("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(line, ":") && !strings.Contains(lo, ":") {
				l, err1 := strconv.ParseUint(lo, 16, 64)
				h, err2 := strconv.ParseUint(hi, 16, 64)
				if err1 == nil && err2 == nil {
					vmas = append(vmas, vma{lo: uintptr(l), hi: uintptr(h)})
					continue
				}
			}
			if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && len(vmas) > 0 {
				vmas[len(vmas)-1].hg = strings.Contains(" "+flags+" ", " hg ")
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range vmas {
		if v.lo <= addr && addr < v.hi {
			return v.hg
		}
	}
	t.Fatalf("address %#x is in no mapping", addr)
	return false
}
