package metrics

import (
	"fmt"
	"reflect"

	"go.opentelemetry.io/otel/attribute"
)

// Link is what a [Collector] reads a natsbridge link's state from. Every
// *natsbridge.Link is one; the metrics module does not import natsbridge
// (nor nats.go), so a link is taken by its methods:
//
//	c.AddLink("orders/out", link) // link is a *natsbridge.Link
//
// Besides Err and Done, a link must have a method Stats() returning a
// struct; its uint64 fields Sent, Received, Failed, Dropped, Lost and
// Pending are exported, those the struct lacks have no series. Stats is
// found by reflection at [Collector.AddLink], since its result type lives
// in natsbridge.
type Link interface {
	Err() error            // nil while the link runs or after Close; why it stopped for good otherwise
	Done() <-chan struct{} // closed once the link stopped
}

const (
	labelLink = "link"
	attrLink  = "herald.link.name"
)

var linkLabels = []string{labelLink}

func linkFamily(name, unit, help string, counter bool) *family {
	prom := "herald_natsbridge_link_" + name
	if counter {
		prom += "_total"
	}
	return &family{prom, "herald.natsbridge.link." + name, unit, help, counter, linkLabels}
}

// linkFields lists natsbridge.LinkStats field by field, by name.
var linkFields = []struct {
	field string
	fam   *family
}{
	{"Sent", linkFamily("sent", "{value}", "Values the link sent to NATS (Out) or the stream acknowledged (OutStream).", true)},
	{"Received", linkFamily("received", "{value}", "Messages the link received and published on its broadcaster (In, InStream).", true)},
	{"Failed", linkFamily("failed", "{value}", "Values the link lost to encode, decode or transport errors.", true)},
	{"Dropped", linkFamily("dropped", "{message}", "Messages the NATS client dropped as a slow consumer.", true)},
	{"Lost", linkFamily("lost", "{value}", "Values of an origin that never arrived at this link (gaps in its sequence).", true)},
	{"Pending", linkFamily("pending", "{value}", "Values handed to NATS and not yet flushed or acknowledged.", false)},
}

var (
	famLinkUp = linkFamily("up", "{link}",
		"1 while the link runs, 0 once it stopped (Close, or for good).", false)
	famLinkEnded = linkFamily("ended", "{link}",
		"1 once the link stopped for good (its Err is not nil), else 0.", false)
)

func linkFamilies() []*family {
	fs := []*family{famLinkUp, famLinkEnded}
	for _, f := range linkFields {
		fs = append(fs, f.fam)
	}
	return fs
}

type linkEntry struct {
	name   string
	l      Link
	stats  reflect.Value // the bound Stats method
	fields []linkField   // the fields of its result that are exported
	attrs  attribute.Set
}

type linkField struct {
	index int
	fam   *family
}

// AddLink registers the link l under name, the value of its link label.
// An empty name, a nil l, an l without a Stats() method returning a struct,
// a known field of another type than uint64, or a name already added
// panics.
func (c *Collector) AddLink(name string, l Link) {
	if name == "" {
		panic("metrics: AddLink: the name must not be empty")
	}
	if l == nil {
		panic("metrics: AddLink: the link must not be nil")
	}
	m := reflect.ValueOf(l).MethodByName("Stats")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Struct {
		panic(fmt.Sprintf("metrics: AddLink: %T has no method Stats() returning a struct", l))
	}
	st := m.Type().Out(0)
	var fields []linkField
	for _, f := range linkFields {
		sf, ok := st.FieldByName(f.field)
		if !ok {
			continue
		}
		if sf.Type.Kind() != reflect.Uint64 {
			panic(fmt.Sprintf("metrics: AddLink: %s.%s is %s, not uint64", st, f.field, sf.Type))
		}
		fields = append(fields, linkField{sf.Index[0], f.fam})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.links[name]; ok {
		panic(fmt.Sprintf("metrics: AddLink: a link named %q was already added", name))
	}
	if c.links == nil {
		c.links = make(map[string]*linkEntry)
	}
	c.links[name] = &linkEntry{name, l, m, fields, attribute.NewSet(attribute.String(attrLink, name))}
}

// RemoveLink takes the link named name out of c. Removing a name not added
// does nothing.
func (c *Collector) RemoveLink(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.links, name)
}

// readLink reads one link's figures.
func readLink(e *linkEntry) []sample {
	labels := []string{e.name}
	up := int64(1)
	select {
	case <-e.l.Done():
		up = 0
	default:
	}
	ended := int64(0)
	if e.l.Err() != nil {
		ended = 1
	}
	s := []sample{{famLinkUp, labels, e.attrs, up}, {famLinkEnded, labels, e.attrs, ended}}
	v := e.stats.Call(nil)[0]
	for _, f := range e.fields {
		s = append(s, sample{f.fam, labels, e.attrs, clamp(v.Field(f.index).Uint())})
	}
	return s
}
