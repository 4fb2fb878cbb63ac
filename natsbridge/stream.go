package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Tuning of OutStream and InStream.
const (
	// defaultWindow is Options.Window's default.
	defaultWindow = 256
	// retryMax bounds the pause before a republish, and between two
	// look-ups of a deleted stream.
	retryMax = 2 * time.Second
	// lookupTimeout bounds the stream look-up of OutStream and InStream.
	lookupTimeout = 10 * time.Second
	// pullHeartbeat is the idle heartbeat InStream's pulls ask for (an
	// ordered consumer's default in nats.go; a durable one's would be
	// 15 s): two missed make nats.go report it, and the link then looks
	// its durable consumer up, so that one deleted before the server
	// could tell the client is seen within about 10 s.
	pullHeartbeat = 5 * time.Second
)

// Variables only so that a test can make republishing frequent.
var (
	// ackWait is Options.AckWait's default: how long OutStream waits for a
	// value's ack before it publishes the unacknowledged values again
	// (same message IDs), and InStream's durable consumer's AckWait.
	ackWait = 5 * time.Second
	// ackWaitMax bounds the wait for an ack after timeouts (see ack).
	ackWaitMax = 5 * time.Second
	// retryMin is the first pause before a republish.
	retryMin = 50 * time.Millisecond
)

// checkStream looks stream up and checks that subject is one of its
// subjects (literal) or overlaps them (a filter). It returns the stream's
// creation time, which tells a stream deleted and created again from the
// one the link started on.
func checkStream(ctx context.Context, js jetstream.JetStream, stream, subject string, literal bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}, fmt.Errorf("stream %q: %w", stream, err)
	}
	info := s.CachedInfo()
	for _, p := range info.Config.Subjects {
		if subjectsOverlap(p, subject) && (!literal || subjectMatches(p, subject)) {
			return info.Created, nil
		}
	}
	return time.Time{}, fmt.Errorf("stream %q does not take subject %q (its subjects: %v)", stream, subject, info.Config.Subjects)
}

// A verdict is what a failed publish to a stream means for the value.
type verdict int

const (
	retry      verdict = iota // may pass: publish again
	full                      // the stream is full (limits with DiscardNew)
	tooLarge                  // over max_payload or the stream's max_msg_size
	rejected                  // refused for good for another reason
	streamGone                // no stream takes the subject: look the stream up
	connGone                  // the connection is closed for good
)

// The JetStream API error codes the verdict reads (nats-server's
// errors.json).
const (
	codeStoreFailed    = 10077 // JSStreamStoreFailedF, 503: "{err}" of the store
	codeMsgTooLarge    = 10054 // JSStreamMessageExceedsMaximumErr, 400
	codeStreamNotFound = 10059 // JSStreamNotFoundErr, 404
	codeStreamNotMatch = 10060 // JSStreamNotMatchErr, 400: WithExpectStream failed
)

// judge classifies err, the failure of one publish to a stream.
func judge(err error) verdict {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return tooLarge
	case errors.Is(err, nats.ErrConnectionClosed):
		return connGone
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrInvalidMsg):
		return rejected
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		// No stream listens on the subject: deleted, or JetStream is not
		// ready yet after a restart. The caller looks the stream up.
		return streamGone
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case codeMsgTooLarge:
			return tooLarge
		case codeStreamNotFound, codeStreamNotMatch:
			return streamGone
		case codeStoreFailed:
			// The store's own error: server/store.go's ErrMaxMsgs,
			// ErrMaxBytes, ErrMaxMsgsPerSubject (a full stream under
			// DiscardNew), ErrMsgTooLarge; else transient ("store is
			// closed" while the server stops).
			d := apiErr.Description
			switch {
			case strings.Contains(d, "maximum messages"), strings.Contains(d, "maximum bytes"):
				return full
			case strings.Contains(d, "too large"):
				return tooLarge
			}
			return retry
		}
		if apiErr.Code == 503 || apiErr.Code == 429 || apiErr.Code == 408 {
			return retry // not ready, too many requests, timeout
		}
		return rejected
	}
	// Disconnected, ack timeout, reconnect buffer full, too many in flight
	// on the shared JetStream context.
	return retry
}

// stopGrace bounds how long InStream's Close, once its ctx ended and the
// consumer was stopped, waits for the consumer's goroutine to exit.
const stopGrace = 100 * time.Millisecond
