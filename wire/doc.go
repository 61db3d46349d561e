// Package wire is the msgpack codec for every Lakeshore payload, result and frame value.
//
// Values cross processes and languages as standard msgpack: strings as str, bytes as bin,
// maps with string keys, plus six extension types:
//
//	code  Go type    payload (itself msgpack)
//	 -1   time.Time  the standard msgpack timestamp (32-, 64- or 96-bit form)
//	  1   NDArray    [dtype str, shape [int…], data bin]   C order, little endian
//	  2   Tensor     [dtype str, shape [int…], data bin]   same layout as 1
//	  3   Image      [format str, data bin]                 e.g. "png", "jpeg"
//	  4   Tuple      [values…]                              decodes to a Tuple, not a list
//	  5   Thunk      [language str, data bin]               opaque code by value
//
// docs/wire.md specifies the format for other clients; testdata/golden holds byte vectors
// (with index.json saying what each one means) that every client can check itself against.
//
// # Encoding and decoding
//
// Marshal (and Append) encode a Go value; Decode returns the generic form (nil, bool, int64,
// uint64, float32, float64, string, []byte, []any, map[string]any and the extension types);
// Unmarshal fills a Go value through a pointer, structs included (`msgpack` or `json` tags).
// Output is deterministic: smallest integer forms, sorted map keys. Decoding never panics:
// lengths are checked against the remaining input before anything is allocated, nesting is
// capped at MaxDepth, and each failure is an *DecodeError saying where and why.
//
// # Errors
//
// ErrMalformed (bad input bytes), ErrUnsupported (a Go value that cannot be encoded) and
// ErrMismatch (good input that does not fit the Go type), each with a detailed error type.
//
// # Implementation choices
//
// The encoder and decoder walk values themselves and use the github.com/tinylib/msgp runtime
// (msgp.AppendString, msgp.ReadStringZC, msgp.ReadArrayHeaderBytes, …) for each msgpack
// item. They do not use msgp.AppendIntf, msgp.ReadIntfBytes or msgp.RegisterExtension:
// msgp reserves extension codes 3, 4 and 5 for complex64, complex128 and its own time
// format (ReadIntfBytes would decode our Image, Tuple and Thunk as those, and
// RegisterExtension panics on them), it writes time.Time as ext 5 rather than the standard
// -1, and its registry is package-level mutable state. Walking ourselves also gives the
// depth cap, the checks against hostile lengths and the error paths.
//
// Structs and other typed values go through a small reflection layer of this package
// (fields.go, encode_reflect.go, unmarshal.go) rather than github.com/vmihailenco/msgpack/v5:
// vmihailenco decodes `any` fields through its global extension registry (so our types
// would need global registration), into int8/uint16/… rather than int64, and without a depth
// cap. One set of rules here keeps a struct's `any` fields identical to Decode's generic
// form. vmihailenco/msgpack is used only in tests, as an independent decoder and encoder
// proving the bytes are standard msgpack.
//
// The package keeps no mutable package-level state; all functions are safe for concurrent
// use.
package wire
