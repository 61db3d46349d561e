package persist

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// The data queue's values are defined once, in the value layer internal/record, which the
// stores (the file store, persist/lakestore, persist/httpstore) and the server's Arrow
// guard (internal/arrowbody) share; persist re-exports the part a program uses. Each
// name below is the same type, constant or value as its internal/record original, so
// values cross between the SDK and the stores without conversion.

// Record is one sample's fields: field name → value (see Kind for the Go values a field
// takes). It is record.Record.
type Record = record.Record

// DefaultPartition is the partition a put without PutOpts.Partition writes to.
const DefaultPartition = record.DefaultPartition

// Kind is the stored type of a field: a schema column's type (record.Kind).
type Kind = record.Kind

// The kinds a field can have (see record.Kind for the Go values of each).
const (
	KindBool        = record.KindBool
	KindInt64       = record.KindInt64
	KindFloat64     = record.KindFloat64
	KindString      = record.KindString
	KindBytes       = record.KindBytes
	KindInt64List   = record.KindInt64List
	KindFloat64List = record.KindFloat64List
	KindTensor      = record.KindTensor
	KindNDArray     = record.KindNDArray
	KindWireTensor  = record.KindWireTensor
	KindCodec       = record.KindCodec
)

// Tensor is the one tensor type, wire.NDArray (record.Tensor).
type Tensor = record.Tensor

// Field is one column of a queue's schema: its name and kind (record.Field).
type Field = record.Field

// Schema is a queue's fields in the order they were first put (record.Schema).
type Schema = record.Schema

// Row is one record as read back (record.Row).
type Row = record.Row

// Batch is the columnar result of a read: an Arrow record with the _index column first
// (record.Batch).
type Batch = record.Batch

// MaxRecordBytes bounds one record in wire form (a put body's record): 16 MiB.
const MaxRecordBytes = record.MaxRecordBytes

// IndexColumn and PartitionColumn are the names of the int64 index column and the string
// partition column of a batch's Arrow form (BatchRecord).
const (
	IndexColumn     = record.IndexColumn
	PartitionColumn = record.PartitionColumn
)

// CheckName checks a queue, partition or key name: 1–128 bytes of [A-Za-z0-9._-], not
// starting with . _ or -. what names the argument in the error. Errors: *InvalidError.
func CheckName(what, name string) error { return record.CheckName(what, name) }

// RecordFromWire decodes one record from its wire form (record.RecordFromWire).
func RecordFromWire(field string, b []byte) (Record, error) {
	return record.RecordFromWire(field, b)
}

// RecordToWire encodes one record in its wire form (record.RecordToWire).
func RecordToWire(field string, rec Record) ([]byte, error) {
	return record.RecordToWire(field, rec)
}

// RecordsFromArrow converts an Arrow record batch into records (record.RecordsFromArrow);
// with indexColumn, the batch's IndexColumn gives each record's index.
func RecordsFromArrow(rec arrow.RecordBatch, indexColumn bool) ([]Record, []int64, error) {
	return record.RecordsFromArrow(rec, indexColumn)
}

// BatchRecord returns the Arrow form of b: IndexColumn, PartitionColumn, then the fields
// (record.BatchRecord).
func BatchRecord(b *Batch) arrow.RecordBatch { return record.BatchRecord(b) }

// BatchFromRecord turns an Arrow record in BatchRecord's form back into a Batch without
// copying the columns (record.BatchFromRecord).
func BatchFromRecord(rec arrow.RecordBatch) (*Batch, error) { return record.BatchFromRecord(rec) }

// The errors of the data queue (record's sentinels and error types; see internal/record).
var (
	ErrClosed           = record.ErrClosed
	ErrInvalid          = record.ErrInvalid
	ErrSchema           = record.ErrSchema
	ErrUnsupportedValue = record.ErrUnsupportedValue
	ErrNotFound         = record.ErrNotFound
	ErrTimeout          = record.ErrTimeout
	ErrCorrupt          = record.ErrCorrupt
	ErrPutIDReused      = record.ErrPutIDReused
)

// PutIDReusedError reports a put whose id names an earlier put of another batch
// (record.PutIDReusedError): nothing written, the earlier records stand.
type PutIDReusedError = record.PutIDReusedError

// InvalidError is plane.InvalidError: an argument outside what is allowed.
type InvalidError = record.InvalidError

// SchemaError reports a value whose kind is incompatible with its field's column.
type SchemaError = record.SchemaError

// UnsupportedValueError reports a value of a Go type that cannot be stored.
type UnsupportedValueError = record.UnsupportedValueError

// NotFoundError reports indexes or a key that do not exist.
type NotFoundError = record.NotFoundError

// Code returns the stable code of err (record.Code): "corrupt" also for a store's
// storage-engine error of damaged data met by any query (IsCorrupt).
func Code(err error) string { return record.Code(err) }

// IsCorrupt reports whether err says the store's data is damaged: it matches ErrCorrupt,
// or it is the error of a store's storage engine for damaged data (the file store's SQLite
// answering SQLITE_CORRUPT to a query of its meta.db, at open or long after), which the
// store's package recognises (record.RegisterCorrupt). Code answers "corrupt" for both.
func IsCorrupt(err error) bool { return record.IsCorrupt(err) }

// ErrorFromCode rebuilds the error of a code and message (record.ErrorFromCode).
func ErrorFromCode(code, message string) error { return record.ErrorFromCode(code, message) }
