package live

import (
	"strings"
	"testing"
	"time"
)

// `live gateway-restart --clients 200` used to be titled "500 agents".
func TestLiveTitlesFollowTheScenarioAsRun(t *testing.T) {
	sc := GatewayRestart()
	sc.Clients = 200
	if r := newReport(&sc, Options{}); !strings.Contains(r.Title, "200 agents") || !strings.Contains(r.Title, "503s for 3s") {
		t.Errorf("title %q", r.Title)
	}
	sc.Duration = 6 * time.Second
	if r := newReport(&sc, Options{}); !strings.Contains(r.Title, "for 1s (cut from 3s by the 6s run)") {
		t.Errorf("title %q", r.Title)
	}
	sd := SlowDownstream()
	sd.Clients = 30
	if r := newReport(&sd, Options{}); !strings.Contains(r.Title, "30 clients") || !strings.Contains(r.Title, "for 4s") {
		t.Errorf("title %q", r.Title)
	}
}
