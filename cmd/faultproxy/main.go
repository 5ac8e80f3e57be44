// Command faultproxy is a reverse proxy that injects faults into the
// traffic to an upstream: added latency, aborted requests with a status and
// Retry-After, reset connections, requests left hanging, outage windows on a
// schedule and a concurrency limit with a bounded queue. It uses package
// faultinject's server side in front of httputil.ReverseProxy.
//
//	faultproxy -upstream http://127.0.0.1:9000 -latency 50ms -jitter 20ms -abort 5% -abort-status 503
//	faultproxy -config chaos.yaml
//
// It listens on loopback only unless allowed per listener
// (-allow-non-loopback for the proxy, -allow-non-loopback-admin for the
// admin API, which then requires a token), and prints its addresses on
// standard output:
//
//	proxy=http://127.0.0.1:41234 admin=http://127.0.0.1:41235
//
// The admin endpoint changes the rules while traffic flows and reports what
// was injected:
//
//	curl -s $ADMIN/rules                       # JSON; ?format=yaml for YAML
//	curl -s -X PUT --data-binary @rules.yaml $ADMIN/rules
//	curl -s $ADMIN/counters
//
// The admin API answers only requests whose Host header names it
// (localhost, its IP, the -admin host: a guard against DNS rebinding), and,
// given a token (-admin-token-file or $STORMGUARD_ADMIN_TOKEN), only
// requests carrying "Authorization: Bearer TOKEN" (GET /healthz excepted).
// A request to the admin API must arrive whole within 30 s (its headers
// within 10 s), and its idle connections are closed after a minute; the
// proxy bounds headers to 10 s and idle connections to 2 minutes, and
// leaves request bodies and answers unbounded (faults hold them on
// purpose).
// An empty PUT /rules, or one whose body is null (JSON or YAML), is
// refused with 400 and the rules stay; send {} to clear every fault.
//
// An -upstream that is the proxy's own listener is refused at start. Every
// forwarded request carries a Faultproxy-Hop header with a random ID of
// the proxy instance; a request that comes back with it (a loop through
// another proxy, a name, a port forward), or that has passed more than 16
// faultproxies, is answered 508 Loop Detected and not forwarded.
//
// SIGINT or SIGTERM releases hanging requests and shuts down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shutdownGrace bounds the graceful shutdown.
const shutdownGrace = 10 * time.Second

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	p, err := start(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	admin := p.adminURL
	if admin == "" {
		admin = "off"
	}
	fmt.Fprintf(stdout, "proxy=%s admin=%s\n", p.proxyURL, admin)
	log.Info("faultproxy started", "proxy", p.proxyURL, "admin", admin, "upstream", cfg.Upstream.String(), "seed", cfg.Seed)

	code := 0
	select {
	case <-ctx.Done():
	case err := <-p.errc:
		log.Error("server stopped", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := p.shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	return code
}
