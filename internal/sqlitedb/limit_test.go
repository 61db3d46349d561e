package sqlitedb

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// reprepares runs query (one integer parameter, the row bound) five times on one prepared
// statement, binding 1, 2, 3, 1, 2, and returns how often SQLite prepared it again
// (SQLITE_STMTSTATUS_REPREPARE).
func reprepares(t *testing.T, query string) int32 {
	t.Helper()
	tls := libc.NewTLS()
	defer tls.Close()
	cstr := func(s string) uintptr {
		p, err := libc.CString(s)
		require.NoError(t, err)
		t.Cleanup(func() { libc.Xfree(tls, p) })
		return p
	}
	out := new(uintptr) // on the heap: it does not move while SQLite writes it
	require.Equal(t, int32(sqlite3.SQLITE_OK), sqlite3.Xsqlite3_open_v2(tls, cstr(":memory:"), uintptr(unsafe.Pointer(out)),
		sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_CREATE, 0))
	db := *out
	defer sqlite3.Xsqlite3_close_v2(tls, db)
	require.Equal(t, int32(sqlite3.SQLITE_OK), sqlite3.Xsqlite3_exec(tls, db,
		cstr("CREATE TABLE t (x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3), (4)"), 0, 0, 0))
	require.Equal(t, int32(sqlite3.SQLITE_OK), sqlite3.Xsqlite3_prepare_v2(tls, db, cstr(query), -1, uintptr(unsafe.Pointer(out)), 0))
	stmt := *out
	defer sqlite3.Xsqlite3_finalize(tls, stmt)
	for _, n := range []int64{1, 2, 3, 1, 2} {
		require.Equal(t, int32(sqlite3.SQLITE_OK), sqlite3.Xsqlite3_bind_int64(tls, stmt, 1, n))
		rows := int64(0)
		for sqlite3.Xsqlite3_step(tls, stmt) == sqlite3.SQLITE_ROW {
			rows++
		}
		require.Equal(t, n, rows, query)
		require.Equal(t, int32(sqlite3.SQLITE_OK), sqlite3.Xsqlite3_reset(tls, stmt))
	}
	return sqlite3.Xsqlite3_stmt_status(tls, stmt, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 0)
}

// TestBoundLimitPlanKept checks what doc.go's rule for row bounds rests on: with the
// SQLite linked here a bare LIMIT ? makes every new binding prepare the statement again, and
// LIMIT +? does not. When the first half fails, SQLite stopped doing that and the rule
// may go; the second half must hold.
func TestBoundLimitPlanKept(t *testing.T) {
	require.Equal(t, int32(0), reprepares(t, "SELECT x FROM t ORDER BY x LIMIT +?1"), "LIMIT +? keeps its plan")
	require.Positive(t, reprepares(t, "SELECT x FROM t ORDER BY x LIMIT ?1"),
		"a bare LIMIT ? no longer prepares again on each binding: the LIMIT +? rule of doc.go can go")
}

// TestNoBareBoundLimit keeps LIMIT ? out of the SQL of the packages on this stack (doc.go;
// tests excepted).
func TestNoBareBoundLimit(t *testing.T) {
	bare := regexp.MustCompile(`(?im)^[^/\n]*\bLIMIT\s+\?`) // outside comments
	for _, dir := range []string{".", "../../plane/sqliteplane", "../../persist/filestore"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.Empty(t, bare.FindAllString(string(b), -1), "%s: write LIMIT +? (internal/sqlitedb/doc.go)", f)
		}
	}
}
