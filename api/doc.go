// Package api defines the bodies of Lakeshore's HTTP API (/v1): requests, responses, the
// one error body {code, message, details} with its status mapping, and the msgpack and JSON
// codecs. The server and the HTTP plane (plane/httpplane) share it, so it imports neither.
//
// On the wire, durations are seconds (float64), times are msgpack timestamps or RFC 3339
// strings in JSON, and payloads, results and frame values are wire-encoded bytes (msgpack
// bin, or base64 strings in JSON).
package api
