package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestDiskFullAnswerNamesNoPath: a write refused for a full disk (plane.DiskFull, from the
// SQLite plane's writer or a data queue's meta.db: plane/sqliteplane TestDiskFullIsLimitExceeded,
// persist/filestore TestPutOnFullDiskIsLimitExceeded) is answered 409 limit_exceeded saying
// which file in words and what to do, without the server's path, which only the log gets
// (hidden). Both the dispatch routes and the data routes (writeDataError's default) answer
// through publicErrorBody.
func TestDiskFullAnswerNamesNoPath(t *testing.T) {
	const path = "/srv/secret-layout/lakeshore.db"
	err := fmt.Errorf("submit: %w", plane.DiskFull("the plane's database", path))
	require.ErrorIs(t, err, plane.ErrLimitExceeded)
	require.Contains(t, err.Error(), path, "an embedded caller is told its own file")

	body, status, hidden := publicErrorBody(err)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, plane.ErrLimitExceeded.Code, body.Code)
	require.NotContains(t, body.Message, "secret-layout")
	require.Contains(t, body.Message, "the disk holding the plane's database is full")
	require.Contains(t, body.Message, "Free space")
	require.Contains(t, hidden, path, "the server's log names the file")
}
