package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// point is one measurement of scripts/scaling.sh: a closed loop of `connections` connections
// through nginx to `instances` instances, in one mode (sync, async, or healthz: the trivial
// endpoint, the machine's limit).
type point struct {
	Sweep       string // "instances" or "connections": which axis the point belongs to
	Mode        string
	Instances   int
	Connections int
	OKPerSec    float64
	P99Ms       float64
}

// chartSeries are drawn in this order, with these colours and labels.
var chartSeries = []struct{ mode, colour, label string }{
	{"healthz", "#888888", "GET /healthz (machine limit)"},
	{"async", "#d95f02", "async orders (202)"},
	{"sync", "#1b9e77", "sync orders (201)"},
}

func runChart(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "run/scaling/points.csv", "the measurements (scripts/scaling.sh)")
	out := fs.String("out", "docs/loadtest-scaling.svg", "the SVG to write")
	title := fs.String("title", "", "a line under the chart's title (the machine, the date)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	defer f.Close()
	pts, err := readPoints(f)
	if err != nil {
		return fmt.Errorf("chart: %s: %w", *in, err)
	}
	svg, err := drawChart(pts, *title)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := os.WriteFile(*out, []byte(svg), 0o644); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Fprintf(stdout, "chart: %d points drawn into %s\n", len(pts), *out)
	return nil
}

// readPoints reads the CSV scaling.sh writes: a header, then
// sweep,mode,instances,connections,ok_per_sec,p99_ms per line.
func readPoints(r io.Reader) ([]point, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 {
		return nil, errors.New("no measurements")
	}
	var pts []point
	for i, row := range rows[1:] {
		if len(row) != 6 {
			return nil, fmt.Errorf("line %d: %d fields, want 6", i+2, len(row))
		}
		p := point{Sweep: row[0], Mode: row[1]}
		var errs [4]error
		p.Instances, errs[0] = strconv.Atoi(row[2])
		p.Connections, errs[1] = strconv.Atoi(row[3])
		p.OKPerSec, errs[2] = strconv.ParseFloat(row[4], 64)
		p.P99Ms, errs[3] = strconv.ParseFloat(row[5], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+2, err)
		}
		if p.Sweep != "instances" && p.Sweep != "connections" {
			return nil, fmt.Errorf("line %d: sweep %q: want instances or connections", i+2, p.Sweep)
		}
		pts = append(pts, p)
	}
	return pts, nil
}

// panel geometry
const (
	chartW, chartH   = 980, 720
	panelW, panelH   = 380, 230
	panelX0, panelX1 = 90, 580
	panelY0, panelY1 = 90, 400
)

// drawChart draws four panels: orders/s and p99 against instances (at the connection count
// of that sweep) and against connections (at its instance count), each mode a line, both y
// axes logarithmic (the modes differ by orders of magnitude).
func drawChart(pts []point, subtitle string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="17" font-weight="bold">seckill: how the cost grows (closed loop through nginx, every request a new user)</text>`+"\n", 20)
	if subtitle != "" {
		fmt.Fprintf(&b, `<text x="20" y="50" fill="#444">%s</text>`+"\n", xmlEscape(subtitle))
	}
	type panel struct {
		sweep, metric, ylabel string
		x, y                  int
	}
	panels := []panel{
		{"instances", "ok", "answers/s (2xx)", panelX0, panelY0},
		{"connections", "ok", "answers/s (2xx)", panelX1, panelY0},
		{"instances", "p99", "p99 latency, ms (all answers)", panelX0, panelY1},
		{"connections", "p99", "p99 latency, ms (all answers)", panelX1, panelY1},
	}
	for _, p := range panels {
		var sel []point
		for _, q := range pts {
			if q.Sweep == p.sweep {
				sel = append(sel, q)
			}
		}
		if len(sel) == 0 {
			return "", fmt.Errorf("no %s measurements", p.sweep)
		}
		drawPanel(&b, sel, p.sweep, p.metric, p.ylabel, p.x, p.y)
	}
	// legend
	for i, s := range chartSeries {
		x := 90 + i*280
		y := chartH - 24
		dash := ""
		if s.mode == "healthz" {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", x, y-4, x+30, y-4, s.colour, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+38, y, xmlEscape(s.label))
	}
	b.WriteString("</svg>\n")
	return b.String(), nil
}

func drawPanel(b *strings.Builder, pts []point, sweep, metric, ylabel string, x0, y0 int) {
	xval := func(p point) int {
		if sweep == "instances" {
			return p.Instances
		}
		return p.Connections
	}
	yval := func(p point) float64 {
		if metric == "ok" {
			return p.OKPerSec
		}
		return p.P99Ms
	}
	var xs []int
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		if !slices.Contains(xs, xval(p)) {
			xs = append(xs, xval(p))
		}
		if v := yval(p); v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	slices.Sort(xs)
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi == dlo {
		dhi++
	}
	px := func(i int) float64 {
		if len(xs) == 1 {
			return float64(x0) + panelW/2
		}
		return float64(x0) + float64(i)*panelW/float64(len(xs)-1)
	}
	py := func(v float64) float64 {
		return float64(y0+panelH) - (math.Log10(v)-dlo)/(dhi-dlo)*panelH
	}
	// frame, grid, ticks
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#000"/>`+"\n", x0, y0, panelW, panelH)
	for d := dlo; d <= dhi; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, strconv.FormatFloat(math.Pow(10, d), 'f', -1, 64))
	}
	for i, x := range xs {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", px(i), y0+panelH+16, x)
	}
	xlabel := "instances (" + fixedOf(pts, func(p point) int { return p.Connections }) + " connections)"
	if sweep == "connections" {
		xlabel = "connections (" + fixedOf(pts, func(p point) int { return p.Instances }) + " instances)"
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, y0+panelH+34, xmlEscape(xlabel))
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n", x0-58, y0+panelH/2, x0-58, y0+panelH/2, xmlEscape(ylabel))
	for _, s := range chartSeries {
		var path []string
		for i, x := range xs {
			for _, p := range pts {
				if p.Mode == s.mode && xval(p) == x && yval(p) > 0 {
					path = append(path, fmt.Sprintf("%.1f,%.1f", px(i), py(yval(p))))
					fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(i), py(yval(p)), s.colour)
				}
			}
		}
		if len(path) > 1 {
			dash := ""
			if s.mode == "healthz" {
				dash = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n", strings.Join(path, " "), s.colour, dash)
		}
	}
}

// fixedOf names the value the other axis was held at (or the values, if they differ).
func fixedOf(pts []point, f func(point) int) string {
	var vs []string
	for _, p := range pts {
		if v := strconv.Itoa(f(p)); !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return strings.Join(vs, ", ")
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
