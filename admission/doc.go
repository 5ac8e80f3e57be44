// Package admission keeps a server out of the overload it cannot leave on
// its own: it bounds the requests in flight by what the server can serve
// in time, keeps the wait in front of it short, and sheds the rest at
// once, whatever the clients do.
//
// A Limit is the algorithm, pure and clock-free, after Netflix's
// concurrency-limits: Gradient2 (the default) compares a short-term with
// a long-term RTT and allows a queue of √limit; Vegas estimates the queue
// from the no-load RTT; AIMD halves on drops; Fixed is a static bound. A
// Limiter admits requests against the limit in force, feeds the algorithm
// one sample per window of requests, and, as Envoy's adaptive concurrency
// filter does, now and then pins the limit low for a short while
// (Config.ProbeLength: one window unless set) to measure the RTT without
// load, at a jittered interval — for the algorithms that keep one
// (NoLoadSetter: Gradient2 and Vegas; Fixed and AIMD are never probed).
//
// In front of the limit stands a bounded queue with two rules from "Fail
// at Scale" (Maurer, ACM Queue 2015):
//
//   - CoDel (Nichols and Jacobson, ACM Queue 2012): a queue that has not
//     been empty for the last interval (100 ms) is standing, not
//     absorbing a burst, so a request arriving then may wait only the
//     target (5 ms) before it is shed. A queue that empties now and then
//     lets a request wait up to the interval, so short bursts are served,
//     not shed.
//   - Adaptive LIFO: while a queue stands, the newest request is served
//     first, since its caller is the most likely still to be waiting; the
//     oldest, whose callers may have given up, are the ones left to time
//     out. When no queue stands, requests are served in arrival order, so
//     nothing is unfair at normal load.
//
// A request whose caller has gone — its context ended before Acquire or
// while it waits in the queue, or, while it waits, the inbound deadline
// that layer.Middleware reads passed — is dropped before any work starts. layer.Adaptive puts a Limiter in front of an
// http.Handler and answers every shed with layer.Overload ("overloaded;
// don't retry"); Limiter.RetryLimiter bounds a client's own calls.
package admission
