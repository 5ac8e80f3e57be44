package prometheus

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestConfigReload(t *testing.T) {
	c := New(Config{})
	c.ConfigReload("aaaaaaaaaaaa", nil)
	c.ConfigReload("", errors.New("bad file"))
	c.ConfigReload("bbbbbbbbbbbb", nil)
	want := `
# HELP stormguard_config_info 1 for the version (content hash) of the policy file in force; join on it to split metrics by policy version.
# TYPE stormguard_config_info gauge
stormguard_config_info{version="bbbbbbbbbbbb"} 1
# HELP stormguard_config_reloads_total Policy files applied (result="success") or rejected (result="failure"), the old policies serving on.
# TYPE stormguard_config_reloads_total counter
stormguard_config_reloads_total{result="failure"} 1
stormguard_config_reloads_total{result="success"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "stormguard_config_info", "stormguard_config_reloads_total"); err != nil {
		t.Fatal(err)
	}
	var nilC *Collector
	nilC.ConfigReload("x", nil) // a nil Collector does nothing
}
