//go:build unix

package sqliteplane

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
//	keyed/cursor            a trial key index that the starts leave alone (keyCursorSchema)
//	unkeyed/read            unkeyed, each start after the claim's read of the head (claimFIFO's)
//	keyed/read              keyed, each start after the claim's read of the ready key and its
//	                        head (keyReadyHeadSQL, fifo, one priority level)
//	keyed/cursor/read       keyed/cursor, each start after that read past the key's cursor
//	                        (keyCursorHeadSQL)
//
// The "read" variants check that the head read is the job started next (the keys' turns
// and the submits' round robin agree). The variants without a part count wrongly; they are
// prices, not alternatives, and keyed/cursor is a trial (keyCursorSchema says what it lacks). There is
// no variant without the end's trigger alone: its keys' running counts would only grow,
// every key would sit at its limit after four starts, out of concurrency_keys_ready, and the
// starts would stop moving that index's entries too, so it would price both. Besides
// ns/op (wall time) each reports cpu-ns/op, the process's CPU time (user and system) per
// job: the machine is shared, and CPU time moves less than wall time with the load;
// written-B/op, the bytes the process handed to write calls per job (the WAL's frames and
// the checkpoints' copies); and trim-cpu-ns/op, the CPU time per job of deleting the ended
// jobs afterwards as the maintenance pass's trim does (not in cpu-ns/op). Run with a fixed
// count (the file is built with b.N jobs a queue): -benchtime 16384x.
func BenchmarkKeyCost(b *testing.B) {
	variants := []struct{ name, queue, drop, head string }{
		{"unkeyed", "unkeyed", "", ""},
		{"keyed", "keyed", "", ""},
		{"keyed/no-start-trigger", "keyed", "DROP TRIGGER invocations_keyed_claim", ""},
		{"keyed/no-triggers", "keyed", "DROP TRIGGER invocations_keyed_end; DROP TRIGGER invocations_keyed_claim", ""},
		{"keyed/no-ready-index", "keyed", "DROP INDEX concurrency_keys_ready", ""},
		{"keyed/no-key-index", "keyed", "DROP INDEX invocations_keyed_priority", ""},
		{"keyed/cursor", "keyed", keyCursorSchema, ""},
		{"unkeyed/read", "unkeyed", "", `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY id LIMIT 1`},
		{"keyed/read", "keyed", "", keyReadyHeadSQL("id", true)},
		{"keyed/cursor/read", "keyed", keyCursorSchema, keyCursorHeadSQL()},
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
			var head *sql.Stmt
			if v.head != "" {
				if head, err = db.Prepare(v.head); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			var tx *sql.Tx
			cpu, written := processCPU(), processWritten()
			b.ResetTimer()
			for i := range b.N {
				if i%32 == 0 {
					if tx, err = db.BeginTx(ctx, nil); err != nil {
						b.Fatal(err)
					}
				}
				j, token := jobs[i], "token-"+strconv.Itoa(i)
				if head != nil {
					if seq := keyCostHead(b, tx.Stmt(head), v.queue); seq != j.seq {
						b.Fatalf("head %d read, %d expected", seq, j.seq)
					}
				}
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
			b.ReportMetric(float64(processWritten()-written)/float64(b.N), "written-B/op")
			// The trim of the ended jobs, as the maintenance pass's (maintain.go: trim, one
			// DELETE by seq a row, 1,000 a transaction): under keyed/cursor it also drops
			// the jobs' entries of the key index, which the starts left.
			b.StopTimer()
			trim, err := db.Prepare(`DELETE FROM invocations WHERE seq = ?`)
			if err != nil {
				b.Fatal(err)
			}
			cpu = processCPU()
			for i := range b.N {
				if i%1000 == 0 {
					if tx, err = db.BeginTx(ctx, nil); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := tx.Stmt(trim).Exec(jobs[i].seq); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 || i == b.N-1 {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "trim-cpu-ns/op")
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
	if _, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "keyed",
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

// processWritten is the bytes the process has handed to write calls so far (wchar of
// /proc/self/io: the WAL's frames and the checkpoints' pages; 0 where it cannot be read).
func processWritten() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// keyCursorSchema is BenchmarkKeyCost's keyed/cursor: a trial of a key index whose entries a
// start and an end leave alone (issue 27, docs/benchmarks.md "A key index the starts leave
// alone, priced"). invocations_keyed_priority holds every keyed row, whatever its state,
// so its predicate names no column a start or an end writes; each key's counter row keeps
// a cursor (the priority and id of the key's last start), which the start's trigger writes
// in the row it rewrites anyway, and a head read seeks past it (keyCursorHeadSQL). The
// entries go when the rows do (the trim). A trial only: a requeued or newly submitted job
// ahead of the cursor would have to move it back, which these triggers do not do.
const keyCursorSchema = `DROP INDEX invocations_keyed_priority;
CREATE INDEX invocations_keyed_priority ON invocations (namespace, queue, concurrency_key, priority DESC, id) WHERE concurrency_key IS NOT NULL;
ALTER TABLE concurrency_keys ADD COLUMN cursor_priority REAL NOT NULL DEFAULT 0;
ALTER TABLE concurrency_keys ADD COLUMN cursor_id TEXT NOT NULL DEFAULT '';
DROP TRIGGER invocations_keyed_claim;
CREATE TRIGGER invocations_keyed_claim AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = -2 AND new.state = 1
BEGIN
    UPDATE concurrency_keys SET queued = queued - 1, running = running + 1, pass = pass + 1.0 / weight, joined = 0, turn_at = new.seq,
        cursor_priority = new.priority, cursor_id = new.id
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
END;`

// keyCursorHeadSQL is keyReadyHeadSQL("id", true) under keyCursorSchema: the head is the
// first claimable entry past the key's cursor.
func keyCursorHeadSQL() string {
	s := keyReadyHeadSQL("id", true)
	s = strings.Replace(s, "SELECT concurrency_key, tokens, tokens_ms, priority_low, priority_high FROM",
		"SELECT concurrency_key, tokens, tokens_ms, priority_low, priority_high, cursor_id FROM", 1)
	s = strings.Replace(s, "AND state = -2 AND priority = k.priority_low",
		"AND priority = k.priority_low AND id > k.cursor_id AND state = -2", 1)
	return s
}

// keyCostHead runs a head read of BenchmarkKeyCost and returns the seq of the row it read.
func keyCostHead(b *testing.B, head *sql.Stmt, queue string) int64 {
	b.Helper()
	rs, err := head.Query("default", queue, int64(1<<50))
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	columns, err := rs.Columns()
	if err != nil {
		b.Fatal(err)
	}
	if !rs.Next() {
		b.Fatalf("no head: %v", rs.Err())
	}
	values := make([]any, len(columns))
	var seq int64
	values[0] = &seq
	for i := 1; i < len(values); i++ {
		values[i] = new(sql.RawBytes)
	}
	if err := rs.Scan(values...); err != nil {
		b.Fatal(err)
	}
	return seq
}
