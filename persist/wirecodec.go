package persist

import "errors"

// This file is the single place where persist meets the wire codec. Until the codec
// package is available, values other than the built-in kinds are rejected with
// ErrUnsupportedValue.

var errNoCodec = errors.New("no codec for this type")

// wireTensor reports whether v is one of the codec's tensor types and returns it as a
// Tensor.
func wireTensor(v any) (Tensor, bool) { return Tensor{}, false }

// wireMarshal encodes v with the codec.
func wireMarshal(v any) ([]byte, error) { return nil, errNoCodec }

// wireDecode decodes codec bytes back to the value that was put.
func wireDecode(b []byte) (any, error) { return nil, errNoCodec }
