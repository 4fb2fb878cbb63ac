package natsbridge

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The bridge's message headers. Every message an outgoing link sends
// carries its origin (one random ID per link) and the value's sequence
// number within that origin (1 for the first value the link took from its
// broadcaster, then one more per value taken, sent or not), so that an
// incoming link can tell a gap (values lost on the way) from silence. Both
// travel in one header, "<origin> <seq>": the origin's 32 hex digits, a
// space, the number in decimal. One header rather than two saves nats.go
// a map entry, a slice and a line on every message, on both sides: its
// header parsing (nats.DecodeHeadersMsg) takes 4 allocations instead of
// 5, and 650-1000 ns instead of 800-1250 in BENCH.md's 2026-12-07
// measurements; crossbench's hop-in-hdr (one header) used 0.95 of the CPU
// per value of hop-in-hdr2 (two), median of 5 rounds in one run.
const (
	// HeaderSeq carries a value's origin and sequence number: "<origin>
	// <seq>".
	HeaderSeq = "Herald-Seq"
	// HeaderBeat marks a heartbeat: no value, only the origin and its
	// latest sequence number, as HeaderSeq has them, sent while the origin
	// is quiet so that an In sees the loss of the last values before the
	// quiet within a bound. A value never carries it.
	HeaderBeat = "Herald-Beat"
)

// newOrigin returns a fresh origin ID.
func newOrigin() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documented contract)
	return hex.EncodeToString(b[:])
}

// appendOrigin appends HeaderSeq's value for value seq of origin to buf.
func appendOrigin(buf []byte, origin string, seq uint64) []byte {
	buf = append(buf, origin...)
	buf = append(buf, ' ')
	return strconv.AppendUint(buf, seq, 10)
}

// originValue returns HeaderSeq's value for value seq of origin.
func originValue(origin string, seq uint64) string {
	var b [64]byte
	return string(appendOrigin(b[:0], origin, seq))
}

// setOrigin writes the bridge's header for value seq of origin into h and
// removes a HeaderBeat, which a value never carries.
func setOrigin(h nats.Header, origin string, seq uint64) {
	h[HeaderSeq] = []string{originValue(origin, seq)}
	delete(h, HeaderBeat)
}

// origin reads the bridge's header: the origin and the sequence number of
// a value (HeaderSeq), or of a heartbeat (beat: HeaderBeat and no
// HeaderSeq). ok is false when neither is there or the one there is
// malformed (a foreign publisher's message).
func origin(h nats.Header) (id string, seq uint64, beat, ok bool) {
	vs := h[HeaderSeq]
	if len(vs) == 0 {
		if vs = h[HeaderBeat]; len(vs) == 0 {
			return "", 0, false, false
		}
		beat = true
	}
	id, seq, ok = parseOrigin(vs[0])
	return id, seq, beat && ok, ok
}

// parseOrigin parses HeaderSeq's (or HeaderBeat's) value "<origin> <seq>",
// with a decimal parser that does not allocate: In's hot path.
func parseOrigin(v string) (id string, seq uint64, ok bool) {
	i := strings.LastIndexByte(v, ' ')
	if i <= 0 {
		return "", 0, false
	}
	id, d := v[:i], v[i+1:]
	if len(d) == 0 || len(d) > 19 { // 19 digits never overflow a uint64
		n, err := strconv.ParseUint(d, 10, 64) // the general parser decides
		if err != nil || n == 0 {
			return "", 0, false
		}
		return id, n, true
	}
	for k := 0; k < len(d); k++ {
		c := d[k]
		if c < '0' || c > '9' {
			return "", 0, false
		}
		seq = seq*10 + uint64(c-'0')
	}
	if seq == 0 {
		return "", 0, false
	}
	return id, seq, true
}
