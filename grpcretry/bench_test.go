package grpcretry

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// benchPolicy bounds attempts and nothing else, so that the figures are the
// interceptor's own: an AttemptTimeout adds what any deadline costs (a
// timer, the grpc-timeout header, the server's timer), as it would if the
// caller set it, and an Observer, Budget or Breaker costs what it costs.
func benchPolicy() *retry.Policy {
	return &retry.Policy{Operation: "bench", MaxAttempts: 3}
}

// The server records every attempt; drain its start notifications so the
// buffered channel never fills during a benchmark.
func drain(b *testing.B, s *server) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-s.started:
			case <-stop:
				return
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
}

func benchServe(b *testing.B) (plain, retrying testpb.TestServiceClient) {
	srv := newServer()
	srv.started = make(chan int, 1024)
	drain(b, srv)
	addr := serve(b, srv)
	return dial(b, addr), dialRetry(b, addr, benchPolicy())
}

// benchBoth runs call in a loop as two sub-benchmarks, without and with
// the interceptors.
func benchBoth(b *testing.B, call func(*testing.B, testpb.TestServiceClient)) {
	plain, retrying := benchServe(b)
	for _, c := range []struct {
		name   string
		client testpb.TestServiceClient
	}{{"plain", plain}, {"retry", retrying}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				call(b, c.client)
			}
		})
	}
}

func unaryOnce(b *testing.B, c testpb.TestServiceClient, req *testpb.SimpleRequest) {
	if _, err := c.UnaryCall(context.Background(), req); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUnary measures a unary call on loopback without and with the
// interceptor.
func BenchmarkUnary(b *testing.B) {
	req := &testpb.SimpleRequest{Payload: payload("0123456789abcdef")}
	benchBoth(b, func(b *testing.B, c testpb.TestServiceClient) { unaryOnce(b, c, req) })
}

// BenchmarkUnaryOverhead reports the interceptor's overhead on loopback as
// a ratio: overhead-% = 100·(intercepted/plain − 1); the goal is under 5%.
// Plain and intercepted calls alternate (in alternating order) so that both
// meet the same machine load, and the ratio is the median over rounds of
// 64 pairs, so that bursts of load from other processes do not decide it.
func BenchmarkUnaryOverhead(b *testing.B) {
	plain, retrying := benchServe(b)
	req := &testpb.SimpleRequest{Payload: payload("0123456789abcdef")}
	for range 200 { // warm both connections
		unaryOnce(b, plain, req)
		unaryOnce(b, retrying, req)
	}
	const round = 64
	var (
		tPlain, tRetry time.Duration // totals
		rPlain, rRetry time.Duration // this round
		ratios         []float64
		i              int
	)
	for b.Loop() {
		first, second := plain, retrying
		if i%2 == 1 {
			first, second = retrying, plain
		}
		t0 := time.Now()
		unaryOnce(b, first, req)
		t1 := time.Now()
		unaryOnce(b, second, req)
		t2 := time.Now()
		dp, dr := t1.Sub(t0), t2.Sub(t1)
		if i%2 == 1 {
			dp, dr = dr, dp
		}
		rPlain += dp
		rRetry += dr
		i++
		if i%round == 0 {
			ratios = append(ratios, float64(rRetry)/float64(rPlain))
			tPlain += rPlain
			tRetry += rRetry
			rPlain, rRetry = 0, 0
		}
	}
	tPlain += rPlain
	tRetry += rRetry
	median := float64(tRetry) / float64(tPlain)
	if len(ratios) > 0 {
		slices.Sort(ratios)
		median = ratios[len(ratios)/2]
	}
	b.ReportMetric(float64(tPlain.Nanoseconds())/float64(i), "plain-ns/call")
	b.ReportMetric(float64(tRetry.Nanoseconds())/float64(i), "retry-ns/call")
	b.ReportMetric(100*(median-1), "overhead-%")
}

// BenchmarkServerStream measures a server-streaming call of 10 responses.
func BenchmarkServerStream(b *testing.B) {
	req := outputRequest(10)
	benchBoth(b, func(b *testing.B, c testpb.TestServiceClient) {
		stream, err := c.StreamingOutputCall(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClientStream measures a client-streaming call of 10 requests of
// 1 KiB, which the interceptor keeps for replay.
func BenchmarkClientStream(b *testing.B) {
	msgs := inputMessages(10, 1024)
	benchBoth(b, func(b *testing.B, c testpb.TestServiceClient) {
		stream, err := c.StreamingInputCall(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := stream.CloseAndRecv(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkUnaryInterceptorOnly measures the interceptor around an invoker
// that succeeds at once: its own cost per call, without the network.
// "announce" is the default; "quiet" sends no stormguard metadata
// (WithAnnounce(false)), which is the cost of the loop alone.
func BenchmarkUnaryInterceptorOnly(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"announce", nil}, {"quiet", []Option{WithAnnounce(false)}}} {
		b.Run(c.name, func(b *testing.B) {
			ic := UnaryClientInterceptor(benchPolicy(), c.opts...)
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := ic(ctx, unaryMethod, nil, nil, nil, invoker); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnaryHedgeFast compares a call that answers before the hedge
// delay through UnaryHedgingInterceptor with the same call through
// UnaryClientInterceptor, both with the method declared idempotent:
// around an invoker that succeeds at once (the interceptors' own cost),
// and against the loopback server.
func BenchmarkUnaryHedgeFast(b *testing.B) {
	idem := WithIdempotentServices(testService)
	hedger := &hedge.Hedger{Policy: benchPolicy(), Delay: time.Second}
	ics := []struct {
		name string
		ic   grpc.UnaryClientInterceptor
	}{
		{"retry", UnaryClientInterceptor(benchPolicy(), idem)},
		{"hedge", UnaryHedgingInterceptor(hedger, idem)},
	}
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, c := range ics {
		b.Run("interceptor/"+c.name, func(b *testing.B) {
			ctx := context.Background()
			reply := new(testpb.SimpleResponse)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.ic(ctx, unaryMethod, nil, reply, nil, invoker); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	srv := newServer()
	srv.started = make(chan int, 1024)
	drain(b, srv)
	addr := serve(b, srv)
	for _, c := range ics {
		client := dial(b, addr, grpc.WithChainUnaryInterceptor(c.ic))
		req := &testpb.SimpleRequest{Payload: payload("x")}
		b.Run("loopback/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				unaryOnce(b, client, req)
			}
		})
		// With a deadline, as most calls have: grpc-go then watches a
		// cancellable context in both cases, as it always does for a
		// hedged copy's.
		b.Run("loopback-deadline/"+c.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
