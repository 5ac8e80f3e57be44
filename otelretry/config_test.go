package otelretry_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stormguard/stormguard/otelretry"
)

// reloadObserver is the config package's ReloadObserver (this module does
// not import config).
type reloadObserver interface {
	ConfigReload(version string, err error)
}

// TestConfigReload is the regression test of issue 18 item 15 (config
// metrics): the Observer exports the config reloads and the version in
// force as the promretry module does.
func TestConfigReload(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	if _, ok := h.point(t, "stormguard.config.info"); ok {
		t.Error("config.info reported before any file was applied")
	}
	// The config package finds the method by this assertion.
	ro, ok := any(h.obs).(reloadObserver)
	if !ok {
		t.Fatal("the Observer is not a config.ReloadObserver")
	}
	ro.ConfigReload("aaaaaaaaaaaa", nil)
	ro.ConfigReload("", errors.New("bad file"))
	if got := h.value(t, "stormguard.config.info", attribute.String("version", "aaaaaaaaaaaa")); got != 1 {
		t.Errorf("config.info{aaaaaaaaaaaa} = %v, want 1 (a rejected file keeps the version)", got)
	}
	ro.ConfigReload("bbbbbbbbbbbb", nil)
	if got := h.value(t, "stormguard.config.info", attribute.String("version", "bbbbbbbbbbbb")); got != 1 {
		t.Errorf("config.info{bbbbbbbbbbbb} = %v, want 1", got)
	}
	if _, ok := h.point(t, "stormguard.config.info", attribute.String("version", "aaaaaaaaaaaa")); ok {
		t.Error("the previous version is still reported")
	}
	ro.ConfigReload("", watchErr{})
	for result, want := range map[string]float64{"success": 2, "failure": 1, "watch_error": 1} {
		if got := h.value(t, "stormguard.config.reloads", attribute.String("result", result)); got != want {
			t.Errorf("config.reloads{%s} = %v, want %v", result, got, want)
		}
	}
	var nilObs *otelretry.Observer
	any(nilObs).(reloadObserver).ConfigReload("x", nil) // a nil Observer does nothing
}

// watchErr stands for config's watcher error: it names its result label.
type watchErr struct{}

func (watchErr) Error() string        { return "config: file watcher error: overflow" }
func (watchErr) ReloadResult() string { return "watch_error" }
