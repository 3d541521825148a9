package console

import (
	"strconv"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The chart is an SVG drawn on the server: 24 stacked bars, one per hour,
// of accepted / duplicate / failed / unknown. Its geometry is computed here
// and the template only writes numbers, so nothing from the store reaches
// the SVG but counts.
const (
	chartWidth  = 720
	chartHeight = 220
	chartLeft   = 44 // room for the scale
	chartRight  = 24 // room for the last hour's label
	chartBottom = 24 // room for the hours
	chartTop    = 10
	chartHours  = 24
)

type chart struct {
	Width, Height int
	Bars          []bar
	Ticks         []tick // the y scale
	Labels        []hourLabel
	Hours         []keystore.HourActivity // the same data, as a table
	Total         int
	Baseline      int
	GridEnd       int
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
	Value int
}

type hourLabel struct {
	X    float64
	Text string
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
	ch := &chart{Width: chartWidth, Height: chartHeight, Baseline: chartHeight - chartBottom, GridEnd: chartWidth - chartRight}
	series := make([]keystore.HourActivity, chartHours)
	top := 0
	for i := range series {
		at := first.Add(time.Duration(i) * time.Hour)
		h := byHour[at.Unix()]
		h.Hour = at
		series[i] = h
		n := h.Accepted + h.Duplicate + h.Failed + h.Unknown
		top = max(top, n)
		ch.Total += n
	}
	ch.Hours = series
	scale := niceCeil(top)
	plotH := float64(chartHeight - chartBottom - chartTop)
	slot := float64(chartWidth-chartLeft-chartRight) / chartHours
	for i, h := range series {
		x := float64(chartLeft) + float64(i)*slot + slot*0.15
		w := slot * 0.7
		y := float64(ch.Baseline)
		b := bar{Title: h.Hour.Format("15:04") + " UTC: " + itoa(h.Accepted) + " accepted, " + itoa(h.Duplicate) +
			" duplicate, " + itoa(h.Failed) + " failed, " + itoa(h.Unknown) + " unknown"}
		for _, part := range []struct {
			class string
			n     int
		}{{"accepted", h.Accepted}, {"duplicate", h.Duplicate}, {"failed", h.Failed}, {"unknown", h.Unknown}} {
			if part.n == 0 {
				continue
			}
			ph := plotH * float64(part.n) / float64(scale)
			y -= ph
			b.Parts = append(b.Parts, barPart{Class: part.class, X: round1(x), Y: round1(y), W: round1(w), H: round1(ph)})
		}
		ch.Bars = append(ch.Bars, b)
		if i%6 == 0 || i == chartHours-1 {
			ch.Labels = append(ch.Labels, hourLabel{X: round1(x + w/2), Text: h.Hour.Format("15:04")})
		}
	}
	for _, v := range []int{0, scale / 2, scale} {
		ch.Ticks = append(ch.Ticks, tick{Value: v, Y: round1(float64(ch.Baseline) - plotH*float64(v)/float64(scale))})
	}
	return ch
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

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

func itoa(n int) string { return strconv.Itoa(n) }
