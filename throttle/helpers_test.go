package throttle_test

import (
	"errors"
	"net/http"
	"sync"

	"github.com/stormguard/stormguard/httpretry"
)

// scripted is a rand.Source whose draws the test chooses: Uniform(src,
// 2^53-1) returns the top 53 bits of a draw, so next(u) makes the
// throttler's next draw u (in [0, 1)) rounded down to 53 bits; next
// returns the draw as the throttler will see it.
type scripted struct {
	mu sync.Mutex
	q  []uint64
}

func (s *scripted) next(u float64) float64 {
	n := uint64(u * (1 << 53))
	s.mu.Lock()
	s.q = append(s.q, n<<11)
	s.mu.Unlock()
	return float64(n) / (1 << 53)
}

func (s *scripted) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		panic("scripted: no draw queued")
	}
	v := s.q[0]
	s.q = s.q[1:]
	return v
}

// errOverload is a 503 as httpretry reports it.
var errOverload error = &httpretry.StatusError{StatusCode: http.StatusServiceUnavailable}

var errPlain = errors.New("connection reset")
