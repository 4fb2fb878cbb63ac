package metrics_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
)

// fakeLinkStats has natsbridge.LinkStats's fields (API.md, "Next").
type fakeLinkStats struct {
	Sent, Received, Failed, Dropped uint64
	Lost, Pending                   uint64
}

// fakeLink is shaped as a *natsbridge.Link: Stats, Err, Done.
type fakeLink struct {
	st   fakeLinkStats
	err  error
	done chan struct{}
}

func (f *fakeLink) Stats() fakeLinkStats  { return f.st }
func (f *fakeLink) Err() error            { return f.err }
func (f *fakeLink) Done() <-chan struct{} { return f.done }

// oldLink has the LinkStats of today's natsbridge: no Lost, no Pending.
type oldStats struct{ Sent, Received, Failed, Dropped uint64 }
type oldLink struct{ fakeLink }

func (o *oldLink) Stats() oldStats { return oldStats{Sent: 4} }

func TestLinks(t *testing.T) {
	c := metrics.NewCollector()
	up := &fakeLink{st: fakeLinkStats{1, 2, 3, 4, 5, 6}, done: make(chan struct{})}
	failed := &fakeLink{err: errors.New("nats: connection closed"), done: make(chan struct{})}
	close(failed.done)
	closed := &fakeLink{done: make(chan struct{})}
	close(closed.done)
	c.AddLink("up", up)
	c.AddLink("failed", failed)
	c.AddLink("closed", closed)
	c.AddLink("old", &oldLink{fakeLink{done: make(chan struct{})}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]*dto.MetricFamily)
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	want := map[string]float64{
		`herald_natsbridge_link_up{link="up"}`: 1, `herald_natsbridge_link_up{link="failed"}`: 0,
		`herald_natsbridge_link_up{link="closed"}`: 0, `herald_natsbridge_link_up{link="old"}`: 1,
		`herald_natsbridge_link_ended{link="up"}`: 0, `herald_natsbridge_link_ended{link="failed"}`: 1,
		`herald_natsbridge_link_ended{link="closed"}`: 0, `herald_natsbridge_link_ended{link="old"}`: 0,
		`herald_natsbridge_link_sent_total{link="old"}`:     4,
		`herald_natsbridge_link_received_total{link="old"}`: 0,
		`herald_natsbridge_link_failed_total{link="old"}`:   0,
		`herald_natsbridge_link_dropped_total{link="old"}`:  0,
	}
	for i, f := range []string{"sent_total", "received_total", "failed_total", "dropped_total", "lost_total", "pending"} {
		want[fmt.Sprintf(`herald_natsbridge_link_%s{link="up"}`, f)] = float64(i + 1)
		want[fmt.Sprintf(`herald_natsbridge_link_%s{link="failed"}`, f)] = 0
		want[fmt.Sprintf(`herald_natsbridge_link_%s{link="closed"}`, f)] = 0
	}
	if diff := cmp.Diff(want, flatten(byName)); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}

	r, p := otelReader(t)
	if _, err := c.RegisterOTel(p.Meter(scope)); err != nil {
		t.Fatal(err)
	}
	rm, err := collect(t, r)
	if err != nil {
		t.Fatal(err)
	}
	a := attribute.NewSet(attribute.String("herald.link.name", "up"))
	if got := valueOf(t, rm, "herald.natsbridge.link.pending", a); got != 6 {
		t.Errorf("otel pending = %d, want 6", got)
	}
	fa := attribute.NewSet(attribute.String("herald.link.name", "failed"))
	if got := valueOf(t, rm, "herald.natsbridge.link.ended", fa); got != 1 {
		t.Errorf("otel ended = %d, want 1", got)
	}

	c.RemoveLink("up")
	c.RemoveLink("failed")
	c.RemoveLink("closed")
	c.RemoveLink("old")
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("after RemoveLink, %d families remain", len(mfs))
	}
}

type noStats struct{}

func (*noStats) Err() error            { return nil }
func (*noStats) Done() <-chan struct{} { return nil }

type badStats struct{ fakeLink }

func (*badStats) Stats() struct{ Sent int } { return struct{ Sent int }{} }

func TestAddLinkPanics(t *testing.T) {
	c := metrics.NewCollector()
	c.AddLink("a", &fakeLink{done: make(chan struct{})})
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"empty", func() { c.AddLink("", &fakeLink{}) }, "metrics: AddLink: the name must not be empty"},
		{"nil", func() { c.AddLink("b", nil) }, "metrics: AddLink: the link must not be nil"},
		{"no Stats", func() { c.AddLink("b", &noStats{}) }, "metrics: AddLink: *metrics_test.noStats has no method Stats() returning a struct"},
		{"bad field", func() { c.AddLink("b", &badStats{}) }, "metrics: AddLink: struct { Sent int }.Sent is int, not uint64"},
		{"twice", func() { c.AddLink("a", &fakeLink{}) }, `metrics: AddLink: a link named "a" was already added`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tc.want {
					t.Errorf("panic = %q, want %q", got, tc.want)
				}
			}()
			tc.f()
		})
	}
}
