package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// BenchmarkHTTP sends a GET that a loopback server answers 200 "ok",
// through a bare http.Transport and through each retrying transport
// wrapped around its own http.Transport, with 4 attempts allowed.
func BenchmarkHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	newTransport := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		return t
	}
	run := func(b *testing.B, rt http.RoundTripper) {
		client := &http.Client{Transport: rt}
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("lib=bare", func(b *testing.B) { run(b, newTransport()) })
	b.Run("lib=stormguard", func(b *testing.B) {
		run(b, httpretry.New(newTransport(), &retry.Policy{MaxAttempts: 4}))
	})
	b.Run("lib=retryablehttp", func(b *testing.B) {
		c := retryablehttp.NewClient()
		c.HTTPClient.Transport = newTransport()
		c.RetryMax = 3
		c.Logger = nil
		run(b, &retryablehttp.RoundTripper{Client: c})
	})
	b.Run("lib=failsafe-go", func(b *testing.B) {
		rp := retrypolicy.NewBuilder[*http.Response]().WithMaxAttempts(4).Build()
		run(b, failsafehttp.NewRoundTripper(newTransport(), rp))
	})
}
