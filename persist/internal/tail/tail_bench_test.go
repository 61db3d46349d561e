package tail

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// BenchmarkDecodeLists: DecodeRecords of 16 records, each a float64 list and an int64
// list of 1,024 elements (the list decoding decodeList does).
func BenchmarkDecodeLists(b *testing.B) {
	fl := make([]float64, 1024)
	il := make([]int64, 1024)
	for i := range fl {
		fl[i] = float64(i) * 1.5
		il[i] = int64(i * 1000)
	}
	var recs []record.NormRecord
	for range 16 {
		recs = append(recs, record.NormRecord{{Name: "f", Kind: record.KindFloat64List, Val: fl}, {Name: "i", Kind: record.KindInt64List, Val: il}})
	}
	enc := EncodeRecords(nil, recs)
	b.ResetTimer()
	for range b.N {
		if _, err := DecodeRecords(enc); err != nil {
			b.Fatal(err)
		}
	}
}
