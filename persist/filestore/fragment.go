package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// A fragment is an immutable Parquet file in {queue}/data/. Row fragments hold new
// samples: columns _index (int64, ascending), _partition (string) and one nullable
// column per schema field. Field fragments hold fields added to existing samples:
// _index, _seq (the tail sequence number that orders updates; the highest wins) and the
// updated fields. Each column carries its Kind in the field metadata (lakeshore.kind)
// and the file's key-value metadata holds lakeshore.kinds, a JSON object of field → kind.

// Fragment kinds (fragments.kind).
const (
	fragRows   = 0
	fragFields = 1
)

// fragmentRowGroupBytes bounds the uncompressed size of one row group, so that fragments
// of large tensors keep row groups (and memory while writing and reading) bounded.
const fragmentRowGroupBytes = 64 << 20

// fragRow is one row to write into a fragment.
type fragRow struct {
	idx  int64
	part string // row fragments
	seq  int64  // field fragments
	rec  record.NormRecord
}

// syncFile fsyncs before it closes, so that the Parquet writer's Close makes the file durable.
type syncFile struct{ *os.File }

// Close fsyncs and closes the file.
func (f syncFile) Close() error {
	if err := f.File.Sync(); err != nil {
		f.File.Close()
		return fmt.Errorf("fsync fragment: %w", err)
	}
	return f.File.Close()
}

// fragmentSchema returns the Arrow schema of a fragment of kind with the given fields.
func fragmentSchema(kind int, fields []persist.Field) *arrow.Schema {
	cols := []arrow.Field{{Name: record.ColIndex, Type: arrow.PrimitiveTypes.Int64}}
	fk := "rows"
	if kind == fragRows {
		cols = append(cols, arrow.Field{Name: record.ColPartition, Type: arrow.BinaryTypes.String})
	} else {
		fk = "fields"
		cols = append(cols, arrow.Field{Name: record.ColSeq, Type: arrow.PrimitiveTypes.Int64})
	}
	for _, f := range fields {
		cols = append(cols, record.ArrowField(f))
	}
	md := arrow.NewMetadata([]string{record.MetaFragmentKey}, []string{fk})
	return arrow.NewSchema(cols, &md)
}

// fragmentFile is a fragment being written: records go to path+".tmp"; commit
// fsyncs, renames to path and fsyncs the directory; abort removes the temporary file.
type fragmentFile struct {
	path string
	fw   *pqarrow.FileWriter
	sc   *arrow.Schema
}

func createFragment(path string, kind int, fields []persist.Field, rowGroupRows int) (*fragmentFile, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create fragment: %w", err)
	}
	fw, sc, err := newFragmentWriter(syncFile{f}, kind, fields, rowGroupRows)
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &fragmentFile{path: path, fw: fw, sc: sc}, nil
}

// newFragmentWriter starts a fragment of kind with fields on w: the file store's format
// (Snappy, statistics, dictionary-encoded partitions, rowGroupRows rows at most per
// row group, each column's kind in its metadata, lakeshore.kinds in the file's). On an
// error w is closed.
func newFragmentWriter(w io.WriteCloser, kind int, fields []persist.Field, rowGroupRows int) (*pqarrow.FileWriter, *arrow.Schema, error) {
	sc := fragmentSchema(kind, fields)
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor(record.ColPartition, true),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithStats(true),
	)
	fw, err := pqarrow.NewFileWriter(sc, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("create fragment writer: %w", err)
	}
	kinds := map[string]persist.Kind{}
	for _, fl := range fields {
		kinds[fl.Name] = fl.Kind
	}
	kj, _ := json.Marshal(kinds)
	if err := fw.AppendKeyValueMetadata("lakeshore.kinds", string(kj)); err != nil {
		fw.Close()
		return nil, nil, fmt.Errorf("write fragment metadata: %w", err)
	}
	return fw, sc, nil
}

// write adds rec as one row group.
func (ff *fragmentFile) write(rec arrow.RecordBatch) error {
	if err := ff.fw.Write(rec); err != nil {
		return fmt.Errorf("write fragment: %w", err)
	}
	return nil
}

func (ff *fragmentFile) abort() {
	ff.fw.Close()
	os.Remove(ff.path + ".tmp")
}

// commit makes the file durable under its final name and returns its size in bytes.
func (ff *fragmentFile) commit() (int64, error) {
	tmp := ff.path + ".tmp"
	if err := ff.fw.Close(); err != nil { // fsyncs and closes the file (syncFile)
		os.Remove(tmp)
		return 0, fmt.Errorf("close fragment: %w", err)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return 0, fmt.Errorf("stat fragment: %w", err)
	}
	if err := os.Rename(tmp, ff.path); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("rename fragment: %w", err)
	}
	if err := syncDir(filepath.Dir(ff.path)); err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// writeFragment writes rows (sorted by idx, then seq) into a new fragment at path
// (temporary name, fsync, rename, fsync directory) and returns its size in bytes.
func writeFragment(path string, kind int, fields []persist.Field, rows []fragRow, rowGroupRows int) (int64, error) {
	ff, err := createFragment(path, kind, fields, rowGroupRows)
	if err != nil {
		return 0, err
	}
	if err := writeFragmentRows(ff.fw, ff.sc, kind, fields, rows, rowGroupRows); err != nil {
		ff.abort()
		return 0, err
	}
	return ff.commit()
}

// writeFragmentRows writes rows to fw (of schema sc, fragmentSchema of kind and fields) in row
// groups of at most rowGroupRows rows and fragmentRowGroupBytes bytes.
func writeFragmentRows(fw *pqarrow.FileWriter, sc *arrow.Schema, kind int, fields []persist.Field, rows []fragRow, rowGroupRows int) error {
	pos := make(map[string]int, len(fields))
	for i, fl := range fields {
		pos[fl.Name] = i
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	set := make([]bool, len(fields))
	var bytes int
	n := 0
	writeChunk := func() error {
		if n == 0 {
			return nil
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		n, bytes = 0, 0
		if err := fw.Write(rec); err != nil {
			return fmt.Errorf("write fragment: %w", err)
		}
		return nil
	}
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.idx)
		if kind == fragRows {
			b.Field(1).(*array.StringBuilder).Append(r.part)
		} else {
			b.Field(1).(*array.Int64Builder).Append(r.seq)
		}
		clear(set)
		for _, fv := range r.rec {
			p, ok := pos[fv.Name]
			if !ok {
				continue
			}
			set[p] = true
			want := fields[p].Kind
			record.AppendValue(b.Field(2+p), want, record.ConvertValue(fv.Val, fv.Kind, want))
			bytes += valueBytes(fv.Val)
		}
		for p, ok := range set {
			if !ok {
				b.Field(2 + p).AppendNull()
			}
		}
		n++
		bytes += 16
		if n >= rowGroupRows || bytes >= fragmentRowGroupBytes {
			if err := writeChunk(); err != nil {
				return err
			}
		}
	}
	return writeChunk()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open data directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync data directory: %w", err)
	}
	return nil
}

func valueBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	case record.CodecValue:
		return len(x.Bytes)
	case []int64:
		return 8 * len(x)
	case []float64:
		return 8 * len(x)
	case persist.Tensor:
		return len(x.Data) + 8*len(x.Shape) + len(x.DType)
	}
	return 8
}

// fragHandle is an open fragment.
type fragHandle struct {
	name   string
	f      *os.File
	fr     *pqarrow.FileReader
	leaves map[string][]int        // top-level column → its leaf column indexes
	kinds  map[string]persist.Kind // field → kind as written
	rgMin  []int64                 // per row group: min and max _index, and row count
	rgMax  []int64
	rgRows []int64
}

func openFragment(path string) (*fragHandle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	pr, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: read fragment %s: %v", persist.ErrCorrupt, filepath.Base(path), err)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: read fragment %s: %v", persist.ErrCorrupt, filepath.Base(path), err)
	}
	h := &fragHandle{name: filepath.Base(path), f: f, fr: fr, leaves: map[string][]int{}, kinds: map[string]persist.Kind{}}
	for _, sf := range fr.Manifest.Fields {
		var leaves []int
		var walk func(s *pqarrow.SchemaField)
		walk = func(s *pqarrow.SchemaField) {
			if s.IsLeaf() {
				leaves = append(leaves, s.ColIndex)
			}
			for i := range s.Children {
				walk(&s.Children[i])
			}
		}
		walk(&sf)
		h.leaves[sf.Field.Name] = leaves
		if k, ok := sf.Field.Metadata.GetValue(record.MetaKind); ok {
			h.kinds[sf.Field.Name] = persist.Kind(k)
		}
	}
	md := pr.MetaData()
	for i := 0; i < md.NumRowGroups(); i++ {
		rg := md.RowGroup(i)
		h.rgRows = append(h.rgRows, rg.NumRows())
		cc, err := rg.ColumnChunk(0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: fragment %s row group %d: %v", persist.ErrCorrupt, h.name, i, err)
		}
		st, err := cc.Statistics()
		is, ok := st.(*metadata.Int64Statistics)
		if err != nil || !ok || !is.HasMinMax() {
			f.Close()
			return nil, fmt.Errorf("%w: fragment %s row group %d has no _index statistics", persist.ErrCorrupt, h.name, i)
		}
		h.rgMin = append(h.rgMin, is.Min())
		h.rgMax = append(h.rgMax, is.Max())
	}
	return h, nil
}

func (h *fragHandle) close() { h.f.Close() }

// fragCache keeps open fragment handles and decoded column chunks of immutable
// fragments, bounded by bytes: the least recently used chunks are dropped first (an
// unbounded-count simplelru.LRU of hashicorp/golang-lru, trimmed by size).
type fragCache struct {
	dir      string
	mu       sync.Mutex // guards everything below; simplelru is not safe for concurrent use
	handles  map[string]*fragHandle
	chunks   *simplelru.LRU[chunkKey, *chunkEntry]
	bytes    int64
	maxBytes int64
}

type chunkKey struct {
	file  string
	rg    int
	field string
}

type chunkEntry struct {
	arr  arrow.Array
	size int64
}

func newFragCache(dir string, maxBytes int64) *fragCache {
	c := &fragCache{dir: dir, handles: map[string]*fragHandle{}, maxBytes: maxBytes}
	// The size bound is by bytes (below), so the count bound is never reached.
	c.chunks, _ = simplelru.NewLRU[chunkKey, *chunkEntry](math.MaxInt, func(_ chunkKey, e *chunkEntry) {
		c.bytes -= e.size
		e.arr.Release()
	})
	return c
}

// errFragmentGone reports a fragment file that disappeared (compacted away after the
// reader's snapshot); the read retries with a new snapshot.
var errFragmentGone = errors.New("fragment file gone")

func (c *fragCache) handle(name string) (*fragHandle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.handles[name]; ok {
		return h, nil
	}
	h, err := openFragment(filepath.Join(c.dir, name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", errFragmentGone, name)
		}
		return nil, err
	}
	c.handles[name] = h
	return h, nil
}

// forget closes and drops everything cached for fragment files not in live.
func (c *fragCache) forget(live map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, h := range c.handles {
		if !live[name] {
			h.close()
			delete(c.handles, name)
		}
	}
	for _, k := range c.chunks.Keys() {
		if !live[k.file] {
			c.chunks.Remove(k)
		}
	}
}

func (c *fragCache) close() {
	c.forget(nil)
}

// drop closes and forgets the handles and chunks of the named fragments.
func (c *fragCache) drop(names []string) {
	gone := map[string]bool{}
	for _, n := range names {
		gone[n] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, h := range c.handles {
		if gone[name] {
			h.close()
			delete(c.handles, name)
		}
	}
	for _, k := range c.chunks.Keys() {
		if gone[k.file] {
			c.chunks.Remove(k)
		}
	}
}

// readColumn reads the column field of row group rg of fragment h, uncached: one array
// the caller owns (and releases), or nil when the fragment has no such column.
func readColumn(ctx context.Context, h *fragHandle, rg int, field string) (arrow.Array, error) {
	leaves, ok := h.leaves[field]
	if !ok {
		return nil, nil
	}
	tbl, err := h.fr.ReadRowGroups(ctx, leaves, []int{rg})
	if err != nil {
		return nil, fmt.Errorf("%w: read %s of fragment %s: %v", persist.ErrCorrupt, field, h.name, err)
	}
	defer tbl.Release()
	chunks := tbl.Column(0).Data().Chunks()
	if len(chunks) == 1 {
		chunks[0].Retain()
		return chunks[0], nil
	}
	arr, err := array.Concatenate(chunks, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("read %s of fragment %s: %w", field, h.name, err)
	}
	return arr, nil
}

// column returns the decoded column field of row group rg of fragment h. The array is
// shared: callers must not release it, but may Retain or slice it.
func (c *fragCache) column(ctx context.Context, h *fragHandle, rg int, field string) (arrow.Array, error) {
	key := chunkKey{h.name, rg, field}
	c.mu.Lock()
	if e, ok := c.chunks.Get(key); ok {
		c.mu.Unlock()
		return e.arr, nil
	}
	c.mu.Unlock()
	arr, err := readColumn(ctx, h, rg, field)
	if arr == nil || err != nil {
		return nil, err
	}
	size := arraySize(arr.Data())
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.chunks.Get(key); ok { // another reader won the race
		arr.Release()
		return e.arr, nil
	}
	c.chunks.Add(key, &chunkEntry{arr: arr, size: size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		if oldest, _, ok := c.chunks.GetOldest(); !ok || oldest == key {
			break // the chunk just read stays, however large
		}
		c.chunks.RemoveOldest()
	}
	return arr, nil
}

func arraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, ch := range d.Children() {
		n += arraySize(ch)
	}
	return n
}

// locate finds the positions of sorted indexes idx in fragment h: for each i, rg[i] and
// row[i] (row within the row group), or rg[i] = -1 if the fragment lacks idx[i]. For a
// field fragment, which may hold one index more than once, every occurrence is visited
// through visit instead.
func (c *fragCache) locate(ctx context.Context, h *fragHandle, idx []int64, visit func(i int, rg int, row int) error) error {
	for rg := range h.rgRows {
		lo, hi := h.rgMin[rg], h.rgMax[rg]
		start := sort.Search(len(idx), func(i int) bool { return idx[i] >= lo })
		if start == len(idx) || idx[start] > hi {
			continue
		}
		arr, err := c.column(ctx, h, rg, record.ColIndex)
		if err != nil {
			return err
		}
		ix := arr.(*array.Int64).Int64Values()
		if n := len(ix); n > 0 && ix[n-1]-ix[0] == int64(n-1) {
			// Dense row group (the common case: consecutive indexes, no duplicates):
			// the row of index x is x - ix[0].
			for i := start; i < len(idx) && idx[i] <= hi; i++ {
				if err := visit(i, rg, int(idx[i]-ix[0])); err != nil {
					return err
				}
			}
			continue
		}
		// Merge-walk the two sorted lists.
		r := sort.Search(len(ix), func(r int) bool { return ix[r] >= idx[start] })
		for i := start; i < len(idx) && idx[i] <= hi && r < len(ix); {
			switch {
			case ix[r] < idx[i]:
				r++
			case ix[r] > idx[i]:
				i++
			default:
				if err := visit(i, rg, r); err != nil {
					return err
				}
				// Visit duplicates of the same index (field fragments), then move on.
				r2 := r + 1
				for r2 < len(ix) && ix[r2] == idx[i] {
					if err := visit(i, rg, r2); err != nil {
						return err
					}
					r2++
				}
				i++
			}
		}
	}
	return nil
}
