// Package tail is the binary encoding of the durable tail both stores keep (the file
// store in meta.db's tail table, persist/lakestore in its catalog): batches of
// normalized records and the target indexes of field updates. It also gives shard
// hashing its byte form of a codec value (persist.ShardOwns).
package tail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// The durable tail: rows put but not yet flushed into a Parquet fragment live in the
// meta.db table tail, one row per put operation, as an encoded batch of records. This
// file holds the binary encoding of those batches.
//
// batch   := uvarint(nrec) record*
// record  := uvarint(nfield) field*
// field   := string(name) byte(kind code) value
// value   := bool: 1 byte | int64: varint | float64: 8 bytes LE | string, bytes, codec: string
//          | list<int64>: uvarint(n) varint* | list<float64>: uvarint(n) 8-byte* | tensor:
//            string(dtype) uvarint(ndim) varint* string(data)
// string  := uvarint(len) bytes
// indexes := uvarint(n) varint(delta)*   (the targets of a PutFields entry)

// Tail entry kinds (the kind column of meta.db's tail table).
const (
	EntryRows   = 0 // EntryRows holds new samples: indexes lo .. lo+n-1
	EntryFields = 1 // fields added to existing samples (PutFields, KV merge)
)

var kindCodes = map[record.Kind]byte{record.KindBool: 1, record.KindInt64: 2, record.KindFloat64: 3, record.KindString: 4, record.KindBytes: 5,
	record.KindInt64List: 6, record.KindFloat64List: 7, record.KindTensor: 8, record.KindCodec: 9, record.KindNDArray: 10, record.KindWireTensor: 11}

var codeKinds = func() map[byte]record.Kind {
	m := map[byte]record.Kind{}
	for k, c := range kindCodes {
		m[c] = k
	}
	return m
}()

var errBadTail = errors.New("malformed tail entry")

func putString(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// EncodeRecords appends the encoding of recs to b.
func EncodeRecords(b []byte, recs []record.NormRecord) []byte {
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, rec := range recs {
		b = binary.AppendUvarint(b, uint64(len(rec)))
		for _, fv := range rec {
			b = putString(b, []byte(fv.Name))
			b = append(b, kindCodes[fv.Kind])
			switch v := fv.Val.(type) {
			case bool:
				if v {
					b = append(b, 1)
				} else {
					b = append(b, 0)
				}
			case int64:
				b = binary.AppendVarint(b, v)
			case float64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			case string:
				b = putString(b, []byte(v))
			case []byte:
				b = putString(b, v)
			case record.CodecValue:
				b = putString(b, v.Bytes)
			case []int64:
				b = binary.AppendUvarint(b, uint64(len(v)))
				for _, x := range v {
					b = binary.AppendVarint(b, x)
				}
			case []float64:
				b = binary.AppendUvarint(b, uint64(len(v)))
				for _, x := range v {
					b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
				}
			case record.Tensor:
				b = putString(b, []byte(v.DType))
				b = binary.AppendUvarint(b, uint64(len(v.Shape)))
				for _, d := range v.Shape {
					b = binary.AppendVarint(b, int64(d))
				}
				b = putString(b, v.Data)
			default:
				panic(fmt.Sprintf("persist: encode: unexpected normalized value %T", fv.Val))
			}
		}
	}
	return b
}

type tailDecoder struct {
	b     []byte
	err   error
	names map[string]string // interned field names: records repeat them
}

func (d *tailDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadTail
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a signed varint: a uvarint in zig-zag form, as binary.Varint reads it.
func (d *tailDecoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *tailDecoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errBadTail
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *tailDecoder) str() []byte { return d.bytes(d.uvarint()) }

func (d *tailDecoder) byte1() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *tailDecoder) float() float64 {
	if b := d.bytes(8); b != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return 0
}

// count guards a length read from the input against the bytes left, so a corrupt
// length cannot make us allocate without bound.
func (d *tailDecoder) count(minBytesEach int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/max(minBytesEach, 1)+1) {
		d.err = errBadTail
		return 0
	}
	return int(n)
}

// decodeList reads a list: its length (count, each element taking at least minBytesEach
// bytes), then each element as elem reads it.
func decodeList[T any](d *tailDecoder, minBytesEach int, elem func() T) []T {
	x := make([]T, d.count(minBytesEach))
	for i := range x {
		x[i] = elem()
	}
	return x
}

// DecodeRecords decodes one or more concatenated batches encoded by EncodeRecords (the
// writer concatenates the batches of consecutive puts into one tail entry). Strings and
// byte slices alias b.
func DecodeRecords(b []byte) ([]record.NormRecord, error) {
	d := &tailDecoder{b: b}
	var recs []record.NormRecord
	for len(d.b) > 0 && d.err == nil {
		var err error
		if recs, err = d.batch(recs); err != nil {
			return nil, err
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return recs, nil
}

func (d *tailDecoder) batch(recs []record.NormRecord) ([]record.NormRecord, error) {
	nrec := d.count(1)
	for r := 0; r < nrec && d.err == nil; r++ {
		nf := d.count(2)
		rec := make(record.NormRecord, 0, nf)
		for f := 0; f < nf && d.err == nil; f++ {
			nb := d.str()
			name, ok := d.names[string(nb)] // no allocation for the lookup
			if !ok {
				name = string(nb)
				if d.names == nil {
					d.names = map[string]string{}
				}
				d.names[name] = name
			}
			code := d.byte1()
			if d.err != nil {
				break
			}
			kind, ok := codeKinds[code]
			if !ok {
				return nil, fmt.Errorf("%w: kind code %d", errBadTail, code)
			}
			var v any
			switch kind {
			case record.KindBool:
				v = d.byte1() == 1
			case record.KindInt64:
				v = d.varint()
			case record.KindFloat64:
				v = d.float()
			case record.KindString:
				v = string(d.str())
			case record.KindBytes:
				v = d.str()
			case record.KindCodec:
				v = record.CodecValue{Bytes: d.str()}
			case record.KindInt64List:
				v = decodeList(d, 1, d.varint)
			case record.KindFloat64List:
				v = decodeList(d, 8, d.float)
			case record.KindTensor, record.KindNDArray, record.KindWireTensor:
				var t record.Tensor
				t.DType = string(d.str())
				t.Shape = decodeList(d, 1, func() int { return int(d.varint()) })
				t.Data = d.str()
				v = t
			}
			if d.err != nil {
				break
			}
			rec = append(rec, record.FieldValue{Name: name, Kind: kind, Val: v})
		}
		recs = append(recs, rec)
	}
	if d.err != nil {
		return nil, d.err
	}
	return recs, nil
}

// EncodeIndexes encodes a list of global indexes as deltas.
func EncodeIndexes(idx []int64) []byte {
	b := binary.AppendUvarint(nil, uint64(len(idx)))
	prev := int64(0)
	for _, i := range idx {
		b = binary.AppendVarint(b, i-prev)
		prev = i
	}
	return b
}

func DecodeIndexes(b []byte) ([]int64, error) {
	d := &tailDecoder{b: b}
	n := d.count(1)
	out := make([]int64, n)
	prev := int64(0)
	for i := range out {
		prev += d.varint()
		out[i] = prev
	}
	return out, d.err
}
