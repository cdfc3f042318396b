package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// CheckEndpoint checks the URL of a service shardkeeper trusts with money (a NEAR RPC node, an
// Arweave gateway): https, or plain http to a loopback address. With allowPrivateHTTP, plain
// http may also go to a private network: an address of a private range (RFC 1918, RFC 4193,
// link-local, shared address space), or a host name, which the operator vouches for. Plain
// http to a public address is refused whatever the flag: anyone on the path could answer for
// the node. Errors show the URL without its user info, query or path (they may hold an API
// key).
func CheckEndpoint(raw string, allowPrivateHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not a URL")
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	switch u.Scheme {
	case "https":
		return nil
	case "http":
	default:
		return fmt.Errorf("%s: an http(s) URL is expected", shown)
	}
	host := u.Hostname()
	addr, ipErr := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	switch {
	case host == "localhost" || (ipErr == nil && addr.IsLoopback()):
		return nil
	case !allowPrivateHTTP:
		return fmt.Errorf("%s: plain http is allowed to a loopback address only; use https (or, on a private network, the flag that allows plain http there)", shown)
	case ipErr != nil:
		if net.ParseIP(host) == nil {
			return nil // a host name: the operator's private network
		}
		return fmt.Errorf("%s: not an address", shown)
	case addr.IsPrivate() || addr.IsLinkLocalUnicast() || sharedAddressSpace.Contains(addr.Unmap()):
		return nil
	}
	return fmt.Errorf("%s: plain http to a public address is never allowed: use https", shown)
}

// sharedAddressSpace is RFC 6598's carrier-grade NAT range, private to its network.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
