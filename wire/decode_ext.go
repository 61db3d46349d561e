package wire

import (
	"fmt"
	"math"

	"github.com/tinylib/msgp/msgp"
)

// ext decodes an extension value at the start of b.
func (d *decoder) ext(b []byte, depth int) (any, []byte, error) {
	typ, payload, rest, ok := readExtHeader(b)
	if !ok {
		return nil, b, d.fail(b, "ext is truncated")
	}
	var v any
	var err error
	switch typ {
	case ExtTimestamp:
		t, reason := readTimestamp(payload)
		if reason != "" {
			return nil, b, d.fail(b, reason)
		}
		return t, rest, nil
	case ExtNDArray:
		v, err = d.arrayPayload(payload, "ndarray", func(dt string, s []int, data []byte) any {
			return d.array(NDArray{DType: dt, Shape: s, Data: data})
		})
	case ExtTensor:
		v, err = d.arrayPayload(payload, "tensor", func(dt string, s []int, data []byte) any {
			return Tensor(d.array(NDArray{DType: dt, Shape: s, Data: data}))
		})
	case ExtImage:
		v, err = d.pairPayload(payload, "image", "format", func(name string, data []byte) any {
			return Image{Format: name, Data: data}
		})
	case ExtThunkV1:
		if d.opts.Version == 1 {
			v, err = d.thunk(payload)
			break
		}
		v, err = d.tuplePayload(payload, depth) // ExtTuple
	case ExtThunk:
		v, err = d.thunk(payload)
	case ExtTupleV1:
		v, err = d.tuplePayload(payload, depth)
	default:
		return nil, b, d.fail(b, fmt.Sprintf("unknown ext type %d; want -1 (timestamp), 1 (ndarray), 2 (tensor), "+
			"3 (image), 5 (tuple; 4 in wire version 1) or 64 (thunk)", typ))
	}
	if err != nil {
		return nil, b, err
	}
	return v, rest, nil
}

// thunk decodes a Thunk's payload.
func (d *decoder) thunk(payload []byte) (any, error) {
	return d.pairPayload(payload, "thunk", "language", func(name string, data []byte) any {
		return Thunk{Language: name, Data: data}
	})
}

// array returns a decoded array normalised to its plain dtype name and little-endian data,
// or as written when the options say Verbatim.
func (d *decoder) array(a NDArray) NDArray {
	if d.opts.Verbatim {
		return a
	}
	return a.Normalized()
}

// payloadHeader reads the array header opening an extension payload and checks it has want
// elements.
func (d *decoder) payloadHeader(p []byte, kind, layout string, want uint32) ([]byte, error) {
	n, rest, err := msgp.ReadArrayHeaderBytes(p)
	if err != nil || n != want {
		return p, d.fail(p, fmt.Sprintf("%s payload must be an array %s", kind, layout))
	}
	return rest, nil
}

// payloadEnd checks nothing follows the last element of an extension payload.
func (d *decoder) payloadEnd(rest []byte, kind string) error {
	if len(rest) != 0 {
		return d.fail(rest, fmt.Sprintf("%d bytes follow the %s payload's last element", len(rest), kind))
	}
	return nil
}

// lastData reads the data bin that ends an extension's payload (arrayPayload, pairPayload):
// it must be one, and nothing may follow it. The bytes are rest's, not a copy.
func (d *decoder) lastData(rest []byte, kind string) ([]byte, error) {
	data, after, err := msgp.ReadBytesZC(rest)
	if err != nil {
		return nil, d.failErr(rest, kind+" data", err)
	}
	if err := d.payloadEnd(after, kind); err != nil {
		return nil, err
	}
	return data, nil
}

// arrayPayload decodes [dtype str, shape [uint…], data bin] and validates it.
func (d *decoder) arrayPayload(p []byte, kind string, build func(string, []int, []byte) any) (any, error) {
	const layout = "[dtype str, shape [int…], data bin]"
	rest, err := d.payloadHeader(p, kind, layout, 3)
	if err != nil {
		return nil, err
	}
	dtype, rest, err := d.str(rest, kind+" dtype")
	if err != nil {
		return nil, err
	}
	at := rest
	n, rest, err := msgp.ReadArrayHeaderBytes(rest)
	if err != nil {
		return nil, d.failErr(at, kind+" shape", err)
	}
	if n > MaxDims {
		return nil, d.fail(at, fmt.Sprintf("%s shape has %d dimensions; at most %d are allowed", kind, n, MaxDims))
	}
	var shape []int
	if n > 0 {
		shape = make([]int, n)
	}
	for i := range shape {
		dimAt := rest
		var dim int64
		if dim, rest, err = msgp.ReadInt64Bytes(rest); err != nil {
			return nil, d.failErr(dimAt, fmt.Sprintf("%s shape[%d]", kind, i), err)
		}
		if dim < 0 || dim > math.MaxInt {
			return nil, d.fail(dimAt, fmt.Sprintf("%s shape[%d] is %d; want a non-negative int", kind, i, dim))
		}
		shape[i] = int(dim)
	}
	data, err := d.lastData(rest, kind)
	if err != nil {
		return nil, err
	}
	if reason := checkArray(dtype, shape, len(data)); reason != "" {
		return nil, d.fail(p, kind+": "+reason)
	}
	return build(dtype, shape, append(make([]byte, 0, len(data)), data...)), nil
}

// pairPayload decodes [name str, data bin] with a non-empty name (Image and Thunk).
func (d *decoder) pairPayload(p []byte, kind, field string, build func(string, []byte) any) (any, error) {
	rest, err := d.payloadHeader(p, kind, "["+field+" str, data bin]", 2)
	if err != nil {
		return nil, err
	}
	at := rest
	name, rest, err := d.str(rest, kind+" "+field)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, d.fail(at, kind+" "+field+" must not be empty")
	}
	data, err := d.lastData(rest, kind)
	if err != nil {
		return nil, err
	}
	return build(name, append(make([]byte, 0, len(data)), data...)), nil
}

// tuplePayload decodes a tuple's payload, an array of values at depth (the tuple is the
// container; its elements are at depth+1).
func (d *decoder) tuplePayload(p []byte, depth int) (any, error) {
	if len(p) == 0 || leadKind(p[0]) != "an array" {
		return nil, d.fail(p, "tuple payload must be an array [values…]")
	}
	v, rest, err := d.list(p, depth)
	if err != nil {
		return nil, err
	}
	if err := d.payloadEnd(rest, "tuple"); err != nil {
		return nil, err
	}
	return Tuple(v.([]any)), nil
}
