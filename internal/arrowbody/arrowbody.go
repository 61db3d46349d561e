// Package arrowbody guards the Arrow bodies the server receives from other processes (the
// Arrow puts and field updates of the data routes): RecordsFromArrowStream checks every
// length an Arrow IPC stream declares before arrow-go decodes it, then reads the records
// with persist.RecordsFromArrow.
package arrowbody

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakeshore-dev/lakeshore/persist"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// This file reads the Arrow IPC streams other processes put (the Arrow bodies of the
// server's put and field-update routes) without trusting a length they declare. An IPC
// stream is a sequence of messages, each a flatbuffer of metadata and a body; the
// metadata declares the sizes of what follows (its own length, the body's, each buffer's
// place in the body, each column's rows). arrow-go's reader allocates and slices by those
// numbers before it can know they are false, so every message is checked here first
// against the bytes actually present, and only a message whose every length fits is
// handed to arrow-go (ipc.NewReaderFromMessageReader over arrowMessages): its buffers
// are then slices of the body, nothing is allocated by a declared size, and no slice of
// arrow-go's or ours can go out of range.

// ArrowStreamRule says what an Arrow body must be, in the errors of
// RecordsFromArrowStream.
const ArrowStreamRule = "one uncompressed little-endian Arrow IPC stream (application/vnd.apache.arrow.stream): a schema message, then record batches, every declared length within the body"

// arrowMaxDepth bounds the nesting of the fields of a schema: the deepest accepted type
// (the tensor struct's list of int64) has depth 3.
const arrowMaxDepth = 4

// RecordsFromArrowStream reads body, an Arrow IPC stream held whole in memory, into
// records as persist.RecordsFromArrow reads each of its record batches (with indexColumn, the
// _index column is returned apart). Every length the stream declares is checked against
// body before anything is allocated or decoded: message metadata and bodies, buffers,
// rows of columns, offsets of strings and lists. The stream holds at most one row per
// byte of body in all. Compressed record batches, dictionaries, big-endian schemas and
// column types persist.RecordsFromArrow does not accept are refused. field names the body in
// errors ("request body"). Errors: *persist.InvalidError whose Rule says what was wrong, without
// the decoder's internals.
func RecordsFromArrowStream(field string, body []byte, indexColumn bool) ([]persist.Record, []int64, error) {
	mr := &arrowMessages{field: field, data: body, maxRows: int64(len(body))}
	rd, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return nil, nil, mr.failure(err)
	}
	defer rd.Release()
	sc := rd.Schema()
	for _, f := range sc.Fields() {
		if indexColumn && f.Name == persist.IndexColumn {
			if f.Type.ID() != arrow.INT64 {
				return nil, nil, &persist.InvalidError{Field: "column " + persist.IndexColumn, Value: f.Type.String(), Rule: "int64 without nulls"}
			}
			continue
		}
		if !acceptedArrowType(f.Type) {
			return nil, nil, &persist.InvalidError{Field: "column " + f.Name, Value: f.Type.String(), Rule: record.ArrowColumnRule}
		}
	}
	mr.schema = sc
	var recs []persist.Record
	var idx []int64
	for rd.Next() {
		rs, ix, err := persist.RecordsFromArrow(rd.RecordBatch(), indexColumn)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, rs...)
		idx = append(idx, ix...)
	}
	if err := rd.Err(); err != nil {
		return nil, nil, mr.failure(err)
	}
	if mr.err != nil {
		return nil, nil, mr.err
	}
	if indexColumn && idx == nil && sc.FieldIndices(persist.IndexColumn) == nil {
		return nil, nil, &persist.InvalidError{Field: "column " + persist.IndexColumn, Rule: "an int64 column _index naming each row's sample"}
	}
	return recs, idx, nil
}

// acceptedArrowType reports whether persist.RecordsFromArrow converts a column of type dt.
func acceptedArrowType(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY:
		_, ext := dt.(arrow.ExtensionType)
		return !ext
	case arrow.LIST:
		switch dt.(*arrow.ListType).Elem().ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.FLOAT32, arrow.FLOAT64:
			_, ext := dt.(*arrow.ListType).Elem().(arrow.ExtensionType)
			return !ext
		}
	case arrow.STRUCT:
		return arrow.TypeEqual(dt, record.TensorArrowType())
	}
	return false
}

// arrowMessages is an ipc.MessageReader over an IPC stream in memory that hands out only
// messages whose declared lengths it checked (next); its buffers are slices of data. The
// first error ends it and stays in err, which the caller answers instead of the error
// arrow-go's reader wraps it in (failure).
type arrowMessages struct {
	field string
	data  []byte
	pos   int   // the start of the next message in data
	n     int   // messages handed out
	rows  int64 // rows of the record batches handed out
	// maxRows bounds rows.
	maxRows int64
	// schema is the stream's schema once the reader has read it: record batches are
	// checked against it.
	schema *arrow.Schema
	msg    *ipc.Message
	err    error
	// retains counts the references taken by Retain beyond the reader's own.
	retains int
}

// invalid returns the *persist.InvalidError of a stream with problem.
func (m *arrowMessages) invalid(format string, args ...any) error {
	return &persist.InvalidError{Field: m.field, Rule: ArrowStreamRule + "; " + fmt.Sprintf(format, args...)}
}

// failure returns the error of a read that failed with err: the check's own error, or
// (for an error of the decoder's that a check did not foresee) a plain description.
func (m *arrowMessages) failure(error) error {
	if m.err != nil {
		return m.err
	}
	return m.invalid("message %d does not decode as Arrow metadata", m.n)
}

// Retain takes one more reference.
func (m *arrowMessages) Retain() { m.retains++ }

// Release drops a reference; the last releases the current message.
func (m *arrowMessages) Release() {
	if m.retains > 0 {
		m.retains--
		return
	}
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// Message returns the next checked message, or io.EOF at the end of the stream (its end
// marker or the end of the body).
func (m *arrowMessages) Message() (*ipc.Message, error) {
	if m.err != nil {
		return nil, m.err
	}
	msg, err := m.next()
	if err == io.EOF && m.n == 0 {
		err = m.invalid("the stream ends before its schema message")
	}
	if err != nil {
		if err != io.EOF {
			m.err = err
		}
		return nil, err
	}
	if m.msg != nil {
		m.msg.Release()
	}
	m.msg = msg
	return msg, nil
}

func (m *arrowMessages) next() (*ipc.Message, error) {
	rest := m.data[m.pos:]
	if len(rest) == 0 {
		return nil, io.EOF
	}
	no := m.n + 1
	if len(rest) < 4 {
		return nil, m.invalid("message %d: %d bytes where a message length (4 bytes) belongs", no, len(rest))
	}
	head := 4
	length := int64(int32(binary.LittleEndian.Uint32(rest)))
	if uint32(length) == 0xFFFFFFFF { // the continuation marker, then the length
		if len(rest) < 8 {
			return nil, m.invalid("message %d: %d bytes where a message length (8 bytes) belongs", no, len(rest))
		}
		head = 8
		length = int64(int32(binary.LittleEndian.Uint32(rest[4:])))
	}
	if length == 0 { // the end-of-stream marker
		return nil, io.EOF
	}
	if length < 4 || length > int64(len(rest)-head) {
		return nil, m.invalid("message %d declares %d bytes of metadata, and the body holds %d more", no, length, len(rest)-head)
	}
	meta := rest[head : int64(head)+length]
	after := rest[int64(head)+length:]
	fb := &flatReader{b: meta}
	typ, header, bodyLen := fb.message()
	if fb.bad {
		return nil, m.invalid("message %d: its metadata is not a valid Arrow message flatbuffer", no)
	}
	if bodyLen < 0 || bodyLen > int64(len(after)) {
		return nil, m.invalid("message %d declares a body of %d bytes, and the request body holds %d more", no, bodyLen, len(after))
	}
	body := after[:bodyLen]
	switch {
	case no == 1 && typ != fbHeaderSchema:
		return nil, m.invalid("message 1 is not a schema (a stream starts with its schema)")
	case no == 1:
		if err := m.checkSchema(fb, header); err != nil {
			return nil, err
		}
	case typ != fbHeaderRecordBatch:
		return nil, m.invalid("message %d is not a record batch (dictionaries and tensors are not accepted)", no)
	default:
		if err := m.checkRecordBatch(no, fb, header, body); err != nil {
			return nil, err
		}
	}
	m.pos += head + int(length) + int(bodyLen)
	m.n = no
	return ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body)), nil
}

// The MessageHeader union's members (Arrow's Message.fbs).
const (
	fbHeaderSchema      = 1
	fbHeaderRecordBatch = 3
)

// The Type union's members (Arrow's Schema.fbs) that an accepted column can have.
const (
	fbTypeInt           = 2
	fbTypeFloatingPoint = 3
	fbTypeBinary        = 4
	fbTypeUtf8          = 5
	fbTypeBool          = 6
	fbTypeList          = 12
	fbTypeStruct        = 13
	fbTypeLargeUtf8     = 20
)

// checkSchema checks the schema message's flatbuffer where arrow-go reads it: every
// table, vector and string in bounds, little-endian, no dictionary, types among those
// persist.RecordsFromArrow accepts, at most arrowMaxDepth levels of fields.
func (m *arrowMessages) checkSchema(fb *flatReader, s flatTable) error {
	if e := s.i16(0, 0); e != 0 {
		return m.invalid("the schema is big-endian; send little-endian data")
	}
	fields := s.tables(1)
	fb.keyValues(s, 2)
	s.vector(3, 8) // features
	if fb.bad {
		return m.invalid("message 1: its schema is not a valid Arrow flatbuffer")
	}
	for _, f := range fields {
		if err := m.checkField(fb, f, 1); err != nil {
			return err
		}
	}
	return nil
}

func (m *arrowMessages) checkField(fb *flatReader, f flatTable, depth int) error {
	name := string(f.bytes(0))
	f.i8(1, 0) // nullable
	typ := f.i8(2, 0)
	t, hasType := f.table(3)
	_, dict := f.table(4)
	children := f.tables(5)
	fb.keyValues(f, 6)
	if fb.bad || !hasType {
		return m.invalid("message 1: its schema is not a valid Arrow flatbuffer")
	}
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	bad := &persist.InvalidError{Field: "column " + name, Rule: record.ArrowColumnRule}
	if depth > 1 {
		bad.Field = "field " + name + " of a column"
	}
	if dict || depth > arrowMaxDepth {
		return bad
	}
	switch typ {
	case fbTypeInt:
		if w := t.i32(0, 0); w != 8 && w != 16 && w != 32 && w != 64 {
			return bad
		}
		t.i8(1, 0)
	case fbTypeFloatingPoint:
		if p := t.i16(0, 0); p != 1 && p != 2 { // single, double
			return bad
		}
	case fbTypeBinary, fbTypeUtf8, fbTypeLargeUtf8, fbTypeBool:
	case fbTypeList:
		if len(children) != 1 {
			return bad
		}
	case fbTypeStruct:
	default:
		return bad
	}
	if fb.bad {
		return m.invalid("message 1: its schema is not a valid Arrow flatbuffer")
	}
	if typ != fbTypeList && typ != fbTypeStruct && len(children) > 0 {
		return bad
	}
	for _, c := range children {
		if err := m.checkField(fb, c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkRecordBatch checks a record batch message against the schema: no compression,
// every field node and buffer that arrow-go's loader takes present, every buffer within
// the body and as long as its column's rows need, offsets within their data, every
// column as long as the batch.
func (m *arrowMessages) checkRecordBatch(no int, fb *flatReader, rb flatTable, body []byte) error {
	rows := rb.i64(0, 0)
	nodes, nNodes := rb.vector(1, 16)
	bufs, nBufs := rb.vector(2, 16)
	_, compressed := rb.table(3)
	if fb.bad {
		return m.invalid("message %d: its metadata is not a valid Arrow record batch flatbuffer", no)
	}
	if compressed {
		return m.invalid("message %d is a compressed record batch; send it uncompressed", no)
	}
	if rows < 0 || rows > m.maxRows-m.rows {
		return m.invalid("message %d declares %d rows, and a stream of %d bytes may hold %d more (one row per byte)", no, rows, len(m.data), m.maxRows-m.rows)
	}
	w := &batchWalk{m: m, no: no, meta: fb.b, body: body, nodes: nodes, nNodes: nNodes, bufs: bufs, nBufs: nBufs, maxLen: m.maxRows}
	for _, f := range m.schema.Fields() {
		n, err := w.array(f.Name, f.Type)
		if err != nil {
			return err
		}
		if n != rows {
			return m.invalid("message %d: column %q has %d rows in a batch of %d", no, f.Name, n, rows)
		}
	}
	m.rows += rows
	return nil
}

// batchWalk takes the field nodes and buffers of one record batch in the order arrow-go's
// loader takes them (a node per array, then its validity bitmap and value buffers, then
// its children), checking each.
type batchWalk struct {
	m             *arrowMessages
	no            int
	meta, body    []byte
	nodes, bufs   int64 // positions of the vectors' first elements in meta
	nNodes, nBufs int64
	in, ib        int64 // the next node and buffer
	maxLen        int64
}

// node returns the next field node's length and null count.
func (w *batchWalk) node(name string) (length, nulls int64, err error) {
	if w.in >= w.nNodes {
		return 0, 0, w.m.invalid("message %d has %d field nodes, fewer than its schema needs", w.no, w.nNodes)
	}
	p := w.nodes + 16*w.in
	w.in++
	length = int64(binary.LittleEndian.Uint64(w.meta[p:]))
	nulls = int64(binary.LittleEndian.Uint64(w.meta[p+8:]))
	if length < 0 || length > w.maxLen {
		return 0, 0, w.m.invalid("message %d: column %q declares %d values, and the body can hold at most %d", w.no, name, length, w.maxLen)
	}
	if nulls < 0 || nulls > length {
		return 0, 0, w.m.invalid("message %d: column %q declares %d nulls in %d values", w.no, name, nulls, length)
	}
	return length, nulls, nil
}

// buffer returns the next buffer, which must hold at least need bytes.
func (w *batchWalk) buffer(name string, need int64) ([]byte, error) {
	if w.ib >= w.nBufs {
		return nil, w.m.invalid("message %d has %d buffers, fewer than its schema needs", w.no, w.nBufs)
	}
	p := w.bufs + 16*w.ib
	w.ib++
	off := int64(binary.LittleEndian.Uint64(w.meta[p:]))
	n := int64(binary.LittleEndian.Uint64(w.meta[p+8:]))
	if n == 0 && need == 0 {
		return nil, nil
	}
	if off < 0 || n < 0 || off > int64(len(w.body)) || n > int64(len(w.body))-off {
		return nil, w.m.invalid("message %d: a buffer of column %q declares bytes %d to %d, and its body holds %d", w.no, name, off, off+n, len(w.body))
	}
	if n < need {
		return nil, w.m.invalid("message %d: a buffer of column %q holds %d bytes, and its values need %d", w.no, name, n, need)
	}
	return w.body[off : off+n], nil
}

// skip passes a buffer arrow-go's loader does not read (an absent validity bitmap, the
// values of an empty array).
func (w *batchWalk) skip() { w.ib++ }

// array checks the next array, of type dt, and returns its length.
func (w *batchWalk) array(name string, dt arrow.DataType) (int64, error) {
	length, nulls, err := w.node(name)
	if err != nil {
		return 0, err
	}
	if nulls == 0 {
		w.skip()
	} else if _, err := w.buffer(name, (length+7)/8); err != nil {
		return 0, err
	}
	switch dt := dt.(type) {
	case *arrow.BooleanType:
		if length == 0 {
			w.skip()
		} else if _, err := w.buffer(name, (length+7)/8); err != nil {
			return 0, err
		}
	case arrow.FixedWidthDataType:
		if length == 0 {
			w.skip()
		} else if _, err := w.buffer(name, length*int64(dt.BitWidth()/8)); err != nil {
			return 0, err
		}
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType:
		width := int64(4)
		if dt.ID() == arrow.LARGE_STRING {
			width = 8
		}
		offsets, err := w.offsets(name, length, width)
		if err != nil {
			return 0, err
		}
		data, err := w.buffer(name, 0)
		if err != nil {
			return 0, err
		}
		if err := w.checkOffsets(name, offsets, length, width, int64(len(data)), "bytes of data"); err != nil {
			return 0, err
		}
	case *arrow.ListType:
		offsets, err := w.offsets(name, length, 4)
		if err != nil {
			return 0, err
		}
		n, err := w.array(name, dt.Elem())
		if err != nil {
			return 0, err
		}
		if err := w.checkOffsets(name, offsets, length, 4, n, "list values"); err != nil {
			return 0, err
		}
	case *arrow.StructType:
		for _, f := range dt.Fields() {
			n, err := w.array(name, f.Type)
			if err != nil {
				return 0, err
			}
			if n < length {
				return 0, w.m.invalid("message %d: a field of column %q has %d values for %d rows", w.no, name, n, length)
			}
		}
	default: // refused with the schema; never reached
		return 0, w.m.invalid("message %d: column %q has a type that is not accepted", w.no, name)
	}
	return length, nil
}

// offsets returns the offsets buffer of an array of length values of width bytes each.
func (w *batchWalk) offsets(name string, length, width int64) ([]byte, error) {
	need := int64(0)
	if length > 0 {
		need = (length + 1) * width
	}
	return w.buffer(name, need)
}

// checkOffsets checks that the length+1 offsets of an array start at 0 or later, never
// decrease and end within limit (what names in the message).
func (w *batchWalk) checkOffsets(name string, b []byte, length, width, limit int64, what string) error {
	if length == 0 {
		return nil
	}
	at := func(i int64) int64 {
		if width == 8 {
			return int64(binary.LittleEndian.Uint64(b[i*8:]))
		}
		return int64(int32(binary.LittleEndian.Uint32(b[i*4:])))
	}
	prev := at(0)
	if prev < 0 {
		return w.m.invalid("message %d: column %q has a negative offset", w.no, name)
	}
	for i := int64(1); i <= length; i++ {
		o := at(i)
		if o < prev {
			return w.m.invalid("message %d: the offsets of column %q decrease", w.no, name)
		}
		prev = o
	}
	if prev > limit {
		return w.m.invalid("message %d: the offsets of column %q reach %d, and it has %d %s", w.no, name, prev, limit, what)
	}
	return nil
}

// flatReader reads a flatbuffer the way flatc's Go code does, bounds-checking every
// read: a read out of range sets bad and answers zero, so a caller checks bad once after
// a group of reads.
type flatReader struct {
	b   []byte
	bad bool
}

// flatTable is a table of a flatReader: its position and its vtable's.
type flatTable struct {
	r       *flatReader
	pos, vt int64
	vtLen   int64
}

func (r *flatReader) u16(p int64) int64 {
	if p < 0 || p+2 > int64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int64(binary.LittleEndian.Uint16(r.b[p:]))
}

func (r *flatReader) u32(p int64) int64 {
	if p < 0 || p+4 > int64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int64(binary.LittleEndian.Uint32(r.b[p:]))
}

func (r *flatReader) i64(p int64) int64 {
	if p < 0 || p+8 > int64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int64(binary.LittleEndian.Uint64(r.b[p:]))
}

// tableAt returns the table at p.
func (r *flatReader) tableAt(p int64) flatTable {
	so := int64(int32(r.u32(p)))
	t := flatTable{r: r, pos: p, vt: p - so}
	t.vtLen = r.u16(t.vt)
	if r.bad {
		return flatTable{r: r}
	}
	return t
}

// slot returns the position of field i of t, or 0 when it is absent.
func (t flatTable) slot(i int) int64 {
	if t.r.bad {
		return 0
	}
	o := int64(4 + 2*i)
	if o >= t.vtLen {
		return 0
	}
	fo := t.r.u16(t.vt + o)
	if fo == 0 {
		return 0
	}
	return t.pos + fo
}

func (t flatTable) i8(i int, def int64) int64 {
	p := t.slot(i)
	if p == 0 {
		return def
	}
	if p >= int64(len(t.r.b)) {
		t.r.bad = true
		return 0
	}
	return int64(t.r.b[p])
}

func (t flatTable) i16(i int, def int64) int64 {
	p := t.slot(i)
	if p == 0 {
		return def
	}
	return int64(int16(t.r.u16(p)))
}

func (t flatTable) i32(i int, def int64) int64 {
	p := t.slot(i)
	if p == 0 {
		return def
	}
	return int64(int32(t.r.u32(p)))
}

func (t flatTable) i64(i int, def int64) int64 {
	p := t.slot(i)
	if p == 0 {
		return def
	}
	return t.r.i64(p)
}

// table returns the table field i of t points to.
func (t flatTable) table(i int) (flatTable, bool) {
	p := t.slot(i)
	if p == 0 {
		return flatTable{r: t.r}, false
	}
	sub := t.r.tableAt(p + t.r.u32(p))
	return sub, !t.r.bad
}

// vector returns the position of the first element of the vector field i of t points
// to, and its length, every element of size bytes in bounds.
func (t flatTable) vector(i int, size int64) (start, n int64) {
	p := t.slot(i)
	if p == 0 {
		return 0, 0
	}
	at := p + t.r.u32(p)
	n = t.r.u32(at)
	start = at + 4
	if t.r.bad || n*size > int64(len(t.r.b))-start {
		t.r.bad = true
		return 0, 0
	}
	return start, n
}

// bytes returns the string or byte vector of field i.
func (t flatTable) bytes(i int) []byte {
	start, n := t.vector(i, 1)
	if n == 0 {
		return nil
	}
	return t.r.b[start : start+n]
}

// tables returns the tables of the vector of tables of field i.
func (t flatTable) tables(i int) []flatTable {
	start, n := t.vector(i, 4)
	out := make([]flatTable, 0, n)
	for j := int64(0); j < n && !t.r.bad; j++ {
		e := start + 4*j
		out = append(out, t.r.tableAt(e+t.r.u32(e)))
	}
	return out
}

// keyValues checks the vector of KeyValue tables (custom metadata) of field i of t.
func (r *flatReader) keyValues(t flatTable, i int) {
	for _, kv := range t.tables(i) {
		kv.bytes(0)
		kv.bytes(1)
	}
}

// message reads the root Message table: its header's type and table and its body's
// length. A message of a metadata version before V4 is bad.
func (r *flatReader) message() (typ int64, header flatTable, bodyLen int64) {
	m := r.tableAt(r.u32(0))
	if v := m.i16(0, 0); v < 3 { // MetadataVersion V4
		r.bad = true
	}
	typ = m.i8(1, 0)
	header, ok := m.table(2)
	if !ok {
		r.bad = true
	}
	bodyLen = m.i64(3, 0)
	r.keyValues(m, 4)
	return typ, header, bodyLen
}
