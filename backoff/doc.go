// Package backoff computes how long to wait before each retry.
//
// A Strategy is stateless: Delay(n, prev) depends only on the retry number,
// the previous delay and a random draw, so one Strategy value is shared by
// every goroutine without locks and costs no allocation per call. Three
// shapes are provided — Constant, Linear and Exponential — each combined
// with a jitter mode:
//
//	None          T                          (lockstep: avoid for fleets)
//	Full          uniform [0, T]             (the AWS recommendation; retry's default)
//	Equal         uniform [T/2, T]
//	Decorrelated  uniform [Base, min(Max, 3·prev)]   (AWS "decorrelated jitter", capped first)
//	Proportional  uniform [T·(1-f), min(Max, T·(1+f))]  (gRPC, cenkalti)
//
// where T is the strategy's un-jittered delay for retry n, never above Max,
// and prev is the previous delay (Base before the first retry).
//
// Both caps apply before the draw, not after it. AWS's article writes
// decorrelated jitter as min(Max, uniform [Base, 3·prev]); once 3·prev
// passes Max that clips every draw above Max onto Max itself, so most of a
// fleet's capped retries land on one value in lockstep, which is what
// jitter is there to prevent. Drawing from [Base, min(Max, 3·prev)] keeps
// the delay uniform and ≤ Max. Likewise Proportional draws from its window
// cut at Max, so at the cap the delay is uniform in [Max·(1−f), Max]
// rather than exactly Max half of the time.
// All arithmetic saturates: any retry number and any Multiplier give a delay
// in [0, Max], never a negative value or a panic.
//
// Random draws come from the process-wide generator of math/rand/v2 (the
// runtime's per-thread ChaCha8, drawn from directly), which is
// concurrency-safe and allocation-free. Set a Rand source (see NewSource) for
// reproducible delays. Any source may be shared by goroutines: NewSource's
// is lock-free, any other is drawn from under a lock (see Uniform), so a
// strategy holding rand.NewPCG cannot race.
//
// Strategies can also be named: Register and Lookup map names such as
// "exponential" or "full_jitter" to constructors, so configuration files can
// refer to strategies, including users' own, by name.
package backoff
