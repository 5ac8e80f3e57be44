package httpretry_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// mode is the protocol a test runs over, in the style of net/http's
// run(t, fn, modes): one test body, every protocol, so that a behaviour
// that holds over HTTP/1.1 but not over HTTP/2 cannot hide.
type mode string

const (
	http1Mode  mode = "h1"     // HTTP/1.1 over TCP
	https1Mode mode = "https1" // HTTP/1.1 over TLS
	http2Mode  mode = "h2"     // HTTP/2 over TLS
)

var allModes = []mode{http1Mode, https1Mode, http2Mode}

// run runs fn as a subtest per mode (all of them when none is given).
func run(t *testing.T, fn func(t *testing.T, m mode), modes ...mode) {
	t.Helper()
	if len(modes) == 0 {
		modes = allModes
	}
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) { fn(t, m) })
	}
}

// newModeServer is newServer speaking the protocol of m: plain HTTP/1.1,
// or a TLS server (httptest.NewUnstartedServer, EnableHTTP2 for h2,
// StartTLS).
func newModeServer(t testing.TB, m mode, h func(w http.ResponseWriter, r *http.Request, hit int)) *server {
	t.Helper()
	s := &server{mode: m}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want := m.protoMajor(); r.ProtoMajor != want {
			t.Errorf("request over HTTP/%d, want HTTP/%d", r.ProtoMajor, want)
		}
		h(w, r, int(s.hits.Add(1)))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Config.ErrorLog = quietLog()
	switch m {
	case http1Mode:
		s.Start()
	case https1Mode:
		s.StartTLS()
	case http2Mode:
		s.EnableHTTP2 = true
		s.StartTLS()
	}
	t.Cleanup(s.Close)
	return s
}

func (m mode) protoMajor() int {
	if m == http2Mode {
		return 2
	}
	return 1
}

// base returns a fresh client transport for s: for TLS modes it trusts the
// server's certificate, and for h2 it sets ForceAttemptHTTP2 (as
// http.DefaultTransport does). Idle connections are closed when the test
// ends.
func (s *server) base(t testing.TB) *http.Transport {
	t.Helper()
	tr := &http.Transport{}
	if s.mode == https1Mode || s.mode == http2Mode {
		tr.TLSClientConfig = &tls.Config{RootCAs: certPool(s.Certificate())}
		tr.ForceAttemptHTTP2 = s.mode == http2Mode
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func certPool(cert *x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// checkProto fails the test unless resp came over the protocol of m.
func checkProto(t testing.TB, m mode, resp *http.Response) {
	t.Helper()
	if resp.ProtoMajor != m.protoMajor() {
		t.Errorf("response over %s, want HTTP/%d", resp.Proto, m.protoMajor())
	}
}

// h2Action is what rawH2 does with one request stream.
type h2Action int

const (
	h2OK             h2Action = iota // respond 200 "ok"
	h2Refuse                         // RST_STREAM REFUSED_STREAM
	h2ResetInternal                  // RST_STREAM INTERNAL_ERROR
	h2GoAwayClose                    // GOAWAY (last stream = this one, NO_ERROR), then close the connection
	h2HeadersThenRST                 // respond 200 without ending the stream, then RST_STREAM with rstCode
)

// rawH2 is a scripted HTTP/2 peer on a real TLS loopback listener (ALPN
// "h2"), for the server behaviours net/http's server cannot be made to
// show on cue: a GOAWAY followed by the connection's close while a
// request is in flight, a refused stream, a reset after the headers. It
// speaks real frames to net/http's real HTTP/2 client; it ignores header
// contents (its only response, :status 200, is one HPACK static-table
// byte, with the body "ok"). script(n) gives the action for the n-th request (1 first).
type rawH2 struct {
	URL     string
	pool    *x509.CertPool
	l       net.Listener
	script  func(n int) h2Action
	rstCode uint32
	hits    atomic.Int64
	conns   atomic.Int64
	wg      sync.WaitGroup
}

func newRawH2(t testing.TB, script func(n int) h2Action) *rawH2 {
	t.Helper()
	// Borrow httptest's certificate.
	donor := httptest.NewUnstartedServer(http.NotFoundHandler())
	donor.EnableHTTP2 = true
	donor.StartTLS()
	cert, pool := donor.TLS.Certificates[0], certPool(donor.Certificate())
	donor.Close()

	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &rawH2{URL: "https://" + l.Addr().String(), pool: pool, l: l, script: script}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.wg.Wait()
	})
	return s
}

// base returns an h2 client transport trusting s.
func (s *rawH2) base(t testing.TB) *http.Transport {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	frameGoAway       = 0x7
	flagEndStream     = 0x1
	flagAck           = 0x1
	flagEndHeaders    = 0x4
	codeNo            = 0x0
	codeInternal      = 0x2
	codeRefusedStream = 0x7
)

func (s *rawH2) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if _, err := io.ReadFull(br, preface); err != nil {
		return
	}
	var mu sync.Mutex
	write := func(typ, flags byte, stream uint32, payload []byte) error {
		mu.Lock()
		defer mu.Unlock()
		hdr := make([]byte, 9, 9+len(payload))
		hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		hdr[3], hdr[4] = typ, flags
		binary.BigEndian.PutUint32(hdr[5:], stream&0x7fffffff)
		_, err := c.Write(append(hdr, payload...))
		return err
	}
	if write(frameSettings, 0, 0, nil) != nil {
		return
	}
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
			return
		}
		switch {
		case typ == frameSettings && flags&flagAck == 0:
			if write(frameSettings, flagAck, 0, nil) != nil {
				return
			}
		case typ == frameHeaders:
			code := func(c uint32) []byte { return binary.BigEndian.AppendUint32(nil, c) }
			var err error
			switch s.script(int(s.hits.Add(1))) {
			case h2OK:
				if err = write(frameHeaders, flagEndHeaders, stream, []byte{0x88}); err == nil {
					err = write(frameData, flagEndStream, stream, []byte("ok"))
				}
			case h2Refuse:
				err = write(frameRSTStream, 0, stream, code(codeRefusedStream))
			case h2ResetInternal:
				err = write(frameRSTStream, 0, stream, code(codeInternal))
			case h2GoAwayClose:
				write(frameGoAway, 0, 0, append(code(stream), code(codeNo)...))
				return
			case h2HeadersThenRST:
				if err = write(frameHeaders, flagEndHeaders, stream, []byte{0x88}); err == nil {
					err = write(frameRSTStream, 0, stream, code(s.rstCode))
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// h2StreamError returns the error net/http's HTTP/2 client reports for a
// stream the server reset with code after sending the response headers:
// the genuine (unexported) stream error value, for tests of how errors
// net/http hands back only after its own retries are judged.
func h2StreamError(t testing.TB, code uint32) error {
	t.Helper()
	s := newRawH2(t, func(int) h2Action { return h2HeadersThenRST })
	s.rstCode = code
	resp, err := s.base(t).RoundTrip(get(t, s.URL))
	if err != nil {
		t.Fatalf("h2StreamError: %v", err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if err == nil {
		t.Fatal("h2StreamError: the body read succeeded")
	}
	if errors.Is(err, io.EOF) {
		t.Fatalf("h2StreamError: %v", err)
	}
	return err
}
