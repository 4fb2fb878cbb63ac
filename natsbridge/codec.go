package natsbridge

import (
	"encoding/json"
	"errors"
)

// A Codec turns values into message payloads and back. Marshal and
// Unmarshal may be called from several links at once, so they must be safe
// for concurrent use. An error from either is counted in [LinkStats].Failed
// and the link goes on with the next value.
type Codec[T any] interface {
	Marshal(T) ([]byte, error)
	Unmarshal([]byte) (T, error)
}

// JSON returns a [Codec] that encodes values with encoding/json.
//
// It refuses an empty payload and the JSON null, in both directions: no
// value is published in their place (encoding/json would leave a zero
// value). So a value that encodes as null (a nil pointer, slice or map) is
// counted in the sending link's Failed, and so is a received empty or null
// payload in the receiving link's.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

var (
	errJSONEmpty = errors.New("natsbridge: JSON: empty payload")
	errJSONNull  = errors.New("natsbridge: JSON: null payload: no value")
)

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Marshal(v T) ([]byte, error) {
	data, err := json.Marshal(v)
	if err == nil && isNull(data) {
		return nil, errJSONNull
	}
	return data, err
}

func (jsonCodec[T]) Unmarshal(data []byte) (T, error) {
	var v T
	// Fast path: a payload that starts with neither white space nor 'n'
	// is neither empty nor null.
	if len(data) == 0 || data[0] == 'n' || isJSONSpace(data[0]) {
		if len(trimJSONSpace(data)) == 0 {
			return v, errJSONEmpty
		}
		if isNull(data) {
			return v, errJSONNull
		}
	}
	err := json.Unmarshal(data, &v)
	return v, err
}

// isNull reports whether data is the JSON null, white space around it
// allowed.
func isNull(data []byte) bool {
	d := trimJSONSpace(data)
	return len(d) == 4 && string(d) == "null"
}

// trimJSONSpace trims JSON's white space (space, tab, CR, LF).
func trimJSONSpace(d []byte) []byte {
	for len(d) > 0 && isJSONSpace(d[0]) {
		d = d[1:]
	}
	for len(d) > 0 && isJSONSpace(d[len(d)-1]) {
		d = d[:len(d)-1]
	}
	return d
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
