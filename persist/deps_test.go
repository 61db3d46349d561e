package persist

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSDKDependencies keeps the data SDK's import graph small: the stores live in their
// own packages (persist/filestore brings Parquet's pqarrow, and through arrow/flight
// gRPC; SQLite; persist/lakestore PostgreSQL and gocloud.dev), and persist links none.
func TestSDKDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, banned := range []string{"google.golang.org/grpc", "github.com/apache/arrow-go/v18/parquet",
			"github.com/apache/arrow-go/v18/arrow/compute", "modernc.org/sqlite", "github.com/mattn/go-sqlite3",
			"github.com/jackc/pgx", "gocloud.dev", FileStorePackage, HTTPStorePackage, LakestorePackage} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("persist depends on %s; keep it out of the data SDK's import graph", dep)
			}
		}
	}
}
