// Package backoff computes how long to wait before each retry.
//
// A Strategy is stateless: Delay(n, prev) depends only on the retry number,
// the previous delay and a random draw, so one Strategy value is shared by
// every goroutine without locks and costs no allocation per call. Three
// shapes are provided — Constant, Linear and Exponential — each combined
// with a jitter mode:
//
//	None          T                          (lockstep: avoid for fleets)
//	Full          uniform [0, T]             (the AWS recommendation; default)
//	Equal         uniform [T/2, T]
//	Decorrelated  min(Max, uniform [Base, 3·prev])   (AWS "decorrelated jitter")
//	Proportional  uniform [T·(1-f), T·(1+f)], capped at Max  (gRPC, cenkalti)
//
// where T is the strategy's un-jittered delay for retry n, never above Max.
// All arithmetic saturates: any retry number and any Multiplier give a delay
// in [0, Max], never a negative value or a panic.
//
// Random draws come from the process-wide generator of math/rand/v2, which is
// concurrency-safe and allocation-free. Set a Rand source (see NewSource) for
// reproducible delays.
//
// Strategies can also be named: Register and Lookup map names such as
// "exponential" or "full_jitter" to constructors, so configuration files can
// refer to strategies, including users' own, by name.
package backoff
