package registry

import "testing"

func TestSplitReference(t *testing.T) {
	d := fakeDigest("m")
	for _, c := range []struct{ in, addr, ref string }{
		{"127.0.0.1:5000/foundry/caps:stable", "127.0.0.1:5000/foundry/caps", "stable"},
		{"127.0.0.1:5000/foundry/caps@" + d, "127.0.0.1:5000/foundry/caps", d},
		{"oci-layout:.foundry/registry:stable", "oci-layout:.foundry/registry", "stable"},
		{"oci-layout:/srv/reg@" + d, "oci-layout:/srv/reg", d},
		{"oci-layout:reg:v1", "oci-layout:reg", "v1"},
	} {
		addr, ref, err := SplitReference(c.in)
		if err != nil || addr != c.addr || ref != c.ref {
			t.Errorf("SplitReference(%q) = %q, %q, %v; want %q, %q", c.in, addr, ref, err, c.addr, c.ref)
		}
	}
	for _, bad := range []string{"127.0.0.1:5000/foundry/caps", "oci-layout:reg", "x@sha256:zz", "@" + d, "repo:"} {
		if a, r, err := SplitReference(bad); err == nil {
			t.Errorf("SplitReference(%q) = %q, %q; want an error", bad, a, r)
		}
	}
}

func TestOpenReference(t *testing.T) {
	f := newFixture(t)
	addr := LayoutScheme + t.TempDir() + "/layout"
	s, err := Open(addr)
	must(t, err)
	md, err := Publish(bg, s, f.src, f.capability("stable"))
	must(t, err)
	for _, ref := range []string{addr + ":stable", addr + "@" + string(md)} {
		rs, d, err := OpenReference(bg, ref)
		if err != nil || d != md || rs.String() != s.String() {
			t.Fatalf("OpenReference(%q) = %v, %s, %v", ref, rs, d, err)
		}
		// What foundry verify does with it: attestations through RemoteSource.
		if atts, err := (RemoteSource{rs}).Lookup(bg, string(d)); err != nil || len(atts) != 0 {
			t.Fatalf("Lookup = %v, %v", atts, err)
		}
	}
	if _, _, err := OpenReference(bg, addr+":missing"); err == nil {
		t.Fatal("OpenReference of a missing tag succeeded")
	}
}
