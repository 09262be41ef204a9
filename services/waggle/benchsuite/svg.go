package benchsuite

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// SVG plots the added inter-token delay (p50 and p99) against the number
// of open streams, on a log-scaled x axis. It returns "" without points.
func (r *Report) SVG() string {
	var pts []CurvePoint
	for _, p := range r.Curve {
		if p.Open > 0 {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		return ""
	}
	const (
		w, h                   = 640.0, 400.0
		left, right, top, bott = 70.0, 20.0, 40.0, 60.0
	)
	maxX := 1.0
	var maxY time.Duration
	for _, p := range pts {
		maxX = math.Max(maxX, float64(p.Open))
		maxY = max(maxY, p.AddedP99, p.AddedP50)
	}
	yTop := niceCeil(float64(maxY) / float64(time.Millisecond))
	decades := math.Max(1, math.Ceil(math.Log10(maxX)))
	x := func(n int) float64 {
		return left + (w-left-right)*math.Log10(math.Max(float64(n), 1))/decades
	}
	y := func(d time.Duration) float64 {
		return h - bott - (h-top-bott)*(float64(d)/float64(time.Millisecond))/yTop
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" text-anchor="middle" font-size="14">Inter-token delay added by the server (%s mode) against open streams</text>`+"\n", w/2, pts[0].Mode)
	// Axes, grid and ticks.
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, h-bott, w-right, h-bott)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, h-bott)
	for d := 0; d <= int(decades); d++ {
		n := int(math.Pow10(d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x(n), top, x(n), h-bott)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(n), h-bott+18, n)
	}
	for i := 0; i <= 4; i++ {
		v := yTop * float64(i) / 4
		yy := y(time.Duration(v * float64(time.Millisecond)))
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, w-right, yy)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">open streams (log scale)</text>`+"\n", (left+w-right)/2, h-16)
	fmt.Fprintf(&b, `<text x="16" y="%.0f" text-anchor="middle" transform="rotate(-90 16 %.0f)">added delay (ms)</text>`+"\n", (top+h-bott)/2, (top+h-bott)/2)
	series := []struct {
		name, color string
		get         func(CurvePoint) time.Duration
	}{
		{"p50", "#1f77b4", func(p CurvePoint) time.Duration { return p.AddedP50 }},
		{"p99", "#d62728", func(p CurvePoint) time.Duration { return p.AddedP99 }},
	}
	for i, s := range series {
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Open), y(s.get(p))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(path, " "))
		for _, p := range pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%d streams: %s</title></circle>`+"\n", x(p.Open), y(s.get(p)), s.color, p.Open, ms(s.get(p)))
		}
		ly := top + 10 + float64(i)*16
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+12, ly, left+32, ly, s.color, left+38, ly+4, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 0.1).
func niceCeil(v float64) float64 {
	if v <= 0.1 {
		return 0.1
	}
	p := math.Pow10(int(math.Floor(math.Log10(v))))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
