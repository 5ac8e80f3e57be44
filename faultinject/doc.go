// Package faultinject injects faults into real HTTP traffic, to test how
// clients and retry policies behave when a dependency misbehaves, and to
// build the storm lab's live server.
//
// An Injector holds the Rules and the counters. Use it on either side:
//
//	in := faultinject.New(faultinject.Config{Rules: rules, Seed: 1})
//	srv := httptest.NewServer(in.Handler(app))                          // server side
//	client := &http.Client{Transport: in.Transport(http.DefaultTransport)} // client side
//
// The faults:
//
//   - Latency and Jitter: added delay, Latency plus a uniform share of Jitter.
//   - Abort: a percentage answered with an error status and an optional
//     Retry-After.
//   - ResetPercent: the connection is reset (the server side closes it with
//     an RST; the client side returns an error wrapping syscall.ECONNRESET).
//   - HangPercent: no answer until the caller gives up.
//   - Outages: windows on a schedule, measured from the Injector's epoch and
//     optionally repeating, during which every request is aborted, reset or
//     left hanging.
//   - Limit: at most Concurrency requests run at once, at most Queue wait
//     (FIFO, optionally bounded in time); the rest are rejected with 503 and
//     an optional Retry-After — a server with finite capacity.
//
// The Rules type documents the order in which they apply. Update swaps the
// rules atomically while traffic flows (UpdateWithEpoch also restarts the
// outage schedule, in the same step); the Limit in force, admissions and
// releases change under one lock, so no request is admitted beyond the
// limit in force at that moment. Snapshot returns the counters and the
// in-flight and queue gauges; Config.OnEvent reports each decision as it is
// made.
//
// On the server side a hang ends when its client leaves (over HTTP/1.x the
// hung request's body is drained in the background, since net/http
// watches the connection only once the body has been read), and a request
// whose context ends inside the Injector is answered with its injected
// status or 503 (HeaderFault "canceled"), never with an empty 200.
//
// Decisions are reproducible: the random draws come from a PCG generator
// seeded by Config.Seed, so the same seed, rules and order of requests give
// the same faults. Every wait (latency, queue timeout) and the outage
// schedule use Config.Clock, so tests drive them with clocktest.Fake
// instead of sleeping.
//
// Use the server side to make a real server slow, flaky or saturated (it
// exercises the whole client stack: connection reuse, resets seen by the
// kernel, the caller's deadline); use the client side when there is no
// server to wrap, or to fail requests before they leave the process. The
// cmd/faultproxy program puts the server side in front of any upstream.
//
// Note that net/http's Transport silently retries an idempotent request
// once when a reused keep-alive connection is reset before the first
// response byte; disable keep-alives to observe every server-side reset.
package faultinject
