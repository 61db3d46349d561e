package record

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// AppendValue appends normalized value v (already of kind k) to builder b.
func AppendValue(b array.Builder, k Kind, v any) {
	switch k {
	case KindBool:
		b.(*array.BooleanBuilder).Append(v.(bool))
	case KindInt64:
		b.(*array.Int64Builder).Append(v.(int64))
	case KindFloat64:
		b.(*array.Float64Builder).Append(v.(float64))
	case KindString:
		b.(*array.StringBuilder).Append(v.(string))
	case KindBytes:
		b.(*array.BinaryBuilder).Append(v.([]byte))
	case KindCodec:
		b.(*array.BinaryBuilder).Append(v.(CodecValue).Bytes)
	case KindInt64List:
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).AppendValues(v.([]int64), nil)
	case KindFloat64List:
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Float64Builder).AppendValues(v.([]float64), nil)
	case KindTensor, KindNDArray, KindWireTensor:
		t := v.(Tensor)
		sb := b.(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(t.DType)
		lb := sb.FieldBuilder(1).(*array.ListBuilder)
		lb.Append(true)
		vb := lb.ValueBuilder().(*array.Int64Builder)
		for _, d := range t.Shape {
			vb.Append(int64(d))
		}
		sb.FieldBuilder(2).(*array.BinaryBuilder).Append(t.Data)
	default:
		panic("record: append: unknown kind " + string(k))
	}
}

// AppendArrow appends element row of arr (stored as kind from) to b (of kind to).
func AppendArrow(b array.Builder, to Kind, arr arrow.Array, row int, from Kind) {
	if arr.IsNull(row) {
		b.AppendNull()
		return
	}
	switch to {
	case KindBool:
		b.(*array.BooleanBuilder).Append(arr.(*array.Boolean).Value(row))
	case KindInt64:
		b.(*array.Int64Builder).Append(arr.(*array.Int64).Value(row))
	case KindFloat64:
		if from == KindInt64 {
			b.(*array.Float64Builder).Append(float64(arr.(*array.Int64).Value(row)))
		} else {
			b.(*array.Float64Builder).Append(arr.(*array.Float64).Value(row))
		}
	case KindString:
		b.(*array.StringBuilder).Append(arr.(*array.String).Value(row))
	case KindBytes, KindCodec:
		b.(*array.BinaryBuilder).Append(arr.(*array.Binary).Value(row))
	case KindInt64List, KindFloat64List:
		v, _ := ValueAt(arr, row, from)
		AppendValue(b, to, ConvertValue(v, from, to))
	case KindTensor, KindNDArray, KindWireTensor:
		AppendValue(b, to, TensorAt(arr.(*array.Struct), row))
	}
}
