package natsbridge

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"

	"github.com/nats-io/nats.go"
)

// The bridge's message headers. Every message an outgoing link sends
// carries its origin (one random ID per link) and the value's sequence
// number within that origin (1 for the first value the link took from its
// broadcaster, then one more per value taken, sent or not), so that an
// incoming link can tell a gap (values lost on the way) from silence.
const (
	HeaderOrigin = "Herald-Origin" // the sending link's ID: 32 hex digits
	HeaderSeq    = "Herald-Seq"    // the value's sequence number in its origin, decimal
	// HeaderBeat marks a heartbeat: no value, only the origin's latest
	// sequence number, sent while the origin is quiet so that an In sees
	// the loss of the last values before the quiet within a bound.
	HeaderBeat = "Herald-Beat"
)

// newOrigin returns a fresh origin ID.
func newOrigin() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documented contract)
	return hex.EncodeToString(b[:])
}

// setOrigin writes the bridge's headers for value seq of origin into h.
func setOrigin(h nats.Header, origin string, seq uint64) {
	h.Set(HeaderOrigin, origin)
	h.Set(HeaderSeq, strconv.FormatUint(seq, 10))
}

// origin reads the bridge's headers; ok is false when they are missing or
// malformed (a foreign publisher's message).
func origin(h nats.Header) (id string, seq uint64, ok bool) {
	id = h.Get(HeaderOrigin)
	if id == "" {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
	if err != nil || seq == 0 {
		return "", 0, false
	}
	return id, seq, true
}
