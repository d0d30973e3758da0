package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/observe"
)

// HTTPPolicy is the server's rule for where the http component may connect. Flows come
// from people who must not reach the server's own network through it (SSRF), so every
// address that is not public is refused unless it is allow-listed here: loopback,
// private, link-local, CGNAT (100.64.0.0/10), unspecified, multicast and the other
// special ranges, in their IPv4, IPv6 and IPv4-mapped forms. The check runs when the
// connection is dialled (net.Dialer.Control), on the address actually dialled, so DNS
// answers and redirects cannot get around it.
type HTTPPolicy struct {
	// Allow lists the internal destinations flows may reach anyway.
	Allow []AllowRule
	// Resolver looks names up (default net.DefaultResolver); tests give one that answers
	// without sending DNS queries.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

// AllowRule allows one range of addresses, on one port or (Port 0) on all.
type AllowRule struct {
	Prefix netip.Prefix
	Port   uint16
}

func (r AllowRule) String() string {
	if r.Port == 0 {
		return r.Prefix.String()
	}
	if r.Prefix.IsSingleIP() {
		return netip.AddrPortFrom(r.Prefix.Addr(), r.Port).String()
	}
	return r.Prefix.String() + " port " + strconv.Itoa(int(r.Port))
}

// ParseAllowList reads allow rules separated by commas or spaces: "10.0.0.0/8",
// "127.0.0.1", "127.0.0.1:8080", "[::1]:11434", "fd00::/8".
func ParseAllowList(s string) ([]AllowRule, error) {
	var rules []AllowRule
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		r, err := parseAllowRule(f)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseAllowRule(s string) (AllowRule, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return AllowRule{Prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return AllowRule{Prefix: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())}, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr().Unmap()
		return AllowRule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: ap.Port()}, nil
	}
	return AllowRule{}, fmt.Errorf("HTTP allow-list entry %q: want an address, a CIDR range or address:port, such as 10.0.0.0/8 or 127.0.0.1:8080", s)
}

// special are the ranges that are not the public internet, besides what netip's
// predicates (loopback, private, link-local, multicast, unspecified) already cover.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// embeddedIPv4 returns the IPv4 address a NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
// address carries, which is where the packets end up.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case netip.MustParsePrefix("2002::/16").Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// internal says what kind of non-public address a is, or "" for a public one.
func internal(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if v4, ok := embeddedIPv4(a); ok {
		if what := internal(v4); what != "" {
			return what + " (inside " + a.String() + ")"
		}
	}
	return ""
}

// ErrForbiddenAddress is the cause of every refusal of the SSRF guard.
var ErrForbiddenAddress = errors.New("address refused by the server's HTTP policy")

// CheckAddr decides whether the http component may connect to addr: nil for a public
// address or an allow-listed one, else an error naming the address class.
func (p *HTTPPolicy) CheckAddr(addr netip.AddrPort) error {
	a := addr.Addr().Unmap()
	what := internal(a)
	if what == "" {
		return nil
	}
	for _, r := range p.Allow {
		if r.Prefix.Contains(a) && (r.Port == 0 || r.Port == addr.Port()) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is a %s address; allow it in the server's HTTP allow-list (--http-allow) if flows may reach it",
		ErrForbiddenAddress, netip.AddrPortFrom(a, addr.Port()), what)
}

// Control is the net.Dialer.Control of the http component's connections: it runs on
// every address actually dialled, after name resolution, before a packet is sent.
func (p *HTTPPolicy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the dialled address %q", ErrForbiddenAddress, address)
	}
	return p.CheckAddr(ap)
}

// CheckURL refuses what the http component never requests: other schemes than http
// and https, credentials in the URL, and hosts written as numbers in the legacy forms
// that other tools read as IPv4 addresses (2130706433, 0x7f000001, 0177.0.0.1, 127.1),
// which would otherwise be looked up as names. IP literals are checked as addresses.
func (p *HTTPPolicy) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q; only http and https are allowed", ErrForbiddenAddress, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: the URL carries credentials; send them in a header from an environment variable", ErrForbiddenAddress)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: the URL has no host", ErrForbiddenAddress)
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return fmt.Errorf("%w: port %q", ErrForbiddenAddress, ps)
		}
		port = uint16(n)
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return p.CheckAddr(netip.AddrPortFrom(a, port))
	}
	if a, ok := legacyIPv4(host); ok {
		if err := p.CheckAddr(netip.AddrPortFrom(a, port)); err != nil {
			return fmt.Errorf("host %q is %s: %w", host, a, err)
		}
		return fmt.Errorf("%w: host %q is the IPv4 address %s in a legacy numeric form; write %s", ErrForbiddenAddress, host, a, a)
	}
	return nil
}

// legacyIPv4 reads host as inet_aton does: one to four parts, each decimal, octal
// (leading 0) or hexadecimal (0x), the last filling the remaining bytes.
func legacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 || (len(parts) > 1 && parts[len(parts)-1] == "") {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, s := range parts {
		base := 10
		switch {
		case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
			base, s = 16, s[2:]
		case len(s) > 1 && s[0] == '0':
			base, s = 8, s[1:]
		}
		if s == "" && base != 8 {
			return netip.Addr{}, false
		}
		if s == "" {
			s = "0"
		}
		n, err := strconv.ParseUint(s, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = n
	}
	var v uint64
	last := len(vals) - 1
	for i, n := range vals[:last] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v |= vals[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// httpClient is the http component's client, made once per Env from its policy.
func (e *Env) httpClient() *http.Client {
	if c, ok := e.guards.Load("client"); ok {
		return c.(*http.Client)
	}
	actual, _ := e.guards.LoadOrStore("client", e.HTTP.Client(0))
	return actual.(*http.Client)
}

// Client returns an HTTP client that connects only where the policy allows: no proxy (a
// proxy would be dialled instead of the destination), every dial checked by Control on
// the address actually dialled, every redirect's URL checked again and at most
// maxRedirects followed. timeout bounds a whole request (0: none; the caller's context
// then does). The http component and the result webhooks use it. A nil policy refuses
// every internal address.
func (p *HTTPPolicy) Client(timeout time.Duration) *http.Client {
	if p == nil {
		p = &HTTPPolicy{}
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	resolver := p.Resolver
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if resolver == nil || net.ParseIP(host) != nil {
			return dialer.DialContext(ctx, network, addr)
		}
		ips, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		var firstErr error
		for _, ip := range ips {
			c, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("%s has no address", host)
		}
		return nil, firstErr
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	// With tracing on, each request is a client span and carries a traceparent.
	return &http.Client{Transport: observe.Transport(tr), Timeout: timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if err := p.CheckURL(req.URL); err != nil {
			return fmt.Errorf("redirect to %s: %w", redact(req.URL), err)
		}
		return nil
	}}
}

const maxRedirects = 5

// redact prints a URL without its query, which may carry tokens.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = "…"
	}
	return c.String()
}

// forbidden reports whether err is a refusal of the guard, which retrying cannot fix.
func forbidden(err error) bool { return errors.Is(err, ErrForbiddenAddress) }

// send sends req with the guarded client after checking its address, and maps what can
// go wrong to the step's error at path (the param that holds the URL): an address the
// policy refuses fails for good, before anything is sent and again when it is dialled;
// no answer within timeout is a timeout; anything else may be retried. where names the
// request in errors, its URL without credentials or query.
func (e *Env) send(ctx context.Context, node, path string, req *http.Request, timeout time.Duration) (res *http.Response, where string, err error) {
	where = req.Method + " " + redact(req.URL)
	if err := e.HTTP.CheckURL(req.URL); err != nil {
		return nil, where, flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: node, Path: path, Message: where, Err: err})
	}
	res, err = e.httpClient().Do(req)
	if err != nil {
		switch {
		case forbidden(err):
			return nil, where, flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: node, Path: path, Message: where, Err: unwrapURLError(err)})
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, where, &flows.Error{Code: flows.Timeout, Node: node, Message: fmt.Sprintf("%s: no complete answer within %s (params.timeout)", where, timeout)}
		}
		return nil, where, &flows.Error{Code: flows.Unavailable, Node: node, Message: where, Err: unwrapURLError(err)}
	}
	return res, where, nil
}
