package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newDataExportCmd(a *app, o *dataOpts) *cobra.Command {
	var partition string
	var rowsPerFile int
	cmd := &cobra.Command{
		Use:   "export QUEUE DIR",
		Short: "Write a data queue's records as Parquet files (field updates merged, cleared records left out)",
		Args:  exactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			if rowsPerFile < 1 {
				return plane.Invalid("--rows-per-file", rowsPerFile, "use a number of records per file ≥ 1 (default 1000000)")
			}
			return a.withData(c, o, args[0], func(q *persist.Queue) error {
				files, n, err := exportParquet(c.Context(), q, args[1], partition, rowsPerFile)
				if err != nil {
					return err
				}
				if a.json {
					if files == nil {
						files = []string{}
					}
					return a.printJSON(map[string]any{"records": n, "files": files})
				}
				for _, f := range files {
					fmt.Fprintln(a.stdout, f)
				}
				_, err = fmt.Fprintf(a.stderr, "exported %s into %s\n", countOf(int(n), "record"), countOf(len(files), "file"))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "only this partition (default: all)")
	cmd.Flags().IntVar(&rowsPerFile, "rows-per-file", 1_000_000, "records per Parquet file")
	positive(cmd, "rows-per-file")
	return cmd
}

// countOf is n and noun, plural unless n is 1: "1 file", "0 files", "3 files".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// exportParquet writes the records of q readable when it starts (index < NextIndex) into
// dir/{queue}-{n}.parquet: columns _index, _partition, then every field of the schema
// then (tensors as structs {dtype, shape, data}, codec values as wire bytes), with the
// Arrow schema stored so pyarrow restores the types. Reads merge field updates and skip
// cleared records, as every read does.
func exportParquet(ctx context.Context, q *persist.Queue, dir, partition string, rowsPerFile int) ([]string, int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, exportDirError(dir, err)
	}
	sc, err := q.Schema(ctx)
	if err != nil {
		return nil, 0, err
	}
	opts := &persist.GetOpts{Partition: partition}
	for _, f := range sc.Fields {
		opts.Fields = append(opts.Fields, f.Name)
	}
	end, err := q.NextIndex(ctx)
	if err != nil {
		return nil, 0, err
	}
	var (
		files   []string
		total   int64
		inFile  int
		fw      *pqarrow.FileWriter
		closeFw = func() error {
			if fw == nil {
				return nil
			}
			err := fw.Close()
			fw, inFile = nil, 0
			return err
		}
	)
	defer closeFw() //nolint:errcheck // closed explicitly on success
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	for offset := int64(0); offset < end; {
		limit := int(min(int64(min(8192, rowsPerFile-inFile)), end-offset))
		b, next, err := q.Store().Scan(ctx, offset, limit, opts)
		if err != nil {
			return nil, 0, err
		}
		if next <= offset {
			b.Release()
			break
		}
		offset = next
		if b.Len() == 0 {
			b.Release()
			continue
		}
		rec := persist.BatchRecord(b)
		b.Release()
		if fw == nil {
			name := filepath.Join(dir, fmt.Sprintf("%s-%05d.parquet", q.Name(), len(files)))
			f, err := os.Create(name)
			if err != nil {
				rec.Release()
				return nil, 0, exportDirError(dir, err)
			}
			fw, err = pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil {
				rec.Release()
				f.Close()
				return nil, 0, err
			}
			files = append(files, name)
		}
		err = fw.Write(rec)
		n := rec.NumRows()
		rec.Release()
		if err != nil {
			return nil, 0, err
		}
		total += n
		inFile += int(n)
		if inFile >= rowsPerFile {
			if err := closeFw(); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := closeFw(); err != nil {
		return nil, 0, err
	}
	return files, total, nil
}

// exportDirError is the error of an export directory that cannot be made or written (a
// path through a file, /etc/passwd, a read-only directory): bad input, exit 2, naming the
// directory and the system's reason, as an unwritable --out of map is.
func exportDirError(dir string, err error) error {
	return plane.Invalid("DIR", dir, "a directory to write the Parquet files in, made if missing; this one cannot be made or written ("+pathReason(err)+")")
}
