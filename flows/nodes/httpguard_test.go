package nodes_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// The dial-time decision on every address class. Nothing here sends a packet: Control
// is called as the dialer would call it, with the address it would dial.
func TestSSRFGuardRefusesEveryInternalAddressClassAtDialTime(t *testing.T) {
	p := &nodes.HTTPPolicy{}
	for _, tc := range []struct {
		addr, class string
	}{
		{"127.0.0.1:80", "loopback"},
		{"127.9.9.9:80", "loopback"},
		{"[::1]:80", "loopback"},
		{"0.0.0.0:80", "unspecified"},
		{"[::]:80", "unspecified"},
		{"169.254.169.254:80", "link-local"},
		{"[fe80::1]:80", "link-local"},
		{"10.0.0.1:80", "private"},
		{"172.16.5.4:80", "private"},
		{"192.168.1.1:80", "private"},
		{"[fd00::1]:80", "private"},
		{"100.64.0.1:80", "carrier-grade NAT"},
		{"[::ffff:127.0.0.1]:80", "loopback"},
		{"[::ffff:169.254.169.254]:80", "link-local"},
		{"[::ffff:10.0.0.1]:80", "private"},
		{"[64:ff9b::a00:1]:80", "private (inside 64:ff9b::a00:1)"},
		{"[2002:7f00:1::]:80", "loopback (inside 2002:7f00:1::)"},
		{"224.0.0.1:80", "multicast"},
		{"255.255.255.255:80", "broadcast"},
		{"0.1.2.3:80", `"this network"`},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := p.Control("tcp", tc.addr, nil)
			if !errors.Is(err, nodes.ErrForbiddenAddress) || !strings.Contains(err.Error(), tc.class) {
				t.Errorf("Control(%s) = %v, want a refusal naming the class %q", tc.addr, err, tc.class)
			}
		})
	}
	for _, public := range []string{"93.184.216.34:443", "[2606:2800:220:1:248:1893:25c8:1946]:443", "8.8.8.8:53", "[::ffff:93.184.216.34]:80"} {
		if err := p.Control("tcp", public, nil); err != nil {
			t.Errorf("Control(%s) = %v; a public address is allowed", public, err)
		}
	}
}

func TestSSRFGuardReadsLegacyNumericHostsAsTheAddressesTheyAre(t *testing.T) {
	p := &nodes.HTTPPolicy{}
	for host, want := range map[string]string{
		"2130706433": "127.0.0.1",
		"0x7f000001": "127.0.0.1",
		"0177.0.0.1": "127.0.0.1",
		"127.1":      "127.0.0.1",
		"10.1":       "10.0.0.1",
		"3232235777": "192.168.1.1",
	} {
		u, _ := url.Parse("http://" + host + "/")
		err := p.CheckURL(u)
		if !errors.Is(err, nodes.ErrForbiddenAddress) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%s) = %v, want a refusal naming %s", host, err, want)
		}
	}
	// A public address written as a number is refused too, with the form to use.
	u, _ := url.Parse("http://1572395042/")
	if err := p.CheckURL(u); !errors.Is(err, nodes.ErrForbiddenAddress) || !strings.Contains(err.Error(), "write 93.184.216.34") {
		t.Errorf("CheckURL(1572395042) = %v, want it refused with the dotted form", err)
	}
	for _, ok := range []string{"http://example.com/", "https://api.example.com:8443/x?y=1", "http://1x2.example/"} {
		u, _ := url.Parse(ok)
		if err := p.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s) = %v", ok, err)
		}
	}
	for _, bad := range []string{"file:///etc/passwd", "gopher://x/", "http://user:pw@example.com/", "http:///nohost"} {
		u, _ := url.Parse(bad)
		if err := p.CheckURL(u); !errors.Is(err, nodes.ErrForbiddenAddress) {
			t.Errorf("CheckURL(%s) = %v, want refused", bad, err)
		}
	}
}

func TestSSRFAllowListAdmitsOnlyWhatItNames(t *testing.T) {
	rules, err := nodes.ParseAllowList("10.0.0.0/8, 127.0.0.1:8080 [::1]:11434")
	if err != nil {
		t.Fatal(err)
	}
	p := &nodes.HTTPPolicy{Allow: rules}
	for addr, allowed := range map[string]bool{
		"10.1.2.3:443":          true,
		"[::ffff:10.1.2.3]:443": true,
		"127.0.0.1:8080":        true,
		"127.0.0.1:8081":        false,
		"[::1]:11434":           true,
		"[::1]:80":              false,
		"192.168.0.1:80":        false,
	} {
		err := p.CheckAddr(netip.MustParseAddrPort(addr))
		if (err == nil) != allowed {
			t.Errorf("%s: %v, want allowed=%v", addr, err, allowed)
		}
	}
	if _, err := nodes.ParseAllowList("localhost"); err == nil {
		t.Error("a host name in the allow-list was accepted; it lists addresses")
	}
}

// fakeResolver answers names without sending DNS queries.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host (fake resolver)")
}

// countingServer is a loopback server that counts the requests that reach it.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// End to end, connecting only to loopback: a loopback URL, a name that resolves to
// loopback and a redirect to loopback are each refused, and nothing reaches the server.
func TestHTTPRefusesLoopbackByURLByNameAndByRedirect(t *testing.T) {
	target, hits := countingServer(t, nil)
	tu, _ := url.Parse(target.URL)
	port := tu.Port()

	t.Run("a loopback URL", func(t *testing.T) {
		h := buildIn(t, &nodes.Env{}, "http", `{"url": "`+target.URL+`/admin"}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		wantRefused(t, err, "is a loopback address")
	})
	t.Run("a name that resolves to loopback", func(t *testing.T) {
		env := &nodes.Env{HTTP: &nodes.HTTPPolicy{Resolver: fakeResolver{"internal.example": {netip.MustParseAddr("127.0.0.1")}}}}
		h := buildIn(t, env, "http", `{"url": "http://internal.example:`+port+`/admin"}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		wantRefused(t, err, "127.0.0.1:"+port+" is a loopback address")
	})
	t.Run("a redirect to loopback", func(t *testing.T) {
		// The first hop is allow-listed by its exact address and port; the redirect's
		// target (another port) is not.
		hop, hopHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/admin", http.StatusFound)
		})
		rules, _ := nodes.ParseAllowList(strings.TrimPrefix(hop.URL, "http://"))
		h := buildIn(t, &nodes.Env{HTTP: &nodes.HTTPPolicy{Allow: rules}}, "http", `{"url": "`+hop.URL+`/go"}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		wantRefused(t, err, "is a loopback address")
		if hopHits.Load() != 1 {
			t.Errorf("the allowed first hop got %d requests, want 1", hopHits.Load())
		}
	})
	t.Run("a redirect to another scheme", func(t *testing.T) {
		hop, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		})
		h := buildIn(t, &nodes.Env{HTTP: loopbackOK()}, "http", `{"url": "`+hop.URL+`/go"}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		wantRefused(t, err, `scheme "file"`)
	})
	if hits.Load() != 0 {
		t.Errorf("the loopback target got %d requests; the guard let some through", hits.Load())
	}
}

func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, nodes.ErrForbiddenAddress) || flows.ErrorCode(err) != flows.Forbidden || !flows.IsPermanent(err) {
		t.Fatalf("got %v, want a permanent forbidden refusal", err)
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `node "n"`) {
		t.Errorf("error %q does not say %q at node n", err, want)
	}
}
