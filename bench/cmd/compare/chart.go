package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var chartWatchers = []int{1, 10, 100, 1000}

// fanoutChart draws workload 1: median ns per published event against the
// watcher count, both axes logarithmic, one line per system and read style.
func fanoutChart(res *results, path string) error {
	p := plot.New()
	p.Title.Text = "Lossless fan-out, queue 1000: time per published event until every watcher has it\n(median of the runs; lower is better)"
	p.X.Label.Text = "watchers, each draining in its own goroutine"
	p.Y.Label.Text = "time per published event"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(watcherTicks())
	p.Y.Tick.Marker = plot.TickerFunc(durationTicks)
	p.X.Padding, p.Y.Padding = vg.Points(8), vg.Points(8)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(12), -vg.Points(34)
	p.Add(plotter.NewGrid())

	lines := []struct {
		sys, label string
		color      color.Color
		dashes     []vg.Length
		shape      draw.GlyphDrawer
	}{
		{"k8s", "k8s watch.Broadcaster (ResultChan)", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil, draw.SquareGlyph{}},
		{"herald-C", "herald broadcast, C()", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil, draw.CircleGlyph{}},
		{"herald-All", "herald broadcast, All()", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, []vg.Length{vg.Points(5), vg.Points(3)}, draw.TriangleGlyph{}},
		// The peer libraries (BenchmarkPeerFanout), dotted.
		{"Peer:chan", "a buffered channel per subscriber", color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(2)}, draw.PlusGlyph{}},
		{"Peer:cskr-pubsub", "cskr/pubsub v2", color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(2)}, draw.CrossGlyph{}},
		{"Peer:moby-pubsub", "moby/pubsub", color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(2)}, draw.RingGlyph{}},
		{"Peer:eventbus", "tailscale eventbus", color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(2)}, draw.PyramidGlyph{}},
		{"Peer:watermill", "watermill gochannel (ack mode)", color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(2)}, draw.BoxGlyph{}},
	}
	drawn := 0
	for _, l := range lines {
		var pts plotter.XYs
		for _, n := range chartWatchers {
			key := fmt.Sprintf("Fanout/%s/watchers=%d", l.sys, n)
			if p, ok := strings.CutPrefix(l.sys, "Peer:"); ok {
				key = fmt.Sprintf("PeerFanout/%s/watchers=%d", p, n)
			}
			if v, ok := res.median(key, "ns/op"); ok && v > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width, line.Dashes = l.color, vg.Points(1.5), l.dashes
		points.Color, points.Shape, points.Radius = l.color, l.shape, vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(l.label, line, points)
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("no fan-out results to draw")
	}
	// Decade boundaries at both ends, so that the axis is labeled at both.
	// The legend sits top left, where lines that rise with the watcher
	// count leave room.
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(p.Y.Max)))
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// durationTicks labels each decade of nanoseconds as a duration; the
// values between are unlabeled minor ticks.
func durationTicks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for d := math.Pow(10, math.Floor(math.Log10(min))); d <= max; d *= 10 {
		ts = append(ts, plot.Tick{Value: d, Label: durationLabel(d)})
		for k := 2.0; k < 10; k++ {
			if v := d * k; v >= min && v <= max {
				ts = append(ts, plot.Tick{Value: v})
			}
		}
	}
	return ts
}

func durationLabel(ns float64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%g ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%g µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%g ms", ns/1e6)
	default:
		return fmt.Sprintf("%g s", ns/1e9)
	}
}

func watcherTicks() []plot.Tick {
	var ts []plot.Tick
	for _, n := range chartWatchers {
		ts = append(ts, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	return ts
}
