package console

import (
	"strconv"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The chart is an SVG drawn on the server: 24 hours, one column each, in
// two panels with their own scales: reserves accepted and duplicate above,
// failures and unknown outcomes below, so 20 failures among 460,000
// accepted reserves are bars, not a pixel. Its geometry is computed here
// and the template only writes numbers, so nothing from the store reaches
// the SVG but counts.
const (
	chartWidth  = 720
	chartLeft   = 64 // room for the scale ("460k" at the phone's font size)
	chartRight  = 24 // room for the last hour's label
	chartTop    = 26 // room for the upper panel's name
	chartUpper  = 140
	chartGap    = 44 // between the panels: the lower one's name
	chartLower  = 64
	chartBottom = 30 // room for the hours
	chartHeight = chartTop + chartUpper + chartGap + chartLower + chartBottom
	chartHours  = 24
)

type chart struct {
	Width, Height int
	Left, GridEnd int
	Panels        []panel
	Bars          []bar // one per hour, its parts in both panels
	Labels        []hourLabel
	Hours         []keystore.HourActivity // the same data, as a table
	Total         int
}

// panel is one scale: its name, where its baseline is and its ticks.
type panel struct {
	Name     string
	NameY    float64
	Baseline float64
	Ticks    []tick
}

type bar struct {
	Title string // for the tooltip: the hour and its counts
	Parts []barPart
}

type barPart struct {
	Class      string
	X, Y, W, H float64
}

type tick struct {
	Y     float64
	Value string
}

// hourLabel is written in UTC; console.js rewrites it in the reader's
// time zone from At (RFC 3339).
type hourLabel struct {
	X        float64
	Text, At string
}

type series struct {
	class string
	count func(keystore.HourActivity) int
}

// drawChart lays out the 24 hours ending with now's hour; hours the store
// has no entry for are zero.
func drawChart(hours []keystore.HourActivity, now time.Time) *chart {
	last := now.UTC().Truncate(time.Hour)
	first := last.Add(-(chartHours - 1) * time.Hour)
	byHour := make(map[int64]keystore.HourActivity, len(hours))
	for _, h := range hours {
		byHour[h.Hour.UTC().Unix()] = h
	}
	ch := &chart{Width: chartWidth, Height: chartHeight, Left: chartLeft, GridEnd: chartWidth - chartRight}
	data := make([]keystore.HourActivity, chartHours)
	for i := range data {
		at := first.Add(time.Duration(i) * time.Hour)
		h := byHour[at.Unix()]
		h.Hour = at
		data[i] = h
		ch.Total += h.Accepted + h.Duplicate + h.Failed + h.Unknown
	}
	ch.Hours = data
	slot := float64(chartWidth-chartLeft-chartRight) / chartHours
	for i, h := range data {
		x := float64(chartLeft) + float64(i)*slot + slot*0.15
		ch.Bars = append(ch.Bars, bar{Title: h.Hour.Format("15:04") + " UTC: " + itoa(h.Accepted) + " accepted, " + itoa(h.Duplicate) +
			" duplicate, " + itoa(h.Failed) + " failed, " + itoa(h.Unknown) + " unknown"})
		if i%6 == 0 || i == chartHours-1 {
			ch.Labels = append(ch.Labels, hourLabel{X: round1(x + slot*0.35), Text: h.Hour.Format("15:04"), At: h.Hour.Format(time.RFC3339)})
		}
	}
	upper := float64(chartTop + chartUpper)
	lower := upper + chartGap + chartLower
	ch.Panels = []panel{
		ch.stack(data, "Reserves: accepted, duplicate", upper, chartUpper, slot,
			series{"accepted", func(h keystore.HourActivity) int { return h.Accepted }},
			series{"duplicate", func(h keystore.HourActivity) int { return h.Duplicate }}),
		ch.stack(data, "Failed and unknown outcomes (own scale)", lower, chartLower, slot,
			series{"failed", func(h keystore.HourActivity) int { return h.Failed }},
			series{"unknown", func(h keystore.HourActivity) int { return h.Unknown }}),
	}
	return ch
}

// stack draws the series as stacked bars standing on baseline, scaled so
// the largest hour reaches height, and returns the panel with its ticks.
func (ch *chart) stack(data []keystore.HourActivity, name string, baseline, height, slot float64, ss ...series) panel {
	top := 0
	for _, h := range data {
		n := 0
		for _, s := range ss {
			n += s.count(h)
		}
		top = max(top, n)
	}
	scale := niceCeil(top)
	for i, h := range data {
		x := float64(chartLeft) + float64(i)*slot + slot*0.15
		y := baseline
		for _, s := range ss {
			n := s.count(h)
			if n == 0 {
				continue
			}
			ph := height * float64(n) / float64(scale)
			y -= ph
			ch.Bars[i].Parts = append(ch.Bars[i].Parts, barPart{Class: s.class, X: round1(x), Y: round1(y), W: round1(slot * 0.7), H: round1(ph)})
		}
	}
	p := panel{Name: name, NameY: baseline - height - 10, Baseline: baseline}
	for _, v := range []int{0, scale / 2, scale} {
		p.Ticks = append(p.Ticks, tick{Value: short(v), Y: round1(baseline - height*float64(v)/float64(scale))})
	}
	return p
}

// niceCeil rounds n up to 2, 4, 10, 20, 40, 100, …: a scale whose half is
// a whole number.
func niceCeil(n int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{2, 4, 10} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

// short writes a scale's number in at most four characters: 460000 is
// "460k", 1200000 "1.2M".
func short(n int) string {
	switch {
	case n >= 1_000_000_000:
		return shortUnit(n, 1_000_000_000, "G")
	case n >= 1_000_000:
		return shortUnit(n, 1_000_000, "M")
	case n >= 10_000:
		return shortUnit(n, 1_000, "k")
	}
	return strconv.Itoa(n)
}

func shortUnit(n, unit int, suffix string) string {
	if n%unit == 0 || n >= 10*unit {
		return strconv.Itoa(n/unit) + suffix
	}
	return strconv.FormatFloat(float64(n)/float64(unit), 'f', 1, 64) + suffix
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

func itoa(n int) string { return strconv.Itoa(n) }
