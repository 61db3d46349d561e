package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
)

// TestDataNextOffsetNeverBelowOffset: GET D/records from an offset at or past the end of
// the log answers no rows and that offset as Lakeshore-Next-Offset (and as next of a JSON
// answer), with and without a wait, a partition or a shard; a read that reaches the end
// answers the end. (On the code before, a read from offset 10 of a queue of 3 records
// answered 3, so a client following the header read again below where it asked to start.)
func TestDataNextOffsetNeverBelowOffset(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	r := b.do(t, "POST", D+"/records?partition=p", api.ContentTypeJSON, []byte(`{"records": [{"x": 0}, {"x": 1}, {"x": 2}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	read := func(query, accept string) *response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", b.ts.URL+D+"/records?"+query, nil)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := b.ts.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body json.RawMessage
		if accept == api.ContentTypeJSON {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		}
		return &response{status: resp.StatusCode, header: resp.Header, body: body}
	}
	for _, offset := range []int64{3, 4, 10, 1 << 40} {
		for _, extra := range []string{"", "&partition=p", "&partition=other", "&rank=1&world_size=2", "&wait=0.05"} {
			q := fmt.Sprintf("offset=%d%s", offset, extra)
			r := read(q, "")
			require.Equal(t, 200, r.status, q)
			require.Equal(t, strconv.FormatInt(offset, 10), r.header.Get(api.HeaderNextOffset), "%s: the next offset is never below the one asked for", q)
			r = read(q, api.ContentTypeJSON)
			require.Equal(t, 200, r.status, q)
			var rows api.DataRowsResponse
			require.NoError(t, json.Unmarshal(r.body, &rows), q)
			require.Empty(t, rows.Rows, q)
			require.Equal(t, offset, rows.Next, q)
		}
	}
	r = read("offset=1", "")
	require.Equal(t, "3", r.header.Get(api.HeaderNextOffset), "a read to the end answers the end")
}
