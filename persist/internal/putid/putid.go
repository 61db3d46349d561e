// Package putid holds what every data store does with the idempotency id of a put batch
// (persist.PutOpts.ID) once it found the id stored: answer the first put's indexes, or
// refuse a repeat that names another batch. The file store and the distributed store
// share it; it is internal so that it is not part of the data SDK.
package putid

import (
	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// Repeat checks a repeated put id against what its first put stored (partition, n
// records) and returns the indexes to answer: lo, lo+1, …, or *persist.PutIDReusedError
// (code put_id_reused, matching ErrInvalid too) when the repeat names another partition
// or another number of records.
func Repeat(id, storedPartition string, lo, n int64, partition string, records int) ([]int64, error) {
	if storedPartition != partition || n != int64(records) {
		return nil, &record.PutIDReusedError{ID: id, StoredPartition: storedPartition, StoredRecords: n, Partition: partition, Records: records}
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = lo + int64(i)
	}
	return out, nil
}
