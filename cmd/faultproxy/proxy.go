package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

// proxy is a running faultproxy: the fault-injecting reverse proxy and,
// optionally, its admin endpoint.
type proxy struct {
	in        *faultinject.Injector
	upstream  *http.Transport
	servers   []*http.Server
	proxyURL  string
	adminURL  string // "" when the admin endpoint is off
	wg        sync.WaitGroup
	errc      chan error // a server that stopped on its own
	closeOnce sync.Once
}

// Server timeouts. The proxy's requests may stream or hang on purpose (a
// fault), so only its headers and idle connections are bounded; the admin
// API's whole request (a PUT body is at most maxRulesBody), its answer and
// its idle connections are.
const (
	readHeaderTimeout = 10 * time.Second
	proxyIdleTimeout  = 2 * time.Minute
	adminReadTimeout  = 30 * time.Second
	adminWriteTimeout = 30 * time.Second
	adminIdleTimeout  = time.Minute
)

// start binds the listeners and serves. The caller must call shutdown.
func start(cfg config, log *slog.Logger) (*proxy, error) {
	p := &proxy{errc: make(chan error, 2)}
	var onEvent func(faultinject.Event)
	if cfg.LogFaults || cfg.onEvent != nil {
		onEvent = func(e faultinject.Event) {
			if cfg.LogFaults && (e.Action != faultinject.Pass || e.Delay > 0) {
				log.Info("fault", "action", e.Action.String(), "outage", e.Outage, "delay", e.Delay,
					"waited", e.Waited, "method", e.Request.Method, "path", e.Request.URL.Path)
			}
			if cfg.onEvent != nil {
				cfg.onEvent(e)
			}
		}
	}
	p.in = faultinject.New(faultinject.Config{Rules: cfg.Rules, Seed: cfg.Seed, Clock: cfg.clock, OnEvent: onEvent})

	// The upstream transport ignores HTTP_PROXY and friends: traffic goes
	// to the upstream given, nowhere else.
	p.upstream = &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	upstream := cfg.Upstream
	hop := newHopID()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
			pr.Out.Header.Add(hopHeader, hop)
		},
		Transport: p.upstream,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client is gone
			}
			log.Warn("upstream error", "method", r.Method, "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	proxyLn, err := listen(cfg.Listen, cfg.AllowNonLoopback)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: -listen: %w (pass -allow-non-loopback to allow it)", err)
	}
	if upstreamIsSelf(upstream, proxyLn.Addr()) {
		_ = proxyLn.Close()
		return nil, fmt.Errorf("faultproxy: -upstream %s is the proxy itself (%s): every request would loop", upstream, proxyLn.Addr())
	}
	p.proxyURL = "http://" + proxyLn.Addr().String()
	lns := []net.Listener{proxyLn}
	handlers := []http.Handler{loopGuard(hop, p.in.Handler(rp), log)}
	if cfg.adminEnabled() {
		adminLn, err := listen(cfg.Admin, cfg.AllowNonLoopbackAdmin)
		if err == nil && cfg.AdminToken == "" && !isLoopback(adminLn.Addr()) {
			_ = adminLn.Close()
			err = fmt.Errorf("%s bound to %s: %w", cfg.Admin, adminLn.Addr(), errNeedToken)
		}
		if err != nil {
			_ = proxyLn.Close()
			return nil, fmt.Errorf("faultproxy: -admin: %w (pass -allow-non-loopback-admin, with a token, to allow it)", err)
		}
		p.adminURL = "http://" + adminLn.Addr().String()
		lns = append(lns, adminLn)
		handlers = append(handlers, guardAdmin(adminHandler(p.in, cfg.clock, log), adminLn.Addr(), cfg.Admin, cfg.AdminToken))
	}
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           handlers[i],
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       proxyIdleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		if i == 1 { // the admin API: small requests, answered at once
			srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = adminReadTimeout, adminWriteTimeout, adminIdleTimeout
			if cfg.adminReadTimeout > 0 {
				srv.ReadTimeout = cfg.adminReadTimeout
			}
		}
		p.servers = append(p.servers, srv)
		p.wg.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				p.errc <- err
			}
		})
	}
	return p, nil
}

// listen binds addr and, unless allowed, refuses an address that turns out
// not to be loopback once bound ("localhost" resolving elsewhere).
func listen(addr string, allowNonLoopback bool) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if !allowNonLoopback && !isLoopback(ln.Addr()) {
		_ = ln.Close()
		return nil, fmt.Errorf("%s bound to %s: %w", addr, ln.Addr(), errNotLoopback)
	}
	return ln, nil
}

// isLoopback reports whether a is a TCP address on a loopback IP.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// shutdown releases hanging and queued requests, then shuts the servers
// down gracefully (until ctx ends, then closes them) and waits for them.
func (p *proxy) shutdown(ctx context.Context) error {
	var errs []error
	p.closeOnce.Do(func() {
		p.in.Close()
		for _, srv := range p.servers {
			if err := srv.Shutdown(ctx); err != nil {
				errs = append(errs, err)
				_ = srv.Close()
			}
		}
		p.wg.Wait()
		p.upstream.CloseIdleConnections()
	})
	return errors.Join(errs...)
}
