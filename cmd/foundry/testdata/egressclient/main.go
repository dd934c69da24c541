// Command egressclient is the HTTP client the egress tests run inside a sandbox. It sends
// every request through the proxy the sandbox's environment names (HTTPS_PROXY for https://,
// HTTP_PROXY for http://), loopback targets included (net/http's ProxyFromEnvironment would
// not proxy those), trusting the CA in $SSL_CERT_FILE as Go does.
//
//	egressclient get URL FILE     fetch URL into FILE; exit 1 unless the status is 200
//	egressclient try URL          print "URL STATUS" (or "URL error"), exit 0
//	egressclient raw TEXT         send TEXT (\r\n for "\r\n") to the proxy, print the status
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: egressclient get URL FILE | try URL | raw TEXT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "get":
		resp, err := fetch(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			fmt.Fprintf(os.Stderr, "%s: %s %s\n", os.Args[2], resp.Status, b)
			os.Exit(1)
		}
		f, err := os.Create(os.Args[3])
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "try":
		resp, err := fetch(os.Args[2])
		if err != nil {
			fmt.Printf("%s error\n", os.Args[2])
			return
		}
		resp.Body.Close()
		fmt.Printf("%s %d\n", os.Args[2], resp.StatusCode)
	case "raw":
		proxy, _ := url.Parse(os.Getenv("HTTP_PROXY"))
		c, err := net.Dial("tcp", proxy.Host)
		if err != nil {
			fmt.Println("raw error")
			return
		}
		defer c.Close()
		io.WriteString(c, strings.ReplaceAll(os.Args[2], `\r\n`, "\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fmt.Println("raw error")
			return
		}
		fmt.Printf("raw %d\n", resp.StatusCode)
	}
}

func fetch(u string) (*http.Response, error) {
	env := "HTTP_PROXY"
	if strings.HasPrefix(u, "https:") {
		env = "HTTPS_PROXY"
	}
	proxy, err := url.Parse(os.Getenv(env))
	if err != nil || proxy.Host == "" {
		return nil, fmt.Errorf("no proxy in $%s", env)
	}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}}
	return c.Get(u)
}
