package plane

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// Encode returns e as the msgpack map {"type", "message", "attempt"}: the value of an ERROR
// frame.
func (e ErrorInfo) Encode() []byte {
	b := make([]byte, 0, 32+len(e.Type)+len(e.Message))
	b = msgp.AppendMapHeader(b, 3)
	b = msgp.AppendString(b, "type")
	b = msgp.AppendString(b, e.Type)
	b = msgp.AppendString(b, "message")
	b = msgp.AppendString(b, e.Message)
	b = msgp.AppendString(b, "attempt")
	b = msgp.AppendInt(b, e.Attempt)
	return b
}

// DecodeErrorInfo decodes the msgpack map Encode writes. Unknown keys are skipped.
// Errors: *InvalidError when b is not such a map.
func DecodeErrorInfo(b []byte) (ErrorInfo, error) {
	var e ErrorInfo
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return e, Invalid("error frame", nil, fmt.Sprintf("want a msgpack map {type, message, attempt}: %v", err))
	}
	for range n {
		var key string
		if key, b, err = msgp.ReadStringBytes(b); err != nil {
			return e, Invalid("error frame", nil, fmt.Sprintf("want string keys: %v", err))
		}
		switch key {
		case "type":
			e.Type, b, err = msgp.ReadStringBytes(b)
		case "message":
			e.Message, b, err = msgp.ReadStringBytes(b)
		case "attempt":
			e.Attempt, b, err = msgp.ReadIntBytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return e, Invalid("error frame", nil, fmt.Sprintf("field %s: %v", key, err))
		}
	}
	return e, nil
}
