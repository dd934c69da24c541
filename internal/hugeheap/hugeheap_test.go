package hugeheap

import (
	"bufio"
	"os"
	"os/exec"
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
	if Reserve(Threshold-1, 0) {
		t.Fatal("Reserve below the threshold advised memory")
	}
	if !advisable() {
		if Reserve(64<<20, 0) {
			t.Fatal("Reserve advised memory on a kernel whose THP mode is not madvise")
		}
		t.Skip("this kernel's transparent huge pages are not in madvise mode; Reserve does nothing here")
	}
	if !Reserve(64<<20, 0) {
		t.Fatal("Reserve(64 MiB) did nothing on a kernel in madvise mode")
	}
	if Reserve(32<<20, 0) {
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

// Reserve faults in the memory it is told to touch, and no more: resident memory grows by
// about touch, whatever the kernel's huge page mode. It runs in a fresh process, as Reserve
// is meant to (early, on a small heap): on a heap that has held and freed large objects, the
// runtime zeroes a large allocation, which faults all of it in.
func TestReserveTouches(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector, resident memory includes its shadow memory")
	}
	if os.Getenv("HUGEHEAP_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReserveTouches$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HUGEHEAP_TEST_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	before := resident(t)
	const touch = 96 << 20
	if !Reserve(768<<20, touch) {
		t.Fatal("Reserve(768 MiB, touch 96 MiB) did nothing")
	}
	grew := resident(t) - before
	if grew < touch*3/4 || grew > touch+32<<20 {
		t.Fatalf("resident memory grew by %d MiB, want about the %d MiB touched", grew>>20, touch>>20)
	}
}

// resident returns the process's resident memory in bytes.
func resident(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return pages * os.Getpagesize()
}
