package releasetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestInstallFromProxyOffline is the issue 35 acceptance check: with the
// working tree published to a file-system proxy at the release version, a
// user outside the repository (fresh module cache, GOWORK=off, no sum
// database, no network) can `go install` cmd/stormsim and run `stormsim
// check`, and a scratch module can `go get` the library modules and build
// a program that uses each of them. Third-party modules come from the
// local module cache's download directory, which is itself a proxy layout.
func TestInstallFromProxyOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stormsim and a scratch program from a file proxy")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := repoRoot(t)
	v, err := ReadVersions(root)
	if err != nil {
		t.Fatal(err)
	}
	var released []*Module
	for _, d := range v.Modules {
		m, err := ReadModule(root, d)
		if err != nil {
			t.Fatal(err)
		}
		released = append(released, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	cache := goEnv(t, goBin, "GOMODCACHE")
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	if err := BuildProxy(proxy, root, released, v.Version, time.Now()); err != nil {
		t.Fatal(err)
	}
	env := offlineEnv(map[string]string{
		"GOMODCACHE":   filepath.Join(tmp, "modcache"),
		"GOBIN":        filepath.Join(tmp, "bin"),
		"GOPATH":       filepath.Join(tmp, "gopath"),
		"GOWORK":       "off",
		"GOPROXY":      "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOFLAGS":      "-mod=mod -modcacherw -buildvcs=false -trimpath",
		"GOSUMDB":      "off",
		"GONOSUMDB":    "*",
		"GONOSUMCHECK": "1",
		"GOPRIVATE":    "",
		"GONOPROXY":    "",
		"GOTOOLCHAIN":  "local",
	})
	run := func(t *testing.T, dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, &out)
		}
		return out.String()
	}

	t.Run("install commands", func(t *testing.T) {
		run(t, tmp, goBin, "install", rootPath+"/cmd/stormsim@"+v.Version)
		run(t, tmp, goBin, "install", rootPath+"/cmd/faultproxy@"+v.Version)
		policy := filepath.Join(tmp, "policies.yaml")
		if err := os.WriteFile(policy, []byte(checkPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
		out := run(t, tmp, filepath.Join(tmp, "bin", "stormsim"), "check", "--storms", "errors-50", "--max-amplification", "1.5", policy)
		if !strings.Contains(out, "PASS budgeted") {
			t.Errorf("stormsim check printed no PASS line for the budgeted policy:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(tmp, "bin", "faultproxy")); err != nil {
			t.Errorf("go install cmd/faultproxy@%s left no binary: %v", v.Version, err)
		}
		checkSameDeps(t, goBin, root, filepath.Join(tmp, "bin", "stormsim"))
		checkSameDeps(t, goBin, root, filepath.Join(tmp, "bin", "faultproxy"))
	})

	t.Run("scratch module", func(t *testing.T) {
		dir := filepath.Join(tmp, "scratch")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(scratchMain), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), []byte(checkPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, dir, goBin, "mod", "init", "example.com/scratch")
		args := []string{"get"}
		for _, p := range []string{"", "/promretry", "/otelretry", "/grpcretry", "/config", "/redisstore", "/simtest"} {
			args = append(args, rootPath+p+"@"+v.Version)
		}
		run(t, dir, goBin, args...)
		run(t, dir, goBin, "build", "-o", "scratch", ".")
		checkSameDeps(t, goBin, root, filepath.Join(dir, "scratch"))
		out := run(t, dir, filepath.Join(dir, "scratch"))
		for _, want := range []string{
			"retry: ok after 2 attempts",
			"promretry: collector made",
			"otelretry: observer made",
			"grpcretry: pushback 250ms true",
			"config: payments max_attempts 4",
			"redisstore: config refused",
			"simtest: exit 0",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("scratch program output lacks %q:\n%s", want, out)
			}
		}
	})

	// Each library module on its own, as the proxy serves it: its packages
	// build outside the workspace with only its own go.mod, and with the
	// third-party versions the workspace tests.
	t.Run("each module alone", func(t *testing.T) {
		for _, m := range released {
			if strings.HasPrefix(m.Dir, "cmd/") {
				continue // installed above
			}
			dir := filepath.Join(tmp, "alone", filepath.FromSlash(m.Dir))
			esc, err := module.EscapePath(m.Path)
			if err != nil {
				t.Fatal(err)
			}
			zipFile := filepath.Join(proxy, filepath.FromSlash(esc), "@v", v.Version+".zip")
			if err := modzip.Unzip(dir, module.Version{Path: m.Path, Version: v.Version}, zipFile); err != nil {
				t.Fatal(err)
			}
			run(t, dir, goBin, "build", "./...")
			out := run(t, dir, goBin, "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "./...")
			deps := map[string]string{}
			for _, line := range strings.Split(out, "\n") {
				if p, ver, ok := strings.Cut(strings.TrimSpace(line), " "); ok && !strings.HasPrefix(p, "go:") {
					deps[p] = ver
				}
			}
			compareWithWorkspace(t, goBin, root, m.Path, deps)
		}
	})
}

// TestWorkspaceResolvesSiblingsWithoutProxy: in a clone, go.work alone
// resolves every sibling, although each go.mod requires siblings at a
// release version the proxy may not have yet. With a fresh module cache and
// a proxy that serves only third-party modules (the local module cache), the
// workspace lists its module graph and loads every package of the root
// module with its tests; a sibling looked up on the proxy would fail.
// (GOFLAGS=-mod=mod is refused in workspace mode, so -mod=readonly: go.sum
// and go.work.sum must already hold every checksum.)
func TestWorkspaceResolvesSiblingsWithoutProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the workspace's module graph from a fresh module cache")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := repoRoot(t)
	cache := goEnv(t, goBin, "GOMODCACHE")
	tmp := t.TempDir()
	env := offlineEnv(map[string]string{
		"GOMODCACHE":  filepath.Join(tmp, "modcache"),
		"GOPATH":      filepath.Join(tmp, "gopath"),
		"GOWORK":      filepath.Join(root, "go.work"),
		"GOPROXY":     "file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOFLAGS":     "-mod=readonly -modcacherw",
		"GOSUMDB":     "off",
		"GOTOOLCHAIN": "local",
	})
	for _, args := range [][]string{
		{"mod", "graph"},
		{"list", "-deps", "-test", "./..."},
	} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = root
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go %s in the workspace, with no sibling on the proxy: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// checkSameDeps fails the test for each third-party module that the
// binary, built outside the workspace, was built with at another version
// than the one the workspace selects (and so tests). A user would build
// with a version no test ran, and the offline proxy (the local module
// cache, filled by the workspace's own builds) would not have its zip on a
// fresh machine: raise the require in the module that needs it.
func checkSameDeps(t *testing.T, goBin, root, binary string) {
	t.Helper()
	out, err := exec.Command(goBin, "version", "-m", binary).Output()
	if err != nil {
		t.Errorf("go version -m %s: %v", binary, err)
		return
	}
	deps := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			deps[f[1]] = f[2]
		}
	}
	compareWithWorkspace(t, goBin, root, filepath.Base(binary), deps)
}

// compareWithWorkspace fails the test for each third-party module of deps
// (module path to version) that the workspace selects at another version.
func compareWithWorkspace(t *testing.T, goBin, root, label string, deps map[string]string) {
	t.Helper()
	var paths []string
	for p := range deps {
		if p != rootPath && !strings.HasPrefix(p, rootPath+"/") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return
	}
	sort.Strings(paths)
	cmd := exec.Command(goBin, append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}, paths...)...)
	cmd.Dir = root
	cmd.Env = offlineEnv(map[string]string{"GOPROXY": "off", "GOFLAGS": "-mod=readonly", "GOWORK": filepath.Join(root, "go.work")})
	ws, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("go list -m in the workspace: %v\n%s", err, ws)
		return
	}
	t.Logf("%s: %d third-party modules, each at the workspace's version unless reported", label, len(paths))
	for _, line := range strings.Split(strings.TrimSpace(string(ws)), "\n") {
		p, wv, _ := strings.Cut(line, " ")
		if deps[p] != wv {
			t.Errorf("%s is built with %s %s, but the workspace tests %s: raise the require of the module that needs %s to %s", label, p, deps[p], wv, p, wv)
		}
	}
}

// goEnv returns `go env name` in the test's own environment.
func goEnv(t *testing.T, goBin, name string) string {
	t.Helper()
	out, err := exec.Command(goBin, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		t.Fatalf("go env %s is empty", name)
	}
	return v
}

// offlineEnv is the process environment with every variable in set
// replaced (GOENV=off too, so a user's go env -w settings cannot point the
// go command elsewhere).
func offlineEnv(set map[string]string) []string {
	set["GOENV"] = "off"
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// checkPolicy is simtest/testdata/budgeted.yaml's policy: it keeps every
// gate of `stormsim check --storms errors-50 --max-amplification 1.5`.
const checkPolicy = `policies:
  budgeted:
    max_attempts: 4
    attempt_timeout: 1s
    backoff: {strategy: full_jitter, base: 50ms, max: 2s}
    budget: {kind: ratio, preset: ten_percent}
`

// scratchMain is a user's program: it uses the root module and each of the
// library modules fetched at the release version.
const scratchMain = `package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/redisstore"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/simtest"
)

func main() {
	metrics := promretry.New(promretry.Config{})
	fmt.Println("promretry: collector made", metrics != nil)

	obs, err := otelretry.New(otelretry.Config{})
	if err != nil {
		panic(err)
	}
	fmt.Println("otelretry: observer made", obs != nil)

	attempts := 0
	policy := &retry.Policy{Operation: "scratch", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: metrics}
	v, err := retry.Do(context.Background(), policy, func(context.Context) (string, error) {
		attempts++
		if attempts == 1 {
			return "", errors.New("connection reset")
		}
		return "ok", nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("retry: %s after %d attempts\n", v, attempts)

	d, ok := grpcretry.ParsePushback([]string{"250"})
	fmt.Println("grpcretry: pushback", d, ok)

	if err := os.WriteFile("payments.yaml", []byte("policies:\n  payments:\n    max_attempts: 4\n    backoff: {strategy: full_jitter, base: 100ms, max: 5s}\n    budget: {kind: ratio, preset: ten_percent}\n"), 0o644); err != nil {
		panic(err)
	}
	reg, err := config.Open("payments.yaml", config.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("config: payments max_attempts", reg.Policy("payments").Policy().MaxAttempts)
	_ = reg.Close()

	err = redisstore.BreakerConfig{Name: "payments"}.Validate()
	fmt.Println("redisstore: config refused", err != nil)

	code := simtest.Main([]string{"--storms", "errors-50", "--max-amplification", "1.5", "policies.yaml"}, io.Discard, os.Stderr)
	fmt.Println("simtest: exit", code)
}
`
