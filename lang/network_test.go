package lang

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// Spellings of one endpoint are one HostPort; anything that is not exactly HOST:PORT, or
// that a resolver might read as another address, is refused.
func TestParseHostPort(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"downloads.example:443", "downloads.example:443", ""},
		{"Downloads.EXAMPLE.:443", "downloads.example:443", ""},
		{"127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"[::1]:443", "[::1]:443", ""},
		{"[0:0:0:0:0:0:0:1]:443", "[::1]:443", ""},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80", ""},
		{"[2001:DB8::1]:0443", "[2001:db8::1]:443", ""},
		{"localhost:5000", "localhost:5000", ""},
		{"downloads.example", "", "not HOST:PORT"},
		{"::1:443", "", "not HOST:PORT"},
		{"downloads.example:", "", "port must be"},
		{"downloads.example:0", "", "port must be"},
		{"downloads.example:65536", "", "port must be"},
		{"downloads.example:+443", "", "port must be"},
		{"downloads.example:https", "", "port must be"},
		{"*.example:443", "", "wildcards"},
		{"127.1:80", "", "looks like an IPv4"},
		{"0x7f.1:80", "", "looks like an IPv4"},
		{"010.0.0.1:80", "", "looks like an IPv4"},
		{"[fe80::1%eth0]:80", "", "zone"},
		{"ex_ample.org:80", "", "DNS name"},
		{"-a.example:80", "", "DNS name"},
		{"a..example:80", "", "DNS name"},
		{"éxample.org:80", "", "DNS name"},
		{":443", "", "DNS name"},
	} {
		hp, err := ParseHostPort(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseHostPort(%q) = %v, %v; want an error with %q", c.in, hp, err, c.err)
			}
			continue
		}
		if err != nil || hp.String() != c.want {
			t.Errorf("ParseHostPort(%q) = %v, %v; want %s", c.in, hp, err, c.want)
		}
	}
}

func TestURLHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"https://Downloads.example/a.tgz":      "downloads.example:443",
		"http://downloads.example/a.tgz":       "downloads.example:80",
		"HTTPS://downloads.example:8443/a.tgz": "downloads.example:8443",
		"http://[::1]:8080/x":                  "[::1]:8080",
		"http://127.0.0.1/x":                   "127.0.0.1:80",
		"ftp://downloads.example/x":            "",
		"ftp://downloads.example:21/x":         "downloads.example:21",
		"http://127.1/x":                       "",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		hp, err := URLHostPort(u)
		if want == "" {
			if err == nil {
				t.Errorf("URLHostPort(%s) = %v, want an error", in, hp)
			}
			continue
		}
		if err != nil || hp.String() != want {
			t.Errorf("URLHostPort(%s) = %v, %v; want %s", in, hp, err, want)
		}
	}
}

// The network grant allows exactly the host and port it names; a literal IP only when it
// names it; a granted name never leads to this machine or its link.
func TestNetworkGrant(t *testing.T) {
	g, _, diags := ParseGrants("g.hcl", []byte(`
grant "network" { hosts = ["Downloads.example:443", "127.0.0.1:8080"] }
grant "network" { hosts = ["[::1]:9000", "downloads.example:443", "mirror.example:8443"] }
`))
	if diags.HasErrors() || len(g.Network) != 4 {
		t.Fatalf("grants: %+v %v", g, diags)
	}
	for in, want := range map[string]bool{
		"downloads.example:443": true, "DOWNLOADS.example.:443": true, "downloads.example:80": false,
		"evil.downloads.example:443": false, "downloads.example.evil:443": false,
		"127.0.0.1:8080": true, "127.0.0.1:8081": false, "[::ffff:127.0.0.1]:8080": true,
		"localhost:8080": false, "[::1]:8080": false, "[::1]:9000": true, "127.0.0.2:8080": false,
		"mirror.example:8443": true, "mirror.example:443": false,
	} {
		hp, err := ParseHostPort(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.AllowsNetwork(hp); got != want {
			t.Errorf("AllowsNetwork(%s) = %v, want %v", in, got, want)
		}
	}
	if (*Grants)(nil).AllowsNetwork(HostPort{"downloads.example", 443}) || (&Grants{}).AllowsNetwork(HostPort{"downloads.example", 443}) {
		t.Error("no grants allow no network")
	}
	name := HostPort{"downloads.example", 443}
	for ip, want := range map[string]bool{
		"93.184.215.14": true, "10.1.2.3": true, "2001:db8::5": true,
		"127.0.0.1": false, "127.9.9.9": false, "::1": false, "::ffff:127.0.0.1": false,
		"169.254.169.254": false, "fe80::1": false, "0.0.0.0": false, "::": false, "224.0.0.1": false,
	} {
		if got := g.AllowsDial(name, netip.MustParseAddr(ip)); got != want {
			t.Errorf("AllowsDial(%s, %s) = %v, want %v", name, ip, got, want)
		}
	}
	lit := HostPort{"127.0.0.1", 8080}
	for ip, want := range map[string]bool{"127.0.0.1": true, "::ffff:127.0.0.1": true, "127.0.0.2": false, "::1": false} {
		if got := g.AllowsDial(lit, netip.MustParseAddr(ip)); got != want {
			t.Errorf("AllowsDial(%s, %s) = %v, want %v", lit, ip, got, want)
		}
	}
	if g.AllowsDial(HostPort{"other.example", 443}, netip.MustParseAddr("93.184.215.14")) {
		t.Error("an ungranted name is not dialed")
	}
	for src, want := range map[string]string{
		`grant "network" { hosts = ["downloads.example"] }`:   "not HOST:PORT",
		`grant "network" { hosts = "downloads.example:443" }`: "list of HOST:PORT pairs",
		`grant "network" { hosts = [443] }`:                   "is a string",
		`grant "network" { hosts = ["*.example:443"] }`:       "wildcards",
		`grant "network" { to = ["downloads.example:443"] }`:  "Unsupported argument",
		`grant "net" { hosts = ["downloads.example:443"] }`:   "Unknown grant",
		`grant "network" { }`:                                 "Missing required argument",
	} {
		_, _, diags := ParseGrants("g.hcl", []byte(src))
		var all strings.Builder
		for _, d := range diags {
			all.WriteString(d.Error() + "\n")
		}
		if !diags.HasErrors() || !strings.Contains(all.String(), want) {
			t.Errorf("%s: %v, want %q", src, all.String(), want)
		}
	}
}
