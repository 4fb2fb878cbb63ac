package natsbridge

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
)

// Options are the settings of a link beyond its subject and codec, for
// [OutWith], [InWith], [OutStreamWith] and [InStreamWith]. The zero value
// is the default of every field, and what [Out], [In], [OutStream] and
// [InStream] use (Out and OutStream pass their broadcast options as
// Watch). A field a kind of link does not use is ignored by it; each field
// says which links read it.
//
// One struct rather than functional options: Out's variadic parameter is
// already broadcast.Option, and one struct per link keeps every setting an
// operator may turn in one place, as nats.Options does.
type Options[T any] struct {
	// Logger receives the link's reports (losses at Warn, rate-limited as
	// the package documentation says; its death at Error). Nil:
	// slog.Default() at the time of each line. All links.
	Logger *slog.Logger

	// Watch are the options of the link's watcher of its broadcaster
	// (policy, queue length). Out and OutStream.
	Watch []broadcast.Option

	// Headers, if set, is called for every value an outgoing link sends
	// (once it is encoded), with the message's headers: what it adds
	// travels with the value (a W3C traceparent, say). For Out the header
	// is fresh for each value and the bridge's own (HeaderSeq) is written
	// after the call, replacing any set under that name, and a HeaderBeat
	// the call set is removed (it marks heartbeats). Called from the
	// link's goroutine, one value at a time. Out and OutStream.
	Headers func(v T, h nats.Header)
	// FromHeaders, if set, is called for every value an incoming link
	// decodes, with the message's headers (nil for a foreign message
	// without any), before the value is published; its result is what is
	// published. Called from the link's goroutine, one message at a time.
	// In and InStream.
	FromHeaders func(h nats.Header, v T) T

	// AcceptForeign lets In and InStream take messages that do not carry
	// the bridge's headers (a publisher that is not an Out), decoded by the
	// codec; they are outside loss detection. By default such messages are
	// refused, counted in Failed and logged at Warn.
	AcceptForeign bool

	// QueueGroup, if set, makes In a member of that NATS queue group: each
	// message goes to one member of the group instead of to every In, so
	// work is shared rather than fanned out. Loss detection (Lost) is off
	// for a queue member, since it sees only part of each origin's values:
	// Lost stays 0 and heartbeats are ignored. In.
	QueueGroup string

	// MsgID, if set, gives each value's JetStream message ID (the
	// Nats-Msg-Id header), so that a value published again, by a restarted
	// process too, is stored once within the stream's duplicate window.
	// Nil: the link's origin and the value's sequence number. OutStream.
	MsgID func(v T) string
	// AckWait is how long OutStream waits for a value's acknowledgement
	// before publishing the unacknowledged values again; InStream's
	// consumer uses it as its AckWait. Zero: 5 s.
	AckWait time.Duration
	// Window is how many values OutStream has in flight (published, not yet
	// acknowledged), and InStream's consumer's MaxAckPending. Zero: 256.
	Window int
	// Durable, if set, names InStream's consumer: a durable consumer the
	// server keeps, so an InStream started again with the same name
	// resumes after the last value it acknowledged, whatever its from
	// argument. InStream.
	Durable string
}
