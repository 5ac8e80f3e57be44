package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseArgsDefaultsAndFlags(t *testing.T) {
	c, err := parseArgs([]string{"-upstream", "http://127.0.0.1:9000/api"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != defaultListen || c.Admin != defaultAdmin || c.Upstream.String() != "http://127.0.0.1:9000/api" ||
		!c.Rules.IsZero() || c.AllowNonLoopback || c.Seed != 0 {
		t.Fatalf("defaults: %+v", c)
	}

	c, err = parseArgs([]string{
		"-upstream=https://example.test", "-listen", "127.0.0.1:8081", "-admin", "[::1]:8082", "-seed", "42", "-log-faults",
		"-latency", "50ms", "-jitter", "20ms", "-abort", "10%", "-abort-status", "429", "-abort-retry-after", "2s",
		"-reset", "1", "-hang", "0.5%", "-outage", "10s-20s", "-outage", "30s-40s:hang", "-outage", "50s-55s:abort:502:1s",
		"-outage-cycle", "1m", "-concurrency", "8", "-queue", "16", "-queue-timeout", "1s", "-limit-status", "503", "-limit-retry-after", "3s",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := faultinject.Rules{
		Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond,
		Abort:        faultinject.AbortRule{Percent: 10, Status: 429, RetryAfter: 2 * time.Second},
		ResetPercent: 1, HangPercent: 0.5,
		Outages: []faultinject.Window{
			{Start: 10 * time.Second, End: 20 * time.Second, Action: faultinject.Abort},
			{Start: 30 * time.Second, End: 40 * time.Second, Action: faultinject.Hang},
			{Start: 50 * time.Second, End: 55 * time.Second, Action: faultinject.Abort, Status: 502, RetryAfter: time.Second},
		},
		OutageCycle: time.Minute,
		Limit:       faultinject.Limit{Concurrency: 8, Queue: 16, QueueTimeout: time.Second, Status: 503, RetryAfter: 3 * time.Second},
	}
	if !reflect.DeepEqual(c.Rules, want) {
		t.Fatalf("rules\n got %+v\nwant %+v", c.Rules, want)
	}
	if c.Listen != "127.0.0.1:8081" || c.Admin != "[::1]:8082" || c.Seed != 42 || !c.LogFaults {
		t.Fatalf("config %+v", c)
	}
}

func TestParseArgsFileThenFlags(t *testing.T) {
	path := writeFile(t, "chaos.yaml", `
listen: 127.0.0.1:7001
upstream: http://127.0.0.1:9000
admin: "off"
seed: 7
rules:
  latency: 100ms
  abort: {percent: 5%, status: 500}
  outages:
    - {start: 1s, end: 2s, action: reset}
  limit:
    concurrency: 4
`)
	c, err := parseArgs([]string{"-config", path, "-latency", "10ms", "-seed", "9"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7001" || c.adminEnabled() || c.Seed != 9 || c.Upstream.Host != "127.0.0.1:9000" {
		t.Fatalf("config %+v", c)
	}
	want := faultinject.Rules{
		Latency: 10 * time.Millisecond, // the flag wins
		Abort:   faultinject.AbortRule{Percent: 5, Status: 500},
		Outages: []faultinject.Window{{Start: time.Second, End: 2 * time.Second, Action: faultinject.Reset}},
		Limit:   faultinject.Limit{Concurrency: 4},
	}
	if !reflect.DeepEqual(c.Rules, want) {
		t.Fatalf("rules\n got %+v\nwant %+v", c.Rules, want)
	}
	// -outage replaces the file's outages.
	c, err = parseArgs([]string{"-config", path, "-outage", "5s-6s:hang"}, io.Discard)
	if err != nil || len(c.Rules.Outages) != 1 || c.Rules.Outages[0].Action != faultinject.Hang {
		t.Fatalf("outages %+v, %v", c.Rules.Outages, err)
	}
}

func TestParseArgsErrors(t *testing.T) {
	goodFile := writeFile(t, "ok.yaml", "upstream: http://127.0.0.1:1\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-upstream is required"},
		{[]string{"-upstream", "ftp://127.0.0.1"}, "not an http"},
		{[]string{"-upstream", "http://127.0.0.1?x=1"}, "only scheme"},
		{[]string{"-upstream", "http://127.0.0.1", "-listen", "0.0.0.0:8080"}, "not a loopback"},
		{[]string{"-upstream", "http://127.0.0.1", "-listen", ":8080"}, "not a loopback"},
		{[]string{"-upstream", "http://127.0.0.1", "-listen", "example.com:80"}, "not a loopback"},
		{[]string{"-upstream", "http://127.0.0.1", "-admin", "10.0.0.1:9"}, "-admin"},
		{[]string{"-upstream", "http://127.0.0.1", "-listen", "nonsense"}, "missing port"},
		{[]string{"-upstream", "http://127.0.0.1", "-latency", "fast"}, "bad duration"},
		{[]string{"-upstream", "http://127.0.0.1", "-abort", "120%"}, "outside [0, 100]"},
		{[]string{"-upstream", "http://127.0.0.1", "-abort", "60", "-reset", "50"}, "add up"},
		{[]string{"-upstream", "http://127.0.0.1", "-abort-status", "200"}, "abort status"},
		{[]string{"-upstream", "http://127.0.0.1", "-concurrency", "-1"}, "whole number"},
		{[]string{"-upstream", "http://127.0.0.1", "-outage", "20s-10s"}, "not after"},
		{[]string{"-upstream", "http://127.0.0.1", "-seed", "x"}, "invalid value"},
		{[]string{"-upstream", "http://127.0.0.1", "extra"}, "unexpected arguments"},
		{[]string{"-config", "/nonexistent/file.yaml"}, "no such file"},
		{[]string{"-config", writeFile(t, "bad.yaml", "rules:\n  lantency: 1s\n")}, "unknown field"},
		{[]string{"-config", writeFile(t, "bad2.yaml", "listn: x\n")}, "not found"},
		{[]string{"-config", goodFile, "-nope"}, "not defined"},
	} {
		_, err := parseArgs(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) = %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	// Allowed explicitly, a non-loopback address passes validation.
	if _, err := parseArgs([]string{"-upstream", "http://127.0.0.1", "-listen", "0.0.0.0:0", "-allow-non-loopback"}, io.Discard); err != nil {
		t.Errorf("-allow-non-loopback: %v", err)
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:0": true, "127.1.2.3:80": true, "[::1]:80": true, "localhost:80": true, "LOCALHOST:1": true,
		"0.0.0.0:80": false, ":80": false, "[::]:80": false, "192.168.1.1:80": false, "example.com:80": false, "127.0.0.1": false,
	} {
		err := checkLoopback(addr)
		if (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

func TestParseOutage(t *testing.T) {
	for s, want := range map[string]faultinject.Window{
		"10s-20s":             {Start: 10 * time.Second, End: 20 * time.Second, Action: faultinject.Abort},
		"0-1m:reset":          {End: time.Minute, Action: faultinject.Reset},
		"1s-2s:respond:429":   {Start: time.Second, End: 2 * time.Second, Action: faultinject.Abort, Status: 429},
		"1s-2s::502:3s":       {Start: time.Second, End: 2 * time.Second, Action: faultinject.Abort, Status: 502, RetryAfter: 3 * time.Second},
		" 1s - 2s : hang ":    {Start: time.Second, End: 2 * time.Second, Action: faultinject.Hang},
		"1m30s-2m:abort:503:": {Start: 90 * time.Second, End: 2 * time.Minute, Action: faultinject.Abort, Status: 503},
	} {
		got, err := parseOutage(s)
		if err != nil || got != want {
			t.Errorf("parseOutage(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "10s", "10s-", "-1s-2s", "2s-1s", "1s-2s:reject", "1s-2s:abort:abc", "1s-2s:abort:200",
		"1s-2s:abort:503:x", "1s-2s:a:b:c:d"} {
		if _, err := parseOutage(s); err == nil {
			t.Errorf("parseOutage(%q) accepted", s)
		}
	}
}

func TestRulesYAMLRoundTrip(t *testing.T) {
	rules := faultinject.Rules{
		Latency: 50 * time.Millisecond, Jitter: 5 * time.Millisecond,
		Abort:        faultinject.AbortRule{Percent: 12.5, Status: 503, RetryAfter: time.Second},
		ResetPercent: 1, HangPercent: 2,
		Outages:     []faultinject.Window{{Start: 0, End: time.Second, Action: faultinject.Hang}},
		OutageCycle: time.Minute,
		Limit:       faultinject.Limit{Concurrency: 3, Queue: 2, QueueTimeout: 500 * time.Millisecond},
	}
	y, err := rulesYAML(rules)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "latency: 50ms\n") || strings.Contains(string(y), "{") {
		t.Errorf("YAML not in block style:\n%s", y)
	}
	back, err := parseRulesYAML(y)
	if err != nil {
		t.Fatalf("parseRulesYAML:\n%s\n%v", y, err)
	}
	if !reflect.DeepEqual(back, rules) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, rules)
	}
	for _, empty := range []string{"", " \n", "# nothing\n", "---\n"} {
		if _, err := parseRulesYAML([]byte(empty)); !errors.Is(err, errEmptyRules) {
			t.Fatalf("empty document %q: %v, want errEmptyRules", empty, err)
		}
	}
	if r, err := parseRulesYAML([]byte("{}")); err != nil || !r.IsZero() {
		t.Fatalf("{}: %+v, %v", r, err)
	}
	for _, bad := range []string{"latency: [", "1: 2", "- a", "abort: {percent: 101}", "? [a]\n: b\n"} {
		if _, err := parseRulesYAML([]byte(bad)); err == nil {
			t.Errorf("parseRulesYAML(%q) accepted", bad)
		}
	}
}

func FuzzParseRulesYAML(f *testing.F) {
	for _, s := range []string{
		"", "latency: 50ms\njitter: 5ms\n", "abort: {percent: 5%, status: 429, retry_after: 2s}\n",
		"outages:\n  - {start: 0s, end: 1s, action: hang}\noutage_cycle: 10s\n", `{"limit": {"concurrency": 2, "queue": 1}}`,
		"reset_percent: 0.5\nhang_percent: 0.5\n", "latency: 0\n", "&a x: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRulesYAML(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted invalid rules: %v", err)
		}
		y, err := rulesYAML(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseRulesYAML(y)
		if err != nil {
			t.Fatalf("re-parsing\n%s: %v", y, err)
		}
		y2, _ := rulesYAML(back)
		if string(y) != string(y2) {
			t.Fatalf("round trip changed the rules:\n%s\n%s", y, y2)
		}
	})
}

func FuzzParseOutage(f *testing.F) {
	for _, s := range []string{"10s-20s", "0-1m:reset", "1s-2s:abort:503:2s", "1s-2s::429", "x-y:z", "1s-2s-3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := parseOutage(s)
		if err != nil {
			return
		}
		if err := (faultinject.Rules{Outages: []faultinject.Window{w}}).Validate(); err != nil {
			t.Fatalf("parseOutage(%q) = %+v, invalid: %v", s, w, err)
		}
	})
}

// FuzzParseArgs feeds whitespace-separated words as the command line: no
// panic, and whatever is accepted is valid and loopback-only unless allowed.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"-upstream http://127.0.0.1:1", "-upstream http://127.0.0.1:1 -latency 1s -abort 50% -outage 1s-2s:hang",
		"-upstream http://127.0.0.1:1 -listen 0.0.0.0:1", "-upstream http://x -allow-non-loopback -admin :1",
		"-upstream http://127.0.0.1:1 -concurrency 2 -queue 1 -limit-status 429",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		for _, a := range args {
			if strings.HasPrefix(strings.TrimLeft(a, "-"), "config") {
				return // no file system access from the fuzzer
			}
		}
		c, err := parseArgs(args, io.Discard)
		if err != nil {
			return
		}
		if err := c.Rules.Validate(); err != nil {
			t.Fatalf("accepted invalid rules: %v", err)
		}
		if !c.AllowNonLoopback {
			if err := checkLoopback(c.Listen); err != nil {
				t.Fatalf("accepted -listen %q: %v", c.Listen, err)
			}
			if c.adminEnabled() && checkLoopback(c.Admin) != nil {
				t.Fatalf("accepted -admin %q", c.Admin)
			}
		}
	})
}
