package natsbridge

import "encoding/json"

// A Codec turns values into message payloads and back. Marshal and
// Unmarshal may be called from several links at once, so they must be safe
// for concurrent use. An error from either is counted in [LinkStats].Failed
// and the link goes on with the next value.
type Codec[T any] interface {
	Marshal(T) ([]byte, error)
	Unmarshal([]byte) (T, error)
}

// JSON returns a [Codec] that encodes values with encoding/json.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Marshal(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[T]) Unmarshal(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}
