//go:build unix

package sqliteplane

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkKeyCost prices what a concurrency key adds to one job's start and end on this
// plane (issue 27: the burn-down with keys at 76 % of the one without; docs/benchmarks.md
// says where the rest goes). Each iteration starts one job and succeeds it with the driver's
// own batched statements (runRowsSQL, ackRowsSQL; one row each), 32 jobs a transaction, as
// the writer's group commit does, but committed without fsync (synchronous=OFF: a commit's
// fsync costs the same with keys or without, and its wait would drown the rest); no claim
// read, so what is left is the statements' own work: the triggers, the indexes and the
// pages written to the WAL.
//
// Each sub-benchmark builds its own file, through the driver: b.N jobs of queue "keyed"
// (100 concurrency keys, limit 4, submitted round robin, started in that order: the keys'
// turns) and b.N of queue "unkeyed"; it starts the jobs of one queue, "keyed/…" after
// dropping one part of the keyed machinery, to price it:
//
//	unkeyed                 the unkeyed jobs
//	keyed                   the keyed jobs, the schema as migrated
//	keyed/no-start-trigger  without invocations_keyed_claim (the start's counter update and turn)
//	keyed/no-triggers       without it and invocations_keyed_end (the end's counter update)
//	keyed/no-ready-index    without concurrency_keys_ready (the ready keys in turn order)
//	keyed/no-key-index      without invocations_keyed_priority (a key's claimable jobs)
//
// The variants without a part count wrongly; they are prices, not alternatives. There is
// no variant without the end's trigger alone: its keys' running counts would only grow,
// every key would sit at its limit after four starts, out of concurrency_keys_ready, and the
// starts would stop moving that index's entries too, so it would price both. Besides
// ns/op (wall time) each reports cpu-ns/op, the process's CPU time (user and system) per
// job: the machine is shared, and CPU time moves less than wall time with the load. Run
// with a fixed count (the file is built with b.N jobs a queue): -benchtime 16384x.
func BenchmarkKeyCost(b *testing.B) {
	variants := []struct{ name, queue, drop string }{
		{"unkeyed", "unkeyed", ""},
		{"keyed", "keyed", ""},
		{"keyed/no-start-trigger", "keyed", "DROP TRIGGER invocations_keyed_claim"},
		{"keyed/no-triggers", "keyed", "DROP TRIGGER invocations_keyed_end; DROP TRIGGER invocations_keyed_claim"},
		{"keyed/no-ready-index", "keyed", "DROP INDEX concurrency_keys_ready"},
		{"keyed/no-key-index", "keyed", "DROP INDEX invocations_keyed_priority"},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			path := keyCostFile(b, b.N)
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(OFF)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if v.drop != "" {
				if _, err := db.Exec(v.drop); err != nil {
					b.Fatal(err)
				}
			}
			type job struct {
				seq int64
				id  string
			}
			var jobs []job
			rs, err := db.Query(`SELECT seq, id FROM invocations WHERE queue = ? ORDER BY seq`, v.queue)
			if err != nil {
				b.Fatal(err)
			}
			for rs.Next() {
				var j job
				if err := rs.Scan(&j.seq, &j.id); err != nil {
					b.Fatal(err)
				}
				jobs = append(jobs, j)
			}
			if err := rs.Err(); err != nil {
				b.Fatal(err)
			}
			start, err := db.Prepare(runRowsSQL(1))
			if err != nil {
				b.Fatal(err)
			}
			end, err := db.Prepare(ackRowsSQL(1))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var tx *sql.Tx
			cpu := processCPU()
			b.ResetTimer()
			for i := range b.N {
				if i%32 == 0 {
					if tx, err = db.BeginTx(ctx, nil); err != nil {
						b.Fatal(err)
					}
				}
				j, token := jobs[i], "token-"+strconv.Itoa(i)
				if _, err := tx.Stmt(start).Exec(int64(1<<50), int64(1), "worker", j.seq, token); err != nil {
					b.Fatal(err)
				}
				rs, err := tx.Stmt(end).Query(int64(2), j.id, token, []byte{0xc0})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rs.Next() {
					n++
				}
				if err := rs.Close(); err != nil || n != 1 {
					b.Fatalf("end of %s: %d rows, %v", j.id, n, err)
				}
				if i%32 == 31 || i == b.N-1 {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// keyCostFile builds BenchmarkKeyCost's file: n claimable jobs in queue "keyed" under 100
// concurrency keys (limit 4) and n in queue "unkeyed", through the driver.
func keyCostFile(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "keycost.db")
	ctx := context.Background()
	d, err := Open(ctx, path, &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "keyed",
		Admission: plane.Admission{ConcurrencyLimit: 4}}); err != nil {
		b.Fatal(err)
	}
	batch := make([]plane.SubmitParams, 1000)
	for _, queue := range []string{"keyed", "unkeyed"} {
		for done := 0; done < n; done += len(batch) {
			k := min(len(batch), n-done)
			for i := range batch[:k] {
				batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
				if queue == "keyed" {
					batch[i].ConcurrencyKey = "tenant-" + strconv.Itoa((done+i)%100)
				}
			}
			if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue, Invocations: batch[:k]}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return path
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
