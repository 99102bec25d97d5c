package gateway_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a DNS server on loopback (UDP) answering what the test sets: the A records
// of names and the PTR records of addresses, as Kubernetes' DNS answers for a headless
// Service. Its resolver is a net.Resolver that sends every query to it, so discovery goes
// through Go's own DNS client, as in production.
type dnsServer struct {
	conn net.PacketConn
	mu   sync.Mutex
	a    map[string][]netip.Addr // by fully qualified name
	ptr  map[netip.Addr]string   // fully qualified names
	// watched: every A query for this name is reported on lookups (when it has room).
	watched string
	lookups chan struct{}
}

func startDNS(t *testing.T, watched string) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{conn: conn, a: map[string][]netip.Addr{}, ptr: map[netip.Addr]string{}, watched: watched,
		lookups: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve()
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return d
}

// resolver is a net.Resolver that asks this server alone.
func (d *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
}

// setA sets the addresses a name resolves to.
func (d *dnsServer) setA(name string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.a[name] = nil
	for _, a := range addrs {
		d.a[name] = append(d.a[name], netip.MustParseAddr(a))
	}
}

// setPTR sets an address's reverse name ("": none, NXDOMAIN).
func (d *dnsServer) setPTR(addr, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name == "" {
		delete(d.ptr, netip.MustParseAddr(addr))
		return
	}
	d.ptr[netip.MustParseAddr(addr)] = name
}

// settled waits until a discovery round that began after the last change has been applied:
// the first A query seen may predate the change, the second does not, and the third starts
// only once the second's round was applied.
func (d *dnsServer) settled(t *testing.T) {
	t.Helper()
	for range 3 {
		select {
		case <-d.lookups:
		case <-testCtx(t).Done():
			t.Fatal("no DNS lookup")
		}
	}
}

func (d *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, ok := d.answer(buf[:n]); ok {
			d.conn.WriteTo(out, from)
		}
	}
}

// answer builds the response to one query.
func (d *dnsServer) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	d.mu.Lock()
	addrs, known := d.a[name]
	var ptrName string
	if q.Type == dnsmessage.TypePTR {
		if addr, ok := reverseAddr(name); ok {
			ptrName, known = d.ptr[addr], d.ptr[addr] != ""
		}
	}
	d.mu.Unlock()
	if q.Type == dnsmessage.TypeA && name == d.watched {
		select {
		case d.lookups <- struct{}{}:
		default:
		}
	}
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	switch q.Type {
	case dnsmessage.TypeA:
		for _, a := range addrs {
			if a.Is4() {
				b.AResource(rh, dnsmessage.AResource{A: a.As4()})
			}
		}
	case dnsmessage.TypePTR:
		if ptrName != "" {
			b.PTRResource(rh, dnsmessage.PTRResource{PTR: dnsmessage.MustNewName(ptrName)})
		}
	}
	out, err := b.Finish()
	return out, err == nil
}

// reverseAddr reads "4.3.2.1.in-addr.arpa." as 1.2.3.4.
func reverseAddr(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(name, ".in-addr.arpa.")
	if !ok {
		return netip.Addr{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	a, err := netip.ParseAddr(strings.Join(parts, "."))
	return a, err == nil
}
