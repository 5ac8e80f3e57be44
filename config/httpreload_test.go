package config

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpretry"
)

// TestReloadReachesHTTPTransportBuiltOnce (issue #25 blocker 1): a
// transport built once over a Handle follows the file — max_attempts and
// retry_on — while calls flow through a real loopback server, over
// HTTP/1.1 and HTTP/2 with TLS. Every call runs under one whole policy:
// its attempts are those of the old file or of the new one, never a mix.
func TestReloadReachesHTTPTransportBuiltOnce(t *testing.T) {
	for _, mode := range []string{"h1", "h2"} {
		t.Run(mode, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			if mode == "h2" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()

			path := filepath.Join(t.TempDir(), "policies.yaml")
			file := func(attempts int, status string) string {
				return fmt.Sprintf(`policies:
  api:
    max_attempts: %d
    backoff: {strategy: constant, base: 0s}
    retry_on: {http_status: [%s]}
operations:
  get: api
`, attempts, status)
			}
			writeFile(t, path, file(2, "503"))
			reg, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := reg.Watch(path, WatchOptions{Debounce: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()

			next := srv.Client().Transport
			client := &http.Client{Transport: httpretry.New(next, reg.Policy("get"))} // built once
			call := func() int {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return -1
				}
				resp.Body.Close()
				o, ok := httpretry.Result(resp)
				if !ok {
					return 1
				}
				return o.Attempts
			}
			if n := call(); n != 2 {
				t.Fatalf("v1: %d attempts, want 2", n)
			}

			// Calls flow from 4 goroutines while the file changes.
			var stop atomic.Bool
			var seen sync.Map
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 2000 && !stop.Load(); i++ {
						seen.Store(call(), true)
					}
				}()
			}
			// The watcher applies a file within its debounce; wait for it
			// (bounded), by the number of files applied.
			reloaded := func(want uint64) {
				deadline := time.Now().Add(10 * time.Second)
				for applied, _ := reg.Stats(); applied < want; applied, _ = reg.Stats() {
					if time.Now().After(deadline) {
						t.Fatalf("the watcher applied %d files, want %d", applied, want)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			applied, _ := reg.Stats()
			writeFile(t, path, file(4, "503"))
			reloaded(applied + 1)
			stop.Store(true)
			wg.Wait()
			seen.Range(func(k, _ any) bool {
				if n := k.(int); n != 2 && n != 4 {
					t.Errorf("a call made %d attempts during the reload: want 2 (v1) or 4 (v2)", n)
				}
				return true
			})
			if n := call(); n != 4 {
				t.Fatalf("v2: %d attempts, want 4", n)
			}
			// retry_on follows too: 503 is no longer listed.
			writeFile(t, path, file(4, "502"))
			reloaded(applied + 2)
			if n := call(); n != 1 {
				t.Fatalf("v3 (retry_on [502]): %d attempts on a 503, want 1", n)
			}
		})
	}
}
