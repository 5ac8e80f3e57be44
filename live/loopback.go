package live

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// loopback is an http.Server on a fresh 127.0.0.1 port, serving in a
// goroutine of its own until close.
type loopback struct {
	srv  *http.Server
	url  string // http://127.0.0.1:port/
	done chan struct{}
}

func serveLoopback(h http.Handler) (*loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &loopback{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		url:  "http://" + ln.Addr().String() + "/",
		done: make(chan struct{}),
	}
	go func() { defer close(l.done); l.srv.Serve(ln) }()
	return l, nil
}

// close shuts the server down, closing it when its handlers take more
// than 5s, and returns once Serve has.
func (l *loopback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.srv.Shutdown(ctx) != nil {
		l.srv.Close()
	}
	<-l.done
}

// runPolicies runs run for every policy, at the same time or (sequential)
// one after another in order, and returns their rows in the policies'
// order, or their errors joined. When a run panics, the others end and
// the first panic goes on in the caller's goroutine.
func runPolicies[P, R any](policies []P, sequential bool, run func(P) (R, error)) ([]R, error) {
	rows := make([]R, len(policies))
	errs := make([]error, len(policies))
	if sequential {
		for i, p := range policies {
			if rows[i], errs[i] = run(p); errs[i] != nil {
				break
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return rows, nil
	}
	var wg sync.WaitGroup
	var panicked panicBox
	for i, p := range policies {
		wg.Go(func() {
			defer panicked.catch()
			rows[i], errs[i] = run(p)
		})
	}
	panicked.repanic(&wg)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}
