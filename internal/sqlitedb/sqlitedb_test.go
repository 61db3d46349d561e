package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/stretchr/testify/require"
)

var schema = fstest.MapFS{
	"001_items.sql": {Data: []byte(`CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE);`)},
	"002_more.sql":  {Data: []byte(`ALTER TABLE items ADD COLUMN n INTEGER NOT NULL DEFAULT 0;`)},
}

type tx struct {
	ctx     context.Context
	writes  int
	flushed bool
}

func open(t *testing.T, path string) (*DB, *Writer[*tx], *planekit.Hub, *[]bool) {
	t.Helper()
	ctx := context.Background()
	db, err := Open(path, nil)
	require.NoError(t, err)
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	require.NoError(t, Migrate(ctx, conn, schema))
	hub := planekit.NewHub()
	var mu sync.Mutex
	ends := &[]bool{}
	w, err := NewWriter(ctx, WriterConfig[*tx]{
		Logger:  slog.New(slog.DiscardHandler),
		Conn:    conn,
		Begin:   func(ctx context.Context) *tx { return &tx{ctx: ctx} },
		Flush:   func(x *tx) error { x.flushed = true; return nil },
		End:     func(x *tx, ok bool) { mu.Lock(); *ends = append(*ends, ok); mu.Unlock() },
		Foreign: func(err error) { hub.NotifyAll() },
		Waiting: hub.Waiting,
	})
	require.NoError(t, err)
	go w.Run()
	t.Cleanup(func() {
		w.Stop()
		<-w.Stopped()
		require.NoError(t, db.Close())
	})
	return db, w, hub, ends
}

func TestOpenRefusesBadPaths(t *testing.T) {
	_, err := Open("", nil)
	var pe *PathError
	require.ErrorAs(t, err, &pe)
	_, err = Open(filepath.Join(t.TempDir(), "missing", "x.db"), nil)
	require.ErrorAs(t, err, &pe)
	require.Contains(t, pe.Error(), "directory must exist")
	_, err = Open(filepath.Join(t.TempDir(), "x.db"), &Options{Synchronous: "OFF"})
	require.ErrorIs(t, err, ErrSynchronous)
}

// TestConcurrentOpensOfANewFile: processes that open a new file at once (a worker and a
// submit started together on a fresh plane) all open it, migrate it and read it. SQLite
// does not call the busy handler for the switch to WAL, which the data source name ran as
// each connection connected, so an opener could fail at once with SQLITE_BUSY (database is
// locked), whatever the busy timeout: one round of two openers in about fifty, and five
// runs of this test in six before the fix.
func TestConcurrentOpensOfANewFile(t *testing.T) {
	t.Parallel()
	const rounds, openers = 100, 8
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "new.db")
		errs := make(chan error, openers)
		for range openers {
			go func() {
				errs <- func() error {
					db, err := Open(path, nil)
					if err != nil {
						return err
					}
					defer db.Close()
					ctx := context.Background()
					conn, err := db.Write.Conn(ctx)
					if err != nil {
						return fmt.Errorf("connect: %w", err)
					}
					defer conn.Close()
					if err := Migrate(ctx, conn, schema); err != nil {
						return err
					}
					var journal string
					if err := db.Read.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
						return fmt.Errorf("read: %w", err)
					}
					if journal != "wal" {
						return fmt.Errorf("journal mode %q", journal)
					}
					return nil
				}()
			}()
		}
		for range openers {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
}

func TestFileIsWALFull(t *testing.T) {
	db, w, _, _ := open(t, filepath.Join(t.TempDir(), "x.db"))
	var journal string
	var sync int
	require.NoError(t, w.Do(context.Background(), func(x *tx) error {
		return nil
	}))
	require.NoError(t, db.Read.QueryRow("PRAGMA journal_mode").Scan(&journal))
	require.Equal(t, "wal", journal)
	require.NoError(t, db.Read.QueryRow("PRAGMA synchronous").Scan(&sync))
	require.Equal(t, 2, sync) // FULL
	_, err := db.Read.Exec("INSERT INTO items (v) VALUES ('x')")
	require.Error(t, err, "the read pool is query-only")
}

// TestOpenSwitchesARollbackJournalFile: a file in rollback-journal (DELETE) mode, as an
// older build's or the sqlite3 shell's, is in WAL mode once Open returns, seen so by the
// write handle and by every connection of the read pool (none of which names a journal
// mode since Open switches the file once), and stays so for the next Open.
func TestOpenSwitchesARollbackJournalFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "delete.db")
	old, err := Open(path, nil)
	require.NoError(t, err)
	var journal string
	require.NoError(t, old.Write.QueryRowContext(ctx, "PRAGMA journal_mode = delete").Scan(&journal))
	require.Equal(t, "delete", journal)
	_, err = old.Write.ExecContext(ctx, "CREATE TABLE items (v TEXT)")
	require.NoError(t, err)
	require.NoError(t, old.Close())

	for range 2 {
		db, err := Open(path, &Options{ReadConns: 3})
		require.NoError(t, err)
		require.NoError(t, db.Write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal))
		require.Equal(t, "wal", journal, "the write handle")
		var conns []*sql.Conn
		for i := range 3 { // every connection of the pool, each held so the next is new
			conn, err := db.Read.Conn(ctx)
			require.NoError(t, err)
			conns = append(conns, conn)
			require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal))
			require.Equal(t, "wal", journal, "read connection %d", i)
		}
		for _, conn := range conns {
			require.NoError(t, conn.Close())
		}
		require.NoError(t, db.Close())
	}
}

// TestMemoryReadersNeverWaitForTheWriter: a Memory database's reader answers while the
// writer holds an open write transaction (SQLite's memdb VFS, used before, refused every new
// reader then: under a writer that was never idle a read waited out its busy timeout and
// failed with SQLITE_BUSY), and Close removes the database's temporary directory.
func TestMemoryReadersNeverWaitForTheWriter(t *testing.T) {
	ctx := context.Background()
	db, err := Open(Memory, &Options{BusyTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	require.NoError(t, Migrate(ctx, conn, schema))
	_, err = conn.ExecContext(ctx, "INSERT INTO items (v) VALUES ('committed')")
	require.NoError(t, err)
	var journal string
	require.NoError(t, db.Read.QueryRow("PRAGMA journal_mode").Scan(&journal))
	require.Equal(t, "wal", journal)

	write, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = write.ExecContext(ctx, "INSERT INTO items (v) VALUES ('pending')")
	require.NoError(t, err)
	var n int
	require.NoError(t, db.Read.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n), "a read during an open write transaction")
	require.Equal(t, 1, n, "the reader sees the last commit, not the open transaction")
	require.NoError(t, write.Commit())
	require.NoError(t, db.Read.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n))
	require.Equal(t, 2, n)

	other, err := Open(Memory, nil)
	require.NoError(t, err)
	require.NotEqual(t, db.temporary, other.temporary, "each Memory database is private")
	require.NoError(t, other.Close())
	require.NoError(t, conn.Close())
	require.NoError(t, db.Close())
	for _, dir := range []string{db.temporary, other.temporary} {
		_, err := os.Stat(dir)
		require.True(t, os.IsNotExist(err), "Close leaves %s", dir)
	}
}

// TestMemoryOrphansRemoved: the directory of a Memory database whose process was killed
// before Close is removed by the next Open of a Memory database; a running process's is kept.
func TestMemoryOrphansRemoved(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("orphans are found through /proc")
	}
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	db, err := Open(Memory, nil)
	require.NoError(t, err)
	parent := filepath.Dir(db.temporary)
	require.NoError(t, db.Close())
	ns := pidNamespace()
	require.NotEmpty(t, ns)
	orphan := filepath.Join(parent, memoryPrefix+ns+"."+strconv.Itoa(dead.Process.Pid)+"-test")
	live := filepath.Join(parent, memoryPrefix+ns+".1-test") // pid 1 always runs
	// Another PID namespace's directory (a /dev/shm shared between containers) is never
	// judged here, whatever its pid.
	foreign := filepath.Join(parent, memoryPrefix+"1."+strconv.Itoa(dead.Process.Pid)+"-test")
	for _, dir := range []string{orphan, live, foreign} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.db"), []byte("x"), 0o600))
	}
	defer os.RemoveAll(live)
	defer os.RemoveAll(foreign)
	db, err = Open(Memory, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = os.Stat(orphan)
	require.True(t, os.IsNotExist(err), "the orphan %s is left", orphan)
	_, err = os.Stat(live)
	require.NoError(t, err, "a running process's directory is kept")
	_, err = os.Stat(foreign)
	require.NoError(t, err, "another PID namespace's directory is kept")
}

func TestWriterGroupsAndIsolatesFailures(t *testing.T) {
	for _, path := range []string{Memory, filepath.Join(t.TempDir(), "x.db")} {
		db, w, _, ends := open(t, path)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 50)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := "v" + string(rune('a'+i%26)) + string(rune('a'+i/26))
				if i == 7 {
					v = "va" + "a" // a duplicate of op 0's value: a unique violation
				}
				errs[i] = w.Do(ctx, func(x *tx) error {
					conn := w.cfg.Conn
					_, err := conn.ExecContext(x.ctx, "INSERT INTO items (v, n) VALUES (?, ?)", v, i)
					return err
				})
			}()
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		require.Equal(t, 1, failed, "only the duplicate fails: %v", errs)
		var n int
		require.NoError(t, db.Read.QueryRow("SELECT count(*) FROM items").Scan(&n))
		require.Equal(t, 49, n)
		require.Contains(t, *ends, true)
		require.Contains(t, *ends, false)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	open(t, path)
	db, err := Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Write.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, Migrate(context.Background(), conn, schema))
	var v int
	require.NoError(t, conn.QueryRowContext(context.Background(), "PRAGMA user_version").Scan(&v))
	require.Equal(t, 2, v)
}

func TestForeignCommitWakesWaiters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	_, _, hub, _ := open(t, path)
	_, other, _, _ := open(t, path) // a second "process" on the same file
	changed, release := hub.Watch("anything")
	defer release()
	require.NoError(t, other.Do(context.Background(), func(x *tx) error {
		_, err := other.cfg.Conn.ExecContext(x.ctx, "INSERT INTO items (v) VALUES ('other')")
		return err
	}))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("a commit of another connection did not wake the waiter")
	}
}

func TestTasksRunAndDoAfterStopFails(t *testing.T) {
	ctx := context.Background()
	db, err := Open(Memory, nil)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	ran := make(chan struct{}, 10)
	w, err := NewWriter(ctx, WriterConfig[*tx]{
		Logger: slog.New(slog.DiscardHandler),
		Conn:   conn,
		Begin:  func(ctx context.Context) *tx { return &tx{ctx: ctx} },
		Tasks: []Task[*tx]{{Name: "tick", Interval: time.Millisecond, Apply: func(*tx) error {
			select {
			case ran <- struct{}{}:
			default:
			}
			return nil
		}}},
	})
	require.NoError(t, err)
	go w.Run()
	<-ran
	<-ran
	w.Stop()
	<-w.Stopped()
	require.True(t, errors.Is(w.Do(ctx, func(*tx) error { return nil }), ErrClosed))
}

func TestAlarmRunsWhenAsked(t *testing.T) {
	ctx := context.Background()
	db, err := Open(Memory, nil)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	ran := make(chan time.Time, 10)
	var w *Writer[*tx]
	asks := 0
	w, err = NewWriter(ctx, WriterConfig[*tx]{
		Logger: slog.New(slog.DiscardHandler),
		Conn:   conn,
		Begin:  func(ctx context.Context) *tx { return &tx{ctx: ctx} },
		Alarm:  func(*tx) error { ran <- time.Now(); return nil },
		AlarmIn: func() (time.Duration, bool) {
			asks++ // the writer's goroutine only
			switch asks {
			case 1:
				return -1, true // at start: no alarm
			case 2:
				return 50 * time.Millisecond, true // after the first Do
			default:
				return 0, false // leave it: it must not fire again
			}
		},
	})
	require.NoError(t, err)
	go w.Run()
	defer func() { w.Stop(); <-w.Stopped() }()
	start := time.Now()
	require.NoError(t, w.Do(ctx, func(*tx) error { return nil }))
	select {
	case at := <-ran:
		require.GreaterOrEqual(t, at.Sub(start), 40*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("the alarm did not run")
	}
	select {
	case <-ran:
		t.Fatal("the alarm ran twice")
	case <-time.After(150 * time.Millisecond):
	}
}

// With WriterConfig.Savepoint, a failing operation of a batch undoes only its own writes
// and state, is answered alone, and no operation runs twice.
func TestWriterSavepointIsolatesOneOperation(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "x.db"), nil)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	require.NoError(t, Migrate(ctx, conn, schema))
	var undone, flushedWrites, commits int // the writer's goroutine only; read after Stopped
	w, err := NewWriter(ctx, WriterConfig[*tx]{
		Logger: slog.New(slog.DiscardHandler),
		Conn:   conn,
		Begin:  func(ctx context.Context) *tx { return &tx{ctx: ctx} },
		Flush:  func(x *tx) error { flushedWrites += x.writes; return nil },
		End: func(x *tx, ok bool) {
			if ok {
				commits++
			}
		},
		Savepoint: func(x *tx) (func(), error) {
			writes := x.writes
			return func() { x.writes = writes; undone++ }, nil
		},
	})
	require.NoError(t, err)
	go w.Run()
	const n = 40
	runs := make([]int, n) // written by the writer's goroutine; read after wg.Wait
	for round := 0; ; round++ {
		require.Less(t, round, 20, "the failing operation never shared a batch")
		clear(runs)
		undoneBefore := undone
		// The value op 7 inserts is taken before the round (not by another op of the batch,
		// whose order in it is not fixed: op 7 ran first once, and op 0 failed instead).
		taken := fmt.Sprintf("r%d-taken", round)
		require.NoError(t, w.Do(ctx, func(x *tx) error {
			x.writes++
			_, err := w.cfg.Conn.ExecContext(x.ctx, "INSERT INTO items (v, n) VALUES (?, ?)", taken, -1)
			return err
		}))
		var started sync.WaitGroup
		started.Add(n)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			// Hold the writer until the others wait for it, so they form one batch.
			require.NoError(t, w.Do(ctx, func(*tx) error { <-gate; return nil }))
		})
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				started.Done()
				errs[i] = w.Do(ctx, func(x *tx) error {
					runs[i]++
					v := fmt.Sprintf("r%d-%d", round, i)
					if i == 7 {
						v = taken // a unique violation
					}
					x.writes++
					_, err := w.cfg.Conn.ExecContext(x.ctx, "INSERT INTO items (v, n) VALUES (?, ?)", v, i)
					return err
				})
			})
		}
		started.Wait()
		time.Sleep(20 * time.Millisecond) // only helps them reach the writer; nothing below depends on it
		close(gate)
		wg.Wait()
		for i, err := range errs {
			require.Equal(t, 1, runs[i], "op %d ran %d times", i, runs[i])
			if i == 7 {
				require.Error(t, err)
			} else {
				require.NoError(t, err, "op %d", i)
			}
		}
		if undone > undoneBefore {
			break // op 7 failed inside a batch, in its savepoint
		}
	}
	w.Stop()
	<-w.Stopped()
	var rows int
	require.NoError(t, db.Read.QueryRow("SELECT count(*) FROM items").Scan(&rows))
	require.Equal(t, rows, flushedWrites, "the undo restored the failed operation's state")
	require.Positive(t, commits)
}

// A file migrated by a newer build (a user_version past this build's migrations) is refused
// before anything is written: an older binary must not run its statements against tables
// and triggers it does not know (a downgrade). Before, Migrate skipped every migration and
// the old build wrote to the newer schema.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	open(t, path) // migrated to 2 by the full schema
	db, err := Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Write.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	older := fstest.MapFS{"001_items.sql": schema["001_items.sql"]}
	err = Migrate(ctx, conn, older)
	require.ErrorIs(t, err, ErrSchemaNewer)
	var newer *SchemaNewerError
	require.ErrorAs(t, err, &newer)
	require.Equal(t, 2, newer.Have)
	require.Equal(t, 1, newer.Known)
	require.Contains(t, err.Error(), "version 2")
	require.Contains(t, err.Error(), "up to 1")
	var v int
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v))
	require.Equal(t, 2, v)
}
