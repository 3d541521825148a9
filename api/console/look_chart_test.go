package console

import (
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// 20 failures in an hour of 460,000 accepted reserves are bars you see:
// failures have their own scale, and the scale's numbers fit the margin.
func TestLookChartFailuresOnTheirOwnScale(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC)
	hours := []keystore.HourActivity{
		{Hour: now.Truncate(time.Hour), Accepted: 460_000, Duplicate: 1_200, Failed: 20, Unknown: 3},
		{Hour: now.Truncate(time.Hour).Add(-time.Hour), Accepted: 455_000, Failed: 1},
	}
	ch := drawChart(hours, now)
	heights := map[string]float64{}
	for _, p := range ch.Bars[len(ch.Bars)-1].Parts {
		if h, seen := heights[p.Class]; !seen || p.H < h {
			heights[p.Class] = p.H // the smallest, if a series were drawn twice
		}
	}
	// The SVG is 720 units wide and drawn about 360 px wide on a phone:
	// 16 units are 8 px there.
	if heights["failed"] < 16 {
		t.Errorf("20 failures among 460k accepted are %v units high, want at least 16 (8 px on a phone)", heights["failed"])
	}
	if heights["accepted"] < chartUpper*0.4 {
		t.Errorf("460k accepted are %v units high", heights["accepted"])
	}
	if heights["unknown"] == 0 {
		t.Error("3 unknown outcomes are not drawn")
	}
	var values []string
	for _, p := range ch.Panels {
		for _, tk := range p.Ticks {
			values = append(values, tk.Value)
			// At the phone's 22 units a digit is about 13 units wide.
			if w := 13 * len(tk.Value); w > chartLeft-8 {
				t.Errorf("scale value %q is %d units wide, the margin %d", tk.Value, w, chartLeft-8)
			}
		}
	}
	if want := []string{"0", "500k", "1M", "0", "20", "40"}; !slices.Equal(values, want) {
		t.Errorf("scales %q, want %q", values, want)
	}
}

func TestLookShortNumbers(t *testing.T) {
	for n, want := range map[int]string{0: "0", 20: "20", 9_999: "9999", 10_000: "10k", 460_000: "460k", 500_000: "500k",
		1_000_000: "1M", 1_200_000: "1.2M", 2_000_000: "2M", 40_000_000: "40M", 4_000_000_000: "4G"} {
		if got := short(n); got != want {
			t.Errorf("short(%d) = %q, want %q", n, got, want)
		}
	}
}
