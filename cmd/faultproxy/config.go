package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/faultinject"
	"go.yaml.in/yaml/v3"
)

// config is everything faultproxy runs with.
type config struct {
	Listen   string
	Upstream *url.URL
	Admin    string // "" or "off": no admin endpoint
	// AllowNonLoopback allows a -listen address that is not loopback.
	AllowNonLoopback bool
	// AllowNonLoopbackAdmin allows an -admin address that is not
	// loopback; it then needs an admin token.
	AllowNonLoopbackAdmin bool
	// AdminTokenFile names the file holding the admin token.
	AdminTokenFile string
	// AdminToken, when set, is the bearer token every admin request but
	// GET /healthz must carry: read from AdminTokenFile, else from
	// $STORMGUARD_ADMIN_TOKEN.
	AdminToken string
	Seed       uint64
	Rules      faultinject.Rules
	LogFaults  bool

	// Set by tests only.
	clock   clock.Clock             // nil: the real clock
	onEvent func(faultinject.Event) // called after the fault log
	// adminReadTimeout replaces adminReadTimeout (the constant) when set.
	adminReadTimeout time.Duration
}

// Defaults.
const (
	defaultListen = "127.0.0.1:0"
	defaultAdmin  = "127.0.0.1:0"
)

// envAdminToken names the environment variable that may hold the admin
// token (-admin-token-file wins over it).
const envAdminToken = "STORMGUARD_ADMIN_TOKEN"

// fileConfig is the YAML file given with -config. Every key is optional;
// flags given on the command line override it.
type fileConfig struct {
	Listen                *string   `yaml:"listen"`
	Upstream              *string   `yaml:"upstream"`
	Admin                 *string   `yaml:"admin"`
	AllowNonLoopback      *bool     `yaml:"allow_non_loopback"`
	AllowNonLoopbackAdmin *bool     `yaml:"allow_non_loopback_admin"`
	AdminTokenFile        *string   `yaml:"admin_token_file"`
	Seed                  *uint64   `yaml:"seed"`
	LogFaults             *bool     `yaml:"log_faults"`
	Rules                 yaml.Node `yaml:"rules"`
}

// parseArgs reads the command line (and the -config file it names) into a
// validated config. Precedence: built-in defaults, then the file, then the
// flags given.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("faultproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: faultproxy -upstream URL [flags]\n\n"+
			"A reverse proxy on loopback that injects faults into the traffic to URL.\n"+
			"Flags override the -config file. Durations: 250ms, 1m30s. Percentages: 12.5 or 12.5%%.\n\n"+
			"Both listeners bind loopback addresses only, unless -allow-non-loopback (proxy)\n"+
			"or -allow-non-loopback-admin (admin, which then requires a token) is given.\n"+
			"The admin API answers only requests whose Host header names its address,\n"+
			"localhost or an IP address (a guard against DNS rebinding). With a token\n"+
			"(-admin-token-file, or $%s) every admin request but GET /healthz\n"+
			"must send \"Authorization: Bearer TOKEN\".\n\n", envAdminToken)
		fs.PrintDefaults()
	}
	var (
		configPath string
		overrides  []func(*config) error
		outages    []faultinject.Window
	)
	// record checks a flag's value at once, so that package flag reports
	// it against its flag, and applies it after the config file.
	record := func(apply func(c *config, v string) error) func(string) error {
		return func(v string) error {
			if err := apply(&config{}, v); err != nil {
				return err
			}
			overrides = append(overrides, func(c *config) error { return apply(c, v) })
			return nil
		}
	}
	set := func(name, usage string, apply func(c *config, v string) error) {
		fs.Func(name, usage, record(apply))
	}
	setBool := func(name, usage string, apply func(c *config, v string) error) {
		fs.BoolFunc(name, usage, record(apply))
	}
	dur := func(dst func(*config) *time.Duration) func(*config, string) error {
		return func(c *config, v string) error {
			d, err := faultinject.ParseDuration(v)
			*dst(c) = d
			return err
		}
	}
	pct := func(dst func(*config) *float64) func(*config, string) error {
		return func(c *config, v string) error {
			p, err := faultinject.ParsePercent(v)
			*dst(c) = p
			return err
		}
	}
	num := func(dst func(*config) *int) func(*config, string) error {
		return func(c *config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return fmt.Errorf("want a whole number >= 0, got %q", v)
			}
			*dst(c) = n
			return nil
		}
	}

	fs.StringVar(&configPath, "config", "", "YAML `file` with listen, upstream, admin, allow_non_loopback, allow_non_loopback_admin, admin_token_file, seed, log_faults and rules (see README)")
	set("listen", "proxy listen `address` (default "+defaultListen+")", func(c *config, v string) error { c.Listen = v; return nil })
	set("upstream", "upstream base `URL` (http or https), required", func(c *config, v string) error {
		u, err := parseUpstream(v)
		c.Upstream = u
		return err
	})
	set("admin", "admin endpoint listen `address`, or off (default "+defaultAdmin+")", func(c *config, v string) error { c.Admin = v; return nil })
	setBool("allow-non-loopback", "allow a -listen address that is not loopback (the proxy only; see -allow-non-loopback-admin)", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		c.AllowNonLoopback = b
		return err
	})
	setBool("allow-non-loopback-admin", "allow an -admin address that is not loopback; requires an admin token", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		c.AllowNonLoopbackAdmin = b
		return err
	})
	set("admin-token-file", "`file` holding the bearer token the admin API requires (default: $"+envAdminToken+"; none: no token)", func(c *config, v string) error {
		c.AdminTokenFile = v
		return nil
	})
	set("seed", "random `seed` for fault decisions", func(c *config, v string) error {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		c.Seed = n
		return err
	})
	setBool("log-faults", "log every injected fault", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		c.LogFaults = b
		return err
	})
	set("latency", "added latency (`duration`)", dur(func(c *config) *time.Duration { return &c.Rules.Latency }))
	set("jitter", "uniform random latency in [0, `duration`] on top of -latency", dur(func(c *config) *time.Duration { return &c.Rules.Jitter }))
	set("abort", "`percent` of requests answered with -abort-status", pct(func(c *config) *float64 { return &c.Rules.Abort.Percent }))
	set("abort-status", "`status` of aborted requests (default 503)", num(func(c *config) *int { return &c.Rules.Abort.Status }))
	set("abort-retry-after", "Retry-After sent with aborts (`duration`, rounded up to seconds)", dur(func(c *config) *time.Duration { return &c.Rules.Abort.RetryAfter }))
	set("reset", "`percent` of requests whose connection is reset", pct(func(c *config) *float64 { return &c.Rules.ResetPercent }))
	set("hang", "`percent` of requests left hanging until the client gives up", pct(func(c *config) *float64 { return &c.Rules.HangPercent }))
	fs.Func("outage", "outage window `START-END[:ACTION[:STATUS[:RETRY_AFTER]]]`, e.g. 10s-20s:abort:503:2s; ACTION is abort, reset or hang; repeatable, replaces the file's outages", func(v string) error {
		w, err := parseOutage(v)
		outages = append(outages, w)
		return err
	})
	set("outage-cycle", "repeat the outage schedule every `duration`", dur(func(c *config) *time.Duration { return &c.Rules.OutageCycle }))
	set("concurrency", "most requests running at once, `n` (0: no limit)", num(func(c *config) *int { return &c.Rules.Limit.Concurrency }))
	set("queue", "most requests waiting for a slot, `n`", num(func(c *config) *int { return &c.Rules.Limit.Queue }))
	set("queue-timeout", "longest wait in the queue (`duration`; 0: until the client gives up)", dur(func(c *config) *time.Duration { return &c.Rules.Limit.QueueTimeout }))
	set("limit-status", "`status` of requests refused by the limit (default 503)", num(func(c *config) *int { return &c.Rules.Limit.Status }))
	set("limit-retry-after", "Retry-After sent with refusals (`duration`, rounded up to seconds)", dur(func(c *config) *time.Duration { return &c.Rules.Limit.RetryAfter }))
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("faultproxy: unexpected arguments %q", fs.Args())
	}
	c := config{Listen: defaultListen, Admin: defaultAdmin}
	if configPath != "" {
		data, err := os.ReadFile(configPath)
		if err != nil {
			return config{}, fmt.Errorf("faultproxy: %w", err)
		}
		if err := applyFile(&c, data); err != nil {
			return config{}, fmt.Errorf("faultproxy: %s: %w", configPath, err)
		}
	}
	for _, o := range overrides {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	if len(outages) > 0 {
		c.Rules.Outages = outages
	}
	if err := c.loadAdminToken(); err != nil {
		return config{}, err
	}
	if err := c.validate(); err != nil {
		return config{}, err
	}
	return c, nil
}

func (c *config) validate() error {
	if c.Upstream == nil {
		return errors.New("faultproxy: -upstream is required")
	}
	if err := c.Rules.Validate(); err != nil {
		return err
	}
	if c.Listen == "" {
		return errors.New("faultproxy: -listen is empty")
	}
	if !c.AllowNonLoopback {
		if err := checkLoopback(c.Listen); err != nil {
			return fmt.Errorf("faultproxy: -listen: %w (pass -allow-non-loopback to allow it)", err)
		}
	}
	if c.adminEnabled() {
		if err := checkLoopback(c.Admin); err != nil {
			if !c.AllowNonLoopbackAdmin {
				return fmt.Errorf("faultproxy: -admin: %w (pass -allow-non-loopback-admin, with a token, to allow it)", err)
			}
			if c.AdminToken == "" {
				return fmt.Errorf("faultproxy: -admin %s is not loopback: %w", c.Admin, errNeedToken)
			}
		}
	}
	return nil
}

// errNeedToken refuses an admin API reachable from other hosts without a
// token.
var errNeedToken = errors.New("an admin API beyond loopback requires a token (-admin-token-file or $" + envAdminToken + ")")

// loadAdminToken reads the admin token from AdminTokenFile, else from the
// environment. A token file that is empty, or holds more than one line, is
// refused, so that a typo never means "no token".
func (c *config) loadAdminToken() error {
	if c.AdminTokenFile == "" {
		c.AdminToken = strings.TrimSpace(os.Getenv(envAdminToken))
		return nil
	}
	b, err := os.ReadFile(c.AdminTokenFile)
	if err != nil {
		return fmt.Errorf("faultproxy: -admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return fmt.Errorf("faultproxy: -admin-token-file %s is empty", c.AdminTokenFile)
	case strings.ContainsAny(tok, "\r\n"):
		return fmt.Errorf("faultproxy: -admin-token-file %s holds more than one line", c.AdminTokenFile)
	}
	c.AdminToken = tok
	return nil
}

func (c *config) adminEnabled() bool { return c.Admin != "" && c.Admin != "off" }

// errNotLoopback is wrapped when an address is not a loopback one.
var errNotLoopback = errors.New("not a loopback address")

// checkLoopback accepts host:port addresses whose host is a loopback IP
// (127.0.0.0/8, ::1) or "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: %w", addr, errNotLoopback)
	}
	return nil
}

// parseUpstream accepts an absolute http or https URL.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("bad upstream URL %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %q is not an http:// or https:// URL with a host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("upstream %q: only scheme, host and path are allowed", s)
	}
	return u, nil
}

// parseOutage reads START-END[:ACTION[:STATUS[:RETRY_AFTER]]].
func parseOutage(s string) (faultinject.Window, error) {
	var w faultinject.Window
	parts := strings.Split(s, ":")
	if len(parts) > 4 {
		return w, fmt.Errorf("outage %q: too many ':' fields (want START-END[:ACTION[:STATUS[:RETRY_AFTER]]])", s)
	}
	span := strings.SplitN(parts[0], "-", 2)
	if len(span) != 2 {
		return w, fmt.Errorf("outage %q: want START-END, e.g. 10s-20s", s)
	}
	var err error
	if w.Start, err = faultinject.ParseDuration(span[0]); err != nil {
		return w, fmt.Errorf("outage %q: start: %w", s, err)
	}
	if w.End, err = faultinject.ParseDuration(span[1]); err != nil {
		return w, fmt.Errorf("outage %q: end: %w", s, err)
	}
	w.Action = faultinject.Abort
	if len(parts) > 1 && parts[1] != "" {
		if w.Action, err = faultinject.ParseAction(strings.TrimSpace(parts[1])); err != nil {
			return w, fmt.Errorf("outage %q: %w", s, err)
		}
		if w.Action != faultinject.Abort && w.Action != faultinject.Reset && w.Action != faultinject.Hang {
			return w, fmt.Errorf("outage %q: action %v is not abort, reset or hang", s, w.Action)
		}
	}
	if len(parts) > 2 && parts[2] != "" {
		if w.Status, err = strconv.Atoi(strings.TrimSpace(parts[2])); err != nil {
			return w, fmt.Errorf("outage %q: bad status %q", s, parts[2])
		}
	}
	if len(parts) > 3 && parts[3] != "" {
		if w.RetryAfter, err = faultinject.ParseDuration(parts[3]); err != nil {
			return w, fmt.Errorf("outage %q: retry-after: %w", s, err)
		}
	}
	if err := (faultinject.Rules{Outages: []faultinject.Window{w}}).Validate(); err != nil {
		return w, err
	}
	return w, nil
}

// applyFile applies a YAML config file to c.
func applyFile(c *config, data []byte) error {
	var f fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("yaml: %w", trimYAMLError(err))
	}
	if f.Listen != nil {
		c.Listen = *f.Listen
	}
	if f.Admin != nil {
		c.Admin = *f.Admin
	}
	if f.AllowNonLoopback != nil {
		c.AllowNonLoopback = *f.AllowNonLoopback
	}
	if f.AllowNonLoopbackAdmin != nil {
		c.AllowNonLoopbackAdmin = *f.AllowNonLoopbackAdmin
	}
	if f.AdminTokenFile != nil {
		c.AdminTokenFile = *f.AdminTokenFile
	}
	if f.Seed != nil {
		c.Seed = *f.Seed
	}
	if f.LogFaults != nil {
		c.LogFaults = *f.LogFaults
	}
	if f.Upstream != nil {
		u, err := parseUpstream(*f.Upstream)
		if err != nil {
			return err
		}
		c.Upstream = u
	}
	if !f.Rules.IsZero() {
		r, err := rulesFromNode(&f.Rules)
		if err != nil {
			return err
		}
		c.Rules = r
	}
	return nil
}

// parseRulesYAML reads rules written in YAML (or JSON, which is YAML too)
// and validates them. An empty document (nothing but blanks, comments,
// "---" or null) is refused with errEmptyRules: "{}" asks for no faults.
func parseRulesYAML(data []byte) (faultinject.Rules, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return faultinject.Rules{}, fmt.Errorf("yaml: %w", trimYAMLError(err))
	}
	var v any
	if n.Kind == 0 || (n.Decode(&v) == nil && v == nil) { // empty or null document
		return faultinject.Rules{}, errEmptyRules
	}
	return rulesFromNode(&n)
}

// rulesFromNode converts a YAML node to JSON and parses it with
// faultinject.ParseRules, so YAML and JSON share one schema and one set of
// checks.
func rulesFromNode(n *yaml.Node) (faultinject.Rules, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return faultinject.Rules{}, fmt.Errorf("rules: %w", trimYAMLError(err))
	}
	if v == nil {
		return faultinject.Rules{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return faultinject.Rules{}, fmt.Errorf("rules: only string keys and plain values are allowed: %w", err)
	}
	return faultinject.ParseRules(b)
}

// rulesYAML renders rules in the YAML form parseRulesYAML reads.
func rulesYAML(r faultinject.Rules) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var v yaml.Node
	if err := yaml.Unmarshal(b, &v); err != nil { // JSON is YAML; keeps key order
		return nil, err
	}
	setBlockStyle(&v)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// setBlockStyle turns JSON's flow style into YAML's block style.
func setBlockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode && n.Style&yaml.DoubleQuotedStyle != 0 {
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		setBlockStyle(c)
	}
}

func trimYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}
