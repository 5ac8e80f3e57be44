package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/layer"
)

// BenchmarkAdaptiveVsBareServer times, in each iteration, one loopback
// GET to a bare server and one to the same handler behind layer.Adaptive
// (an admission.Limiter of the default Gradient2 config, far from its
// limit), alternating which goes first, and reports the ratio of their
// median times (x-bare; issue #38's goal: <= 1.02) and the allocations
// per request over bare. /bare compares two bare servers: how far from 1
// the run's noise puts the ratio. Named without lib= so that benchtable
// leaves it out.
func BenchmarkAdaptiveVsBareServer(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	for _, c := range []struct {
		name string
		h    func() http.Handler
	}{
		{"bare", func() http.Handler { return ok }},
		{"adaptive", func() http.Handler {
			l, err := admission.New(admission.Config{})
			if err != nil {
				b.Fatal(err)
			}
			return layer.Adaptive(l, ok)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			bareSrv := httptest.NewServer(ok)
			defer bareSrv.Close()
			srv := httptest.NewServer(c.h())
			defer srv.Close()
			client := func() *http.Client {
				t := http.DefaultTransport.(*http.Transport).Clone()
				t.MaxIdleConnsPerHost = 16
				return &http.Client{Transport: t}
			}
			bare, other := client(), client()
			defer bare.CloseIdleConnections()
			defer other.CloseIdleConnections()
			get(b, bare, bareSrv.URL)
			get(b, other, srv.URL)
			var tBare, tOther []time.Duration
			odd := false
			for b.Loop() {
				t0 := time.Now()
				if odd {
					get(b, other, srv.URL)
				} else {
					get(b, bare, bareSrv.URL)
				}
				t1 := time.Now()
				if odd {
					get(b, bare, bareSrv.URL)
				} else {
					get(b, other, srv.URL)
				}
				d1, d2 := t1.Sub(t0), time.Since(t1)
				if odd {
					d1, d2 = d2, d1
				}
				tBare, tOther = append(tBare, d1), append(tOther, d2)
				odd = !odd
			}
			b.ReportMetric(float64(median(tOther))/float64(median(tBare)), "x-bare")
			aBare, _ := perRequest(func() { get(b, bare, bareSrv.URL) })
			aOther, _ := perRequest(func() { get(b, other, srv.URL) })
			b.ReportMetric(aOther-aBare, "extra-allocs/req")
		})
	}
}
