package record

import (
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/wire"
)

// This file is where persist meets the wire codec (github.com/lakeshore-dev/lakeshore/wire).
// Tensor is wire.NDArray (kind tensor); wire.Tensor is stored the same way (kind
// wire.tensor) and read back as wire.Tensor; every other value that is not a built-in
// kind is stored as codec bytes (kind codec) and read back as wire.Decode's generic
// form (for example a struct comes back as map[string]any).

// checkTensor validates a Tensor: an invalid array (unknown dtype, data length not
// matching dtype and shape) is an *UnsupportedValueError.
func checkTensor(field string, t Tensor) error {
	if err := t.Validate(); err != nil {
		return &UnsupportedValueError{Field: field, GoType: "Tensor", Reason: arrayReason(err)}
	}
	return nil
}

// arrayReason is what an array's Validate error says was wrong, without the codec's
// "wire: cannot encode wire.NDArray at $: " (a Go type name, which the server's answers
// to HTTP clients must not carry; UnsupportedValueError.GoType names the type for Go).
func arrayReason(err error) string {
	var ee *wire.EncodeError
	if errors.As(err, &ee) && ee.Path == "" && ee.Reason != "" {
		return ee.Reason
	}
	return err.Error()
}

// WireTensor reports whether v is the codec's wire.Tensor and returns its kind and
// Tensor form; an invalid array is an *UnsupportedValueError.
func WireTensor(field string, v any) (Kind, Tensor, bool, error) {
	var a wire.NDArray
	var k Kind
	switch x := v.(type) {
	case wire.Tensor:
		a, k = wire.NDArray(x), KindWireTensor
	case *wire.Tensor:
		if x == nil {
			return "", Tensor{}, false, nil
		}
		a, k = wire.NDArray(*x), KindWireTensor
	default:
		return "", Tensor{}, false, nil
	}
	if err := a.Validate(); err != nil {
		return "", Tensor{}, true, &UnsupportedValueError{Field: field, GoType: fmt.Sprintf("%T", v), Reason: arrayReason(err)}
	}
	return k, Tensor{DType: a.DType, Shape: a.Shape, Data: a.Data}, true, nil
}

// WireTensorValue converts a stored tensor back to the codec type of kind k.
func WireTensorValue(k Kind, t Tensor) any {
	if k == KindWireTensor {
		return wire.Tensor{DType: t.DType, Shape: t.Shape, Data: t.Data}
	}
	return wire.NDArray{DType: t.DType, Shape: t.Shape, Data: t.Data}
}

// WireMarshal encodes v with the codec.
func WireMarshal(v any) ([]byte, error) { return wire.Marshal(v) }

// WireDecode decodes codec bytes back to the value that was put (its generic form).
func WireDecode(b []byte) (any, error) { return wire.Decode(b) }
