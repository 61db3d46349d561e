package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// dataCLI runs the data verbs against a local directory or a server, and opens the same
// queue with the persist API for what the CLI does not do (samplers, clears).
type dataCLI struct {
	*cli
	args []string       // flags before the verb
	cfg  persist.Config // how the test opens the queue itself
}

func newLocalDataCLI(t *testing.T) *dataCLI {
	dir := t.TempDir()
	return &dataCLI{cli: newCLI(t), args: []string{"data", "--data-dir", dir}, cfg: persist.Config{Dir: dir}}
}

func newHTTPDataCLI(t *testing.T) *dataCLI {
	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	srv := server.New(drv, &server.Config{DataDir: t.TempDir()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		drv.Close()
	})
	return &dataCLI{cli: &cli{t: t, target: ts.URL}, args: []string{"data"}, cfg: persist.Config{URL: ts.URL}}
}

// newDistributedDataCLI runs the data verbs with --target postgres://…?blob=file://…:
// the distributed store (persist/lakestore) on a fresh catalog database and bucket.
func newDistributedDataCLI(t *testing.T) *dataCLI {
	u, err := url.Parse(pgtest.Database(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("blob", "file://"+t.TempDir())
	q.Set("flush_interval", "-1")
	u.RawQuery = q.Encode()
	home := t.TempDir() // the local default directory, which must stay empty
	t.Setenv("LAKESHORE_HOME", home)
	t.Cleanup(func() {
		ents, _ := os.ReadDir(home)
		require.Empty(t, ents, "a postgres:// target never touches the local data directory")
	})
	return &dataCLI{cli: &cli{t: t, target: u.String()}, args: []string{"data"}, cfg: persist.Config{Dir: u.String()}}
}

func (c *dataCLI) data(stdin string, args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(stdin, append(append([]string{}, c.args...), args...)...)
	require.Zero(c.t, code, "lakeshore data %v: %s", args, errs)
	return strings.TrimSpace(out)
}

func TestDataVerbs(t *testing.T) {
	t.Parallel()
	testDataVerbs(t, newLocalDataCLI)
}

// TestDataVerbsOverHTTP runs the same verbs against a real server on loopback.
func TestDataVerbsOverHTTP(t *testing.T) {
	t.Parallel()
	testDataVerbs(t, newHTTPDataCLI)
}

// TestDataVerbsOnDistributedStore runs the same verbs with --target
// postgres://…?blob=…: put, get, stats, partitions, consumption, flush and export work
// on the distributed store, and a program opening the same target sees the same queue.
func TestDataVerbsOnDistributedStore(t *testing.T) {
	testDataVerbs(t, newDistributedDataCLI)
	c := newDistributedDataCLI(t)
	_, errs, code := c.run("", "data", "stats", "rollouts", "--target", "postgres://127.0.0.1:1/none")
	require.NotZero(t, code)
	require.Contains(t, errs, "blob parameter", "a postgres:// target without a bucket says what is missing")
}

func testDataVerbs(t *testing.T, newCLI func(*testing.T) *dataCLI) {
	c := newCLI(t)
	ctx := context.Background()
	out := c.data(`{"prompt": "2+2", "tokens": [1, 2], "score": 1}
{"prompt": "3+3", "tokens": [3], "obs": {"$ndarray": {"dtype": "uint8", "shape": [2], "data": "AQI="}}}

{"prompt": "4+4", "meta": {"src": "x"}}
`, "put", "rollouts", "--batch", "2")
	require.Equal(t, "put 3 records: indexes 0–2", out)
	out = c.data(`{"prompt": "eval"}`+"\n", "--json", "put", "rollouts", "--partition", "eval")
	require.JSONEq(t, `{"count": 1, "indexes": [3]}`, out)

	lines := strings.Split(c.data("", "get", "rollouts"), "\n")
	require.Len(t, lines, 4)
	require.JSONEq(t, `{"index":0,"partition":"default","fields":{"prompt":"2+2","tokens":[1,2],"score":1}}`, lines[0])
	require.JSONEq(t, `{"index":1,"partition":"default","fields":{"prompt":"3+3","tokens":[3],"obs":{"$ndarray":{"dtype":"uint8","shape":[2],"data":"AQI="}}}}`, lines[1])
	require.JSONEq(t, `{"index":2,"partition":"default","fields":{"prompt":"4+4","meta":{"src":"x"}}}`, lines[2])
	require.JSONEq(t, `{"index":3,"partition":"eval","fields":{"prompt":"eval"}}`,
		c.data("", "get", "rollouts", "--partition", "eval", "--fields", "prompt", "--offset", "1", "--limit", "5"))

	// Bad input: typed errors and exit codes, nothing written.
	_, errs, code := c.run(`{"score": "high"}`+"\n", append(c.args, "put", "rollouts")...)
	require.Equal(t, exitUsage, code, "a value of the wrong type is bad input")
	require.Contains(t, errs, `field "score" has type int64`)
	require.NotContains(t, errs, "--help", "bad input, not a command-line mistake: no usage hint")
	// A read's bounds say what is allowed as a sentence (before: "invalid offset -1: ≥ 0").
	for flag, want := range map[string]string{
		"--offset=-1": "lakeshore: invalid offset -1: use a global index ≥ 0 (0: from the first record)\n",
		"--limit=0":   "lakeshore: invalid limit 0: use 1 or more records\n",
	} {
		_, errs, code = c.run("", append(c.args, "get", "rollouts", flag)...)
		require.Equal(t, exitUsage, code, "%s: %s", flag, errs)
		require.Equal(t, want, errs, flag)
	}
	// Reads of a queue that does not exist say so and create nothing.
	for _, verb := range []string{"stats", "get", "flush", "partitions", "consumption"} {
		_, errs, code = c.run("", append(c.args, verb, "nosuch")...)
		require.Equal(t, exitNotFound, code, "data %s nosuch: %s", verb, errs)
		require.Equal(t, "lakeshore: data queue nosuch does not exist in namespace default (its first put creates it)\n", errs, verb)
	}
	if c.cfg.Dir != "" && !strings.Contains(c.cfg.Dir, "://") {
		_, err := os.Stat(filepath.Join(c.cfg.Dir, "nosuch"))
		require.ErrorIs(t, err, os.ErrNotExist, "no directory was created")
	}
	_, errs, code = c.run(`not json`+"\n", append(c.args, "put", "rollouts")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "line 1")
	_, _, code = c.run(`{"x": 1}`+"\n", append(c.args, "put", "rollouts", "--partition", "-bad")...)
	require.Equal(t, exitUsage, code)

	// The persist API on the same queue: a sampler, a field update, a clear.
	q, err := persist.Open(ctx, "rollouts", &c.cfg, filestore.Driver(), httpstore.Driver(), lakestore.Driver())
	require.NoError(t, err)
	m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"prompt"}, BatchSize: 2, Task: "train"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, m.Indexes)
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{1}, []persist.Record{{"score": 7}}))
	require.NoError(t, q.ClearSamples(ctx, persist.DefaultPartition, []int64{2}))
	require.NoError(t, q.Close(ctx))

	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.data("", "--json", "stats", "rollouts")), &st))
	require.EqualValues(t, 4, st["next_index"])
	require.EqualValues(t, 3, st["len"])
	require.Contains(t, c.data("", "stats", "rollouts"), "records")
	// A header, as every list of the CLI (consumption, jobs, queues, workers, schedules)
	// prints one (before, partitions alone printed none).
	require.Equal(t, "PARTITION  RECORDS\ndefault    3\neval       1", c.data("", "partitions", "rollouts"))
	require.Contains(t, c.data("", "consumption", "rollouts"), "default    train  2")
	c.data("", "flush", "rollouts")

	dir := t.TempDir()
	files := c.data("", "export", "rollouts", dir, "--rows-per-file", "2")
	names := strings.Split(files, "\n")
	require.Len(t, names, 2)
	var idx []int64
	scores := map[int64]int64{}
	for _, name := range names {
		f, err := os.Open(name)
		require.NoError(t, err)
		pr, err := file.NewParquetReader(f)
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		rd := array.NewTableReader(tbl, 0)
		for rd.Next() {
			rec := rd.RecordBatch()
			sch := rec.Schema()
			ic := rec.Column(sch.FieldIndices("_index")[0]).(*array.Int64)
			sc := rec.Column(sch.FieldIndices("score")[0]).(*array.Int64)
			for i := 0; i < int(rec.NumRows()); i++ {
				idx = append(idx, ic.Value(i))
				if sc.IsValid(i) {
					scores[ic.Value(i)] = sc.Value(i)
				}
			}
		}
		rd.Release()
		tbl.Release()
		pr.Close()
	}
	require.Equal(t, []int64{0, 1, 3}, idx, "the cleared record is left out")
	require.Equal(t, map[int64]int64{0: 1, 1: 7}, scores, "field updates are merged")
	require.Equal(t, filepath.Join(dir, "rollouts-00000.parquet"), names[0])
}

// TestDataVerbsCheckNames: the local data verbs check the namespace, queue and partition
// names by the rule of the HTTP path before anything is created: no name leaves the
// data directory. Not parallel: it sets LAKESHORE_HOME.
func TestDataVerbsCheckNames(t *testing.T) {
	home := t.TempDir()
	t.Setenv("LAKESHORE_HOME", filepath.Join(home, "a", "b"))
	c := newCLI(t)
	for _, args := range [][]string{
		{"--namespace", "../../etc", "data", "put", "q"},
		{"--namespace", "a/b", "data", "put", "q"},
		{"--namespace", "_x", "data", "put", "q"},
		{"--namespace=-x", "data", "put", "q"},
		{"data", "put", "../q"},
		{"data", "put", "_q"},
		{"data", "put", "q", "--partition", "../p"},
		{"--namespace", "../../etc", "data", "stats", "q"},
	} {
		_, errs, code := c.run(`{"x": 1}`+"\n", args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errs)
		require.Contains(t, errs, "invalid", "%v", args)
		require.NotContains(t, errs, "Run 'lakeshore --help'", "%v: a bad value, not a usage error", args)
	}
	ents, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing was created")
	c.ok("data", "put", "q", "--partition", "p") // a good name still works
}

// TestDataExportUnwritableDir: data export into a directory that cannot be made (a path
// that is a file, or under one) is bad input, exit 2 as docs/cli.md's table says of an
// unwritable --out, naming the directory and the reason; before, it was exit 5 with
// "mkdir /etc/passwd: not a directory". Not parallel: it sets LAKESHORE_HOME.
func TestDataExportUnwritableDir(t *testing.T) {
	t.Setenv("LAKESHORE_HOME", t.TempDir())
	c := newCLI(t)
	c.run(`{"x": 1}`+"\n", "data", "put", "q")
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		_, errs, code := c.run("", "data", "export", "q", dir)
		require.Equal(t, exitUsage, code, "%s: %s", dir, errs)
		require.Contains(t, errs, `invalid DIR "`+dir+`"`)
		require.Contains(t, errs, "not a directory")
		require.NotContains(t, errs, "Run 'lakeshore --help'")
	}
}

// TestFlagValuesSayWhatIsAllowed: a flag value its type cannot parse says what the flag
// takes, without the parser's Go words and without the usage hint (exit 2); an
// unwritable map --out is a bad value too.
func TestFlagValuesSayWhatIsAllowed(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, cs := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "q", "--priority", "abc"}, `invalid --priority "abc": use a number`},
		{[]string{"queue", "set", "q", "--rate-limit", "1", "--burst", "1e18"}, `invalid --burst "1e18": use a whole number (digits, no exponent or fraction)`},
		{[]string{"map", "--input", "/dev/null", "--out", "/proc/nope/out.jsonl", "--", "true"}, `invalid --out "/proc/nope/out.jsonl": its directory is not writable`},
		// Values the flag's type parses but the verb refuses: the same form, no usage
		// hint (before: "--batch: want ≥ 1, got 0" and the hint).
		{[]string{"data", "put", "q", "--batch", "0"}, `invalid --batch 0: use a number of records per put ≥ 1`},
		{[]string{"data", "export", "q", "dir", "--rows-per-file", "-1"}, `invalid --rows-per-file -1: use a number of records per file ≥ 1`},
		{[]string{"map", "--input", "/dev/null", "--workers", "0", "--", "true"}, `invalid --workers 0: use a number of workers ≥ 1`},
		{[]string{"map", "--input", "/dev/null", "--progress", "loud", "--", "true"}, `invalid --progress "loud": use auto|bar|lines|none`},
		{[]string{"submit", "q", "1", "--delay", "-5m"}, `invalid --delay "-5m0s": use a duration ≥ 0`},
		{[]string{"submit", "q", "1", "--at", "tomorrow"}, `invalid --at "tomorrow": use an RFC 3339 time`},
		{[]string{"trim", "--all", "--older-than", "-1h"}, `invalid --older-than "-1h0m0s": use a duration ≥ 0`},
		{[]string{"data", "get", "q", "--offset", "x"}, `invalid --offset "x": use a whole number (digits, no exponent or fraction) from 0 to 9223372036854775807`},
		// A duration past what the flag's type holds says so (before: "use a duration
		// such as 500ms, 30s, 5m or 1h", as if 9999999h were not written as one).
		{[]string{"submit", "q", "1", "--delay", "9999999h"}, `invalid --delay "9999999h": a duration of at most 2562047h (about 292 years)`},
		{[]string{"trim", "--all", "--older-than", "1e3h"}, `invalid --older-than "1e3h": use a duration such as 500ms, 30s, 5m or 1h`},
		// --block below 0 says its rule, > 0 (before: "≥ 0", while 0 is refused).
		{[]string{"data", "put", "q", "--admission-task", "t", "--max-unconsumed", "1", "--block", "-1s"}, `invalid --block -1s: a duration > 0`},
	} {
		_, errs, code := c.run("", cs.args...)
		require.Equal(t, exitUsage, code, "%v: %s", cs.args, errs)
		require.Contains(t, errs, cs.want, cs.args)
		for _, internal := range []string{"strconv.", "Parse", "Run 'lakeshore --help'"} {
			require.NotContains(t, errs, internal, cs.args)
		}
	}
	// Values the SDK refuses say what to pass in the CLI's terms, a Go name at most as an
	// aside (before: "or FromStart (-1)", "pass the Next of the previous page").
	id := c.ok("submit", "q", "1")
	for _, cs := range []struct {
		args []string
		want string
	}{
		{[]string{"stream", id, "--since", "-5", "--timeout", "1s"}, "invalid since -5: use a frame seq ≥ 0, or -1 for the whole journal"},
		{[]string{"topic", "listen", "q", "t", "--since", "-5", "--timeout", "1s"}, "invalid since -5: use a frame seq ≥ 0, or -1 for the first value"},
		{[]string{"jobs", "q", "--after", "garbage"}, `invalid cursor "garbage": use the next cursor of the previous page`},
	} {
		_, errs, code := c.run("", cs.args...)
		require.Equal(t, exitUsage, code, "%v: %s", cs.args, errs)
		require.Contains(t, errs, cs.want, cs.args)
		require.NotContains(t, errs, "Next", cs.args)
	}
}

// TestDataGetPagesOverHTTP: `lakeshore data get --limit` above the server's bound on one
// read (persist.ScanLimitMax) prints --limit records, reading pages (fails on the code that
// made one read: the server refused the limit).
func TestDataGetPagesOverHTTP(t *testing.T) {
	t.Parallel()
	c := newHTTPDataCLI(t)
	ctx := context.Background()
	q, err := persist.Open(ctx, "big", &c.cfg, httpstore.Driver())
	require.NoError(t, err)
	defer q.Close(ctx)
	total := persist.ScanLimitMax + 3
	recs := make([]persist.Record, total)
	for i := range recs {
		recs[i] = persist.Record{"i": int64(i)}
	}
	_, err = q.PutBatch(ctx, recs)
	require.NoError(t, err)
	lines := strings.Split(c.data("", "get", "big", "--fields", "i", "--limit", strconv.Itoa(total+10)), "\n")
	require.Equal(t, total, len(lines))
	require.JSONEq(t, fmt.Sprintf(`{"index":%d,"partition":"default","fields":{"i":%d}}`, total-1, total-1), lines[total-1])
	lines = strings.Split(c.data("", "get", "big", "--fields", "i", "--offset", "1", "--limit", strconv.Itoa(persist.ScanLimitMax+1)), "\n")
	require.Equal(t, persist.ScanLimitMax+1, len(lines), "--limit records, across pages")
	require.JSONEq(t, fmt.Sprintf(`{"index":%d,"partition":"default","fields":{"i":%d}}`, persist.ScanLimitMax+1, persist.ScanLimitMax+1), lines[persist.ScanLimitMax])
}

// TestDataPutLargeLineSaysTheLimit: a line over a record's bound is refused naming the
// limit with its unit and the line's size with its unit, not a bare byte count ("invalid
// line 1 20971528: …"); a line over the scanner's bound (twice a record's) is a usage
// error (exit 2) saying the bounds, not "read stdin: bufio.Scanner: token too long" with
// exit 5. Not parallel: it sets LAKESHORE_HOME.
func TestDataPutLargeLineSaysTheLimit(t *testing.T) {
	t.Setenv("LAKESHORE_HOME", t.TempDir())
	c := newCLI(t)
	_, errs, code := c.run(`{"x": 1}`+"\n"+`{"x": "`+strings.Repeat("a", 20<<20)+`"}`+"\n", "data", "put", "q")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "invalid line 2: 20 MiB encoded")
	require.Contains(t, errs, "at most 16 MiB encoded")
	_, errs, code = c.run(`{"x": "`+strings.Repeat("a", 40<<20)+`"}`+"\n", "data", "put", "q")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "line 1: longer than 32 MiB")
	require.Contains(t, errs, "at most 16 MiB encoded")
	require.NotContains(t, errs, "bufio")
}

// TestDataPutRefusedCreatesNothing: a local data put that is refused — a line that is not
// a record, records of the first batch that disagree on a field's kind, a record over the
// size bound, a put back-pressure refuses — creates no queue, as a put the server refuses creates none (before, each
// left an empty queue behind: data stats answered it, exit 0, instead of exit 3). Input
// with no record creates nothing either, as over HTTP, where nothing is sent. Not
// parallel: it sets LAKESHORE_HOME.
func TestDataPutRefusedCreatesNothing(t *testing.T) {
	home := t.TempDir()
	t.Setenv("LAKESHORE_HOME", home)
	c := newCLI(t)
	for name, in := range map[string]string{
		"notrecord": `{"x": 1}` + "\n[1]\n",
		"notjson":   `{"x": 1}` + "\n{nope\n",
		"kinds":     `{"x": 1}` + "\n" + `{"x": "a"}` + "\n",
		"large":     `{"x": "` + strings.Repeat("a", persist.MaxRecordBytes+1) + `"}` + "\n",
		"empty":     "\n",
	} {
		_, errs, code := c.run(in, "data", "put", name)
		if name == "empty" {
			require.Equal(t, 0, code, errs)
		} else {
			require.Equal(t, exitUsage, code, "%s: %s", name, errs)
		}
		_, errs, code = c.run("", "data", "stats", name)
		require.Equal(t, exitNotFound, code, "%s: the refused put created the queue: %s", name, errs)
	}
	ents, err := os.ReadDir(filepath.Join(home, "data", "default"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
		require.Empty(t, ents, "no queue directory")
	}
	// A put back-pressure refuses at a new queue's version 0 (a record meant for version 3,
	// --max-ahead 0) is exit 5 and creates nothing either (before 2026-12-07 it created
	// the queue it was refused by).
	_, errs, code := c.run(`{"x": 1, "weight_version": 3}`+"\n", "data", "put", "ahead", "--max-ahead", "0")
	require.Equal(t, exitError, code, errs)
	require.Contains(t, errs, "back-pressure")
	_, errs, code = c.run("", "data", "stats", "ahead")
	require.Equal(t, exitNotFound, code, "the refused put created the queue: %s", errs)
	c.run(`{"x": 1}`+"\n", "data", "put", "kinds") // a good put still creates it
	c.ok("data", "stats", "kinds")
}

// TestDataVersionAndRLFigures: `data version` shows and advances a data queue's weight
// version, refusing one that goes back with what is allowed, and `data stats` shows the
// RL figures (the version, stale and group drops, unused samples), in the table and in
// --json (docs/cli.md said --json had "every figure"; these four were left out, so a
// trainer reading short batches could not see from the CLI that stale records were being
// dropped). Found by a new user's trial, 2026-12-07.
// TestDataPutIDRepeats puts with --put-id twice, as a rollout run by `lakeshore worker`
// and retried after its put committed does (--put-id rollout.$LAKESHORE_JOB_ID): batch
// k carries the id PREFIX.k, so the repeat answers the first put's indexes and writes
// nothing. Before 2026-12-07 data put had no put id and the retry wrote every record
// again.
func TestDataPutIDRepeats(t *testing.T) {
	t.Parallel()
	for name, newCLI := range map[string]func(*testing.T) *dataCLI{"local": newLocalDataCLI, "http": newHTTPDataCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			in := `{"x": 1}` + "\n" + `{"x": 2}` + "\n" + `{"x": 3}` + "\n"
			require.Equal(t, "put 3 records: indexes 0–2", c.data(in, "put", "traj", "--put-id", "rollout.J1", "--batch", "2"))
			require.Equal(t, "put 3 records: indexes 0–2", c.data(in, "put", "traj", "--put-id", "rollout.J1", "--batch", "2"),
				"a repeat answers the first put's indexes")
			require.Equal(t, "put 1 record: index 3", c.data(`{"x": 4}`, "put", "traj", "--put-id", "rollout.J2"))
			var st map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.data("", "--json", "stats", "traj")), &st))
			require.EqualValues(t, 4, st["len"], "nothing written twice")
			_, errs, code := c.run(in, append(c.args, "put", "traj", "--put-id", "bad id")...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "--put-id")
			// A --batch past int64 says the flag's own range, not the Go type's from its
			// most negative value (before 2026-12-07: "from -9223372036854775808 to …").
			_, errs, code = c.run(in, append(c.args, "put", "traj", "--batch", "99999999999999999999")...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "invalid --batch \"99999999999999999999\": use a whole number (digits, no exponent or fraction) from 1 to 9223372036854775807")
		})
	}
}

// TestDataPutBackpressure puts as a rollout script under back-pressure does:
// --admission-task/--max-unconsumed admit a batch only while the trainer's task has room,
// a refusal is exit 5 saying so and writes nothing, --block waits for room up to its
// duration, and a put the trainer made room for goes through. Before 2026-12-07 data put
// had no back-pressure, so a rollout run by `lakeshore worker` could not be held back.
func TestDataPutBackpressure(t *testing.T) {
	t.Parallel()
	for name, newCLI := range map[string]func(*testing.T) *dataCLI{"local": newLocalDataCLI, "http": newHTTPDataCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			ctx := context.Background()
			two := `{"x": 1}` + "\n" + `{"x": 2}` + "\n"
			bp := []string{"put", "traj", "--admission-task", "train", "--max-unconsumed", "2"}
			require.Equal(t, "put 2 records: indexes 0–1", c.data(two, bp...))
			_, errs, code := c.run(`{"x": 3}`, append(append([]string{}, c.args...), bp...)...)
			require.Equal(t, exitError, code, errs)
			require.Contains(t, errs, "back-pressure")
			_, errs, code = c.run(`{"x": 3}`, append(append([]string{}, c.args...), append(bp, "--block", "50ms")...)...)
			require.Equal(t, exitError, code, errs)
			require.Contains(t, errs, "back-pressure")
			q, err := persist.Open(ctx, "traj", &c.cfg, filestore.Driver(), httpstore.Driver())
			require.NoError(t, err)
			n, err := q.Len(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, n, "a refused put wrote nothing")
			require.NoError(t, q.MarkConsumed(ctx, "train", persist.DefaultPartition, []int64{0}))
			require.NoError(t, q.Close(ctx))
			require.Equal(t, "put 1 record: index 2", c.data(`{"x": 3}`, append(bp, "--block", "10s")...))
			_, errs, code = c.run(`{"x": 4}`, append(append([]string{}, c.args...), "put", "traj", "--max-unconsumed", "2")...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "invalid --admission-task", "named by the flag")
			// A task with no bound bounds nothing: exit 2 saying which flags to give,
			// nothing written (before, it put the record as if no back-pressure was asked).
			_, errs, code = c.run(`{"x": 4}`, append(append([]string{}, c.args...), "put", "traj", "--admission-task", "train", "--max-ahead", "-1")...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "invalid --max-ahead -1: ≥ 0 (leave --max-ahead out for no bound)", "as the HTTP put's max_ahead")
			// --block 0 is no wait to give: exit 2 naming the flag (before 2026-12-07 it
			// waited 30 s, the Admission's default for a Timeout of 0, and then failed).
			_, errs, code = c.run(`{"x": 4}`, append(append([]string{}, c.args...), append(bp, "--block", "0")...)...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "invalid --block 0s", "named by the flag")
			for _, args := range [][]string{{"--admission-task", "train"}, {"--block", "1s"}} {
				_, errs, code = c.run(`{"x": 4}`, append(append([]string{}, c.args...), append([]string{"put", "traj"}, args...)...)...)
				require.Equal(t, exitUsage, code, errs)
				require.Contains(t, errs, "invalid --max-unconsumed", "named by the flag")
				require.Contains(t, errs, "--max-unconsumed > 0", "says what to give")
				require.Contains(t, errs, "--max-ahead ≥ 0", "says what to give")
			}
			q, err = persist.Open(ctx, "traj", &c.cfg, filestore.Driver(), httpstore.Driver())
			require.NoError(t, err)
			n, err = q.Len(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 3, n, "a refused put wrote nothing")
			require.NoError(t, q.Close(ctx))
		})
	}
}

func TestDataVersionAndRLFigures(t *testing.T) {
	t.Parallel()
	for name, newCLI := range map[string]func(*testing.T) *dataCLI{"local": newLocalDataCLI, "http": newHTTPDataCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			ctx := context.Background()
			c.data(`{"x": 1, "weight_version": 0}`+"\n"+`{"x": 2, "weight_version": 3}`+"\n", "put", "traj")
			require.Equal(t, "0", c.data("", "version", "traj"))
			require.Equal(t, "3", c.data("", "version", "traj", "--set", "3"))
			require.Equal(t, "3", c.data("", "version", "traj", "--set", "3"), "the same version again is a no-op")
			require.JSONEq(t, `{"version": 3}`, c.data("", "--json", "version", "traj"))
			_, errs, code := c.run("", append(c.args, "version", "traj", "--set", "2")...)
			require.Equal(t, exitUsage, code, errs)
			require.Equal(t, "lakeshore: invalid version 2: the queue is at version 3: use 3 or more (versions never go back)\n", errs)
			_, errs, code = c.run("", append(c.args, "version", "traj", "--set", "-1")...)
			require.Equal(t, exitUsage, code, errs)
			require.Equal(t, "lakeshore: invalid version -1: use an integer ≥ 0\n", errs)
			// A queue no put, KV put or set_version created yet is at version 0, as GET
			// D/version and the SDKs' version() answer, so a rollout script may read it
			// before the trainer's first put; the read creates nothing and says so on
			// stderr (a misspelt name). Before 2026-12-07 it was exit 3 here and 0 over
			// the SDKs.
			out, errs, code := c.run("", append(c.args, "version", "nosuch")...)
			require.Zero(t, code, errs)
			require.Equal(t, "0\n", out)
			require.Contains(t, errs, "data queue nosuch does not exist in namespace default yet: version 0")
			_, _, code = c.run("", append(c.args, "stats", "nosuch")...)
			require.Equal(t, exitNotFound, code, "the read created no queue")
			// --set creates the queue, as POST D/version and set_version do.
			require.Equal(t, "2", c.data("", "version", "fresh", "--set", "2"))
			require.Equal(t, "2", c.data("", "version", "fresh"))

			// A staleness-bounded read drops the record of version 0 (3 − 0 > 1).
			q, err := persist.Open(ctx, "traj", &c.cfg, filestore.Driver(), httpstore.Driver())
			require.NoError(t, err)
			m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train",
				Staleness: &persist.Staleness{Max: 1}})
			require.NoError(t, err)
			require.Equal(t, []int64{1}, m.Indexes)
			require.NoError(t, q.Close(ctx))

			var st map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.data("", "--json", "stats", "traj")), &st))
			require.EqualValues(t, 3, st["weight_version"])
			require.EqualValues(t, 1, st["stale_dropped"])
			require.EqualValues(t, 0, st["groups_dropped"])
			require.EqualValues(t, 0, st["samples_unused"])
			table := c.data("", "stats", "traj")
			require.Regexp(t, `(?m)^weight version +3$`, table)
			require.Regexp(t, `(?m)^stale dropped +1$`, table)
			require.Regexp(t, `(?m)^groups dropped +0$`, table)
			require.Regexp(t, `(?m)^samples unused +0$`, table)
		})
	}
}

// TestDataConsumptionSaysWhatItCounts: `data consumption` counts, for a task, the samples
// its reads dropped as stale as well as those they handed out (the samples it is done
// with). Before 2026-12-07 it said "Samples consumed" and nothing else, so a trainer that
// received 4 samples read 8; now a note on stderr gives the drops (queue-wide, as `data
// stats` keeps them), on the local and the HTTP store alike.
func TestDataConsumptionSaysWhatItCounts(t *testing.T) {
	for name, newCLI := range map[string]func(*testing.T) *dataCLI{"local": newLocalDataCLI, "http": newHTTPDataCLI} {
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			ctx := t.Context()
			q, err := persist.Open(ctx, "traj", &c.cfg, filestore.Driver(), httpstore.Driver())
			require.NoError(t, err)
			for v := range int64(2) {
				recs := []persist.Record{{"x": v}, {"x": v}, {"x": v}, {"x": v}}
				_, err = q.PutVersioned(ctx, persist.DefaultPartition, recs, v, -1, nil)
				require.NoError(t, err)
			}
			require.NoError(t, q.SetVersion(ctx, 2))
			m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train",
				Staleness: &persist.Staleness{Max: 1}})
			require.NoError(t, err)
			require.Equal(t, []int64{4, 5, 6, 7}, m.Indexes, "version 0 is 2 behind: dropped")
			require.NoError(t, q.Close(ctx))

			out, errs, code := c.run("", append(append([]string{}, c.args...), "consumption", "traj")...)
			require.Zero(t, code, errs)
			require.Equal(t, "PARTITION  TASK   CONSUMED\ndefault    train  8\n", out, "the task is done with 8: 4 handed out, 4 dropped")
			require.Contains(t, errs, "CONSUMED includes samples dropped without being handed out")
			require.Contains(t, errs, "4 dropped as stale, 0 groups dropped, 0 samples of over-sampled groups unused")
			help, _, code := c.run("", "data", "consumption", "--help")
			require.Zero(t, code)
			require.Contains(t, help, "not the number of samples it received")
		})
	}
}

// TestDataVerbsRefuseWhatJobVerbsRefuse: a --target (or $LAKESHORE_URL) the job verbs
// refuse — another scheme, the PostgreSQL scheme in upper case, a URL without its "//" — is
// refused by the data verbs too, exit 2, its password masked, and nothing is written;
// before, each was taken for the local --data-dir and the records went there unsaid
// (`data put q --target POSTGRES://…?blob=…` put into $LAKESHORE_HOME/data). An HTTP URL
// with its scheme in upper case is the server, as for the job verbs.
func TestDataVerbsRefuseWhatJobVerbsRefuse(t *testing.T) {
	home := t.TempDir()
	t.Setenv("LAKESHORE_HOME", home)
	t.Setenv("LAKESHORE_URL", "")
	for _, target := range []string{"POSTGRES://lake:Secret9@db/lake?blob=file:///tmp/b", "ftp://lake:Secret9@db/x",
		"redis://db", "postgres:/lake:Secret9@db/lake", "Postgresql:lake:Secret9@db"} {
		c := &cli{t: t, target: target}
		_, errs, code := c.run(`{"x": 1}`+"\n", "data", "put", "q")
		require.Equal(t, exitUsage, code, "%s: %s", target, errs)
		require.Contains(t, errs, "invalid target", target)
		require.NotContains(t, errs, "Secret9", target)
	}
	t.Setenv("LAKESHORE_URL", "Postgres://lake:Secret9@db/lake")
	c := &cli{t: t, target: ""}
	_, errs, code := c.run(`{"x": 1}`+"\n", "data", "put", "q")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "invalid LAKESHORE_URL")
	require.NotContains(t, errs, "Secret9")
	_, err := os.Stat(filepath.Join(home, "data"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was put in the local data directory")

	t.Setenv("LAKESHORE_URL", "")
	h := newHTTPDataCLI(t)
	up := &cli{t: t, target: "HTTP://" + strings.TrimPrefix(h.cli.target, "http://")}
	out, errs, code := up.run(`{"x": 1}`+"\n", "data", "put", "q")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "put 1 record: index 0", strings.TrimSpace(out), "an upper-case HTTP scheme is the server")
	q, err := persist.Open(t.Context(), "q", &h.cfg, httpstore.Driver())
	require.NoError(t, err)
	defer q.Close(context.Background())
	n, err := q.Len(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the record is on the server")
}
