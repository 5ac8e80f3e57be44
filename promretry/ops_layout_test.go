package promretry_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDashboardPanelsDoNotOverlap: no two panels of the dashboard (rows
// included) share a grid cell, and none is wider than the 24-column
// grid, so Grafana shows the layout as written instead of pushing panels
// around.
func TestDashboardPanelsDoNotOverlap(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(opsDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			GridPos struct {
				X, Y, W, H int
			} `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	cells := map[[2]int]string{}
	for _, p := range dash.Panels {
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at (%d, %d)", p.Title, other, x, y)
					goto next
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
	next:
	}
}
