package lang

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// HostPort is a network endpoint as the network grant names it (spec/grants.md §1a), in
// canonical form so that two spellings of one endpoint compare equal and nothing else
// does: Host is a DNS name in lowercase ASCII without a trailing dot, or a literal IP
// address as netip prints it (IPv4 dotted; IPv6 compressed, without brackets or zone; an
// IPv4-mapped IPv6 address as its IPv4 address); Port is 1 to 65535, never implied.
type HostPort struct {
	Host string
	Port uint16
}

// String is the endpoint as grants write it: HOST:PORT, an IPv6 address in brackets.
func (h HostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }

// Addr is the host's address when it is a literal IP, and false when it is a name.
func (h HostPort) Addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(h.Host)
	return a, err == nil
}

// ParseHostPort reads "HOST:PORT" or "[IPV6]:PORT", the form of a grant's hosts and of a
// CONNECT request: the port is required (a grant for example.org:443 is not one for
// example.org:80). Hosts are compared without case and without a trailing dot; a host
// that only looks like a name but would be read as an IPv4 address by some resolvers
// ("127.1", "0x7f.1") and wildcards are refused.
func ParseHostPort(s string) (HostPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return HostPort{}, fmt.Errorf("%q is not HOST:PORT (an IPv6 address in brackets: [::1]:443)", s)
	}
	return hostPort(s, host, port, 0)
}

// URLHostPort is the endpoint a URL reaches: its host, and its port or the default of its
// scheme (http 80, https 443; another scheme must name its port).
func URLHostPort(u *url.URL) (HostPort, error) {
	var def uint16
	switch strings.ToLower(u.Scheme) {
	case "http":
		def = 80
	case "https":
		def = 443
	}
	return hostPort(u.Host, u.Hostname(), u.Port(), def)
}

// hostPort makes the canonical endpoint of host and port (def when port is "" and def is
// not 0); s is what was written, for errors.
func hostPort(s, host, port string, def uint16) (HostPort, error) {
	hp := HostPort{Port: def}
	if port != "" || def == 0 {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || port[0] == '+' {
			return HostPort{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
		}
		hp.Port = uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return HostPort{}, fmt.Errorf("%q: an address with a zone cannot be granted", s)
		}
		hp.Host = a.Unmap().String()
		return hp, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkHostName(name); err != nil {
		return HostPort{}, fmt.Errorf("%q: %v", s, err)
	}
	hp.Host = name
	return hp, nil
}

// checkHostName accepts a DNS host name (RFC 1123): labels of ASCII letters, digits and
// inner hyphens, 1 to 63 bytes each, 253 in all, and a last label that is not a number.
func checkHostName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("the host must be a DNS name or an IP address")
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf("wildcards are not granted: name each host")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("the host must be a DNS name (ASCII letters, digits, hyphens; punycode for other letters) or an IP address")
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("the host must be a DNS name (ASCII letters, digits, hyphens; punycode for other letters) or an IP address")
			}
		}
	}
	// A last label that is a number makes some resolvers read the name as an IPv4 address
	// (inet_aton: "127.1", "0x7f.1"), which a grant must name as such.
	last := labels[len(labels)-1]
	if last[0] >= '0' && last[0] <= '9' {
		return fmt.Errorf("the host looks like an IPv4 address but is not one in dotted form")
	}
	return nil
}

// AllowsNetwork reports whether a network grant names hp: the same host and the same port,
// exactly, both canonical (HostPort). This is the one rule of the network grant, for
// sources and for egress steps alike. A name is allowed by that name only and a literal IP
// by that IP only (no DNS here: a grant of localhost:8080 does not allow 127.0.0.1:8080);
// where a granted name leads is checked when it is dialed (AllowsDial).
func (g *Grants) AllowsNetwork(hp HostPort) bool {
	if g == nil {
		return false
	}
	for _, h := range g.Network {
		if h == hp {
			return true
		}
	}
	return false
}

// AllowsDial reports whether a connection to ip, reached for hp, is allowed: hp is granted
// (AllowsNetwork), and either hp is the literal address ip, or hp is a name and ip is not
// an address of this machine or its link: loopback, link-local, multicast or unspecified.
// A granted name that resolves there (DNS rebinding, a name turned against the host or its
// metadata service) is refused; an operator who means such an address grants it by IP.
// Private addresses (10/8, fc00::/7, …) are allowed for names: an intranet mirror has one.
func (g *Grants) AllowsDial(hp HostPort, ip netip.Addr) bool {
	if !g.AllowsNetwork(hp) {
		return false
	}
	ip = ip.Unmap()
	if a, ok := hp.Addr(); ok {
		return a == ip
	}
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() && !ip.IsUnspecified()
}
