package promretry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestConfigReload(t *testing.T) {
	c := New(Config{})
	c.ConfigReload("aaaaaaaaaaaa", nil)
	c.ConfigReload("", errors.New("bad file"))
	c.ConfigReload("bbbbbbbbbbbb", nil)
	c.ConfigReload("", fmt.Errorf("reload: %w", watchErr{})) // config's watcher errors carry their label
	c.ConfigReload("", liar{})                               // an unknown label is not exported
	want := `
# HELP stormguard_config_info 1 for the version (content hash) of the policy file in force; join on it to split metrics by policy version.
# TYPE stormguard_config_info gauge
stormguard_config_info{version="bbbbbbbbbbbb"} 1
# HELP stormguard_config_reloads_total Policy files applied (result="success") or rejected (result="failure", the old policies serving on), and file watcher errors (result="watch_error", a reload from disk follows).
# TYPE stormguard_config_reloads_total counter
stormguard_config_reloads_total{result="failure"} 2
stormguard_config_reloads_total{result="success"} 2
stormguard_config_reloads_total{result="watch_error"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "stormguard_config_info", "stormguard_config_reloads_total"); err != nil {
		t.Fatal(err)
	}
	var nilC *Collector
	nilC.ConfigReload("x", nil) // a nil Collector does nothing
}

// watchErr stands for config's watcher error (this module does not
// import config): it names its result label.
type watchErr struct{}

func (watchErr) Error() string        { return "config: file watcher error: overflow" }
func (watchErr) ReloadResult() string { return "watch_error" }

type liar struct{}

func (liar) Error() string        { return "x" }
func (liar) ReloadResult() string { return "anything at all" }
