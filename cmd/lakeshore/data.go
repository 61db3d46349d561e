package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The data verbs: `lakeshore data VERB QUEUE` on data queues (package persist), local, on
// a server or on the distributed store, chosen as the job verbs choose their plane: an
// http(s) --target (else $LAKESHORE_URL) is a server; a postgres://…?blob=<bucket URL>
// one is the distributed store (persist/lakestore, linked into this command); anything
// else is the local directory --data-dir (default $LAKESHORE_HOME/data/{namespace}, the
// layout `lakeshore serve` serves).

// dataOpts are the flags shared by the data verbs.
type dataOpts struct {
	dir string
}

func newDataCmd(a *app) *cobra.Command {
	o := &dataOpts{}
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Put, read, flush and export data queues (package persist)",
		Long: `The data verbs work on data queues: locally in --data-dir (default
$LAKESHORE_HOME/data/{namespace}), on the server named by an http(s) --target or
$LAKESHORE_URL (same tokens: $LAKESHORE_TOKEN), or on the distributed store named by a
--target (or $LAKESHORE_URL) postgres://…?blob=<bucket URL> (the catalog in PostgreSQL,
the fragments in the bucket; namespace --namespace).`,
		Args: cobra.ArbitraryArgs,
		RunE: unknownSubcommand,
	}
	cmd.PersistentFlags().StringVar(&o.dir, "data-dir", "", "root of local data queues (default: $"+lakeshore.EnvHome+"/data/{namespace})")
	cmd.AddCommand(newDataPutCmd(a, o), newDataGetCmd(a, o), newDataStatsCmd(a, o), newDataFlushCmd(a, o),
		newDataPartitionsCmd(a, o), newDataConsumptionCmd(a, o), newDataExportCmd(a, o), newDataVersionCmd(a, o))
	return cmd
}

// openData opens data queue name where the flags say, creating it when create is true
// (put); else a queue that does not exist is a *persist.NotFoundError (exit 3) and
// nothing is created. The namespace and queue name are checked first, by the rule of the
// HTTP path (plane.ValidateNamespace, persist.CheckName), before any directory is made.
// A server is checked for reachability first, as the job verbs' plane is (app.open).
func (a *app) openData(ctx context.Context, o *dataOpts, name string, create bool) (*persist.Queue, error) {
	ns := cmp.Or(a.namespace, os.Getenv(lakeshore.EnvNamespace), lakeshore.NamespaceDefault)
	if err := plane.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	if err := persist.CheckName("queue name", name); err != nil {
		return nil, err
	}
	// What the job verbs refuse as a target (another scheme, "POSTGRES://", "postgres:u:pw@db"
	// without its "//") is refused here too: before, every such target was taken for the
	// local --data-dir, and the records went there unsaid.
	if err := lakeshore.CheckTarget(a.target); err != nil {
		return nil, err
	}
	target := cmp.Or(a.target, os.Getenv(lakeshore.EnvURL))
	cfg := &persist.Config{Namespace: ns, Logger: a.logger(), Existing: !create}
	switch {
	case isHTTPTarget(target): // in any case: HTTP://… is a server to the job verbs too
		scheme, rest, _ := strings.Cut(target, "://")
		target = strings.ToLower(scheme) + "://" + rest // the HTTP store reads the scheme in lower case
		// A server that refuses connections is said so as the job verbs say it (their
		// reachability check: "nothing answers at …"), never with the dial's Go words.
		if err := a.reach.check(ctx, target, a.stderr); err != nil {
			return nil, fmt.Errorf("open data queue %s: %w", name, err)
		}
		cfg.URL = target
	case plane.IsPostgresURL(target):
		cfg.Dir = target // the distributed store (lakestore.Driver, given to persist.Open below)
	default:
		dir := o.dir
		if dir == "" {
			home := os.Getenv(lakeshore.EnvHome)
			if home == "" {
				h, err := os.UserHomeDir()
				if err != nil {
					return nil, fmt.Errorf("find the data directory: set %s or pass --data-dir: %w", lakeshore.EnvHome, err)
				}
				home = filepath.Join(h, ".lakeshore")
			}
			dir = filepath.Join(home, "data", ns)
		}
		if strings.Contains(dir, "://") {
			return nil, usagef("--data-dir: want a directory, got the URL %s (give a server or a postgres://…?blob=… store with --target)", plane.RedactURL(dir))
		}
		if create {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
		}
		cfg.Dir = dir
	}
	q, err := persist.Open(ctx, name, cfg, filestore.Driver(), httpstore.Driver(), lakestore.Driver())
	var nf *persist.NotFoundError
	if errors.As(err, &nf) && nf.Queue != "" {
		// The sentence alone, with the not_found code (exit 3): wrapping the sentinel
		// added its own words, ": persist: not found", to the line.
		return nil, &plane.Error{Code: persist.ErrNotFound.Code, Message: fmt.Sprintf("data queue %s does not exist in namespace %s (its first put creates it)", name, ns)}
	}
	if err != nil {
		return nil, fmt.Errorf("open data queue %s: %w", name, err)
	}
	return q, nil
}

// openDataPut opens data queue name for a put of recs into partition with opts: the
// queue is created only when it does not exist and the put passes the checks every store
// makes of a put into a queue that holds nothing yet (filestore.CheckPut: the records,
// and back-pressure at version 0), so that a refused put creates nothing (a server's put
// routes check the same before creating).
func (a *app) openDataPut(ctx context.Context, o *dataOpts, name, partition string, recs []persist.Record, opts *persist.PutOpts) (*persist.Queue, error) {
	q, err := a.openData(ctx, o, name, false)
	if !errors.Is(err, persist.ErrNotFound) {
		return q, err
	}
	if err := filestore.CheckPut(partition, recs, opts); err != nil {
		return nil, err
	}
	return a.openData(ctx, o, name, true)
}

// withData runs fn on data queue name, which must exist, and closes it.
func (a *app) withData(c *cobra.Command, o *dataOpts, name string, fn func(q *persist.Queue) error) error {
	return a.withDataQueue(c, o, name, false, fn)
}

// withDataQueue runs fn on data queue name (created when create is true) and closes it.
func (a *app) withDataQueue(c *cobra.Command, o *dataOpts, name string, create bool, fn func(q *persist.Queue) error) error {
	q, err := a.openData(c.Context(), o, name, create)
	if err != nil {
		return err
	}
	return closeData(c, q, fn(q))
}

// closeData closes q (nil: nothing to close) and returns err, else the close's error.
func closeData(c *cobra.Command, q *persist.Queue, err error) error {
	if q == nil {
		return err
	}
	if cerr := q.Close(context.WithoutCancel(c.Context())); err == nil {
		err = cerr
	}
	return err
}

// maxPutIDPrefix bounds `data put --put-id`: batch k's id is ID.k, and a put id is at
// most 128 bytes (persist.CheckPutID), which leaves room for 10 digits of k.
const maxPutIDPrefix = 128 - 11

// putAdmissionFlags names, in a rule of persist.CheckAdmission, data put's flags for the
// HTTP query parameters it names.
var putAdmissionFlags = strings.NewReplacer("admission_task", "--admission-task", "max_unconsumed", "--max-unconsumed",
	"max_ahead", "--max-ahead", "admission_timeout", "--block")

// maxPutLine bounds a line of `data put`: twice a record's bound, as JSON may spell a
// record longer than its encoding.
const maxPutLine = 2 * persist.MaxRecordBytes

func newDataPutCmd(a *app, o *dataOpts) *cobra.Command {
	var partition, putID, admTask string
	var batch int
	var maxUnconsumed, maxAhead int64
	var block time.Duration
	cmd := &cobra.Command{
		Use:   "put QUEUE",
		Short: "Put records from stdin, one JSON object per line",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if batch < 1 {
				return plane.Invalid("--batch", batch, "use a number of records per put ≥ 1 (default 1000)")
			}
			if err := persist.CheckName("partition", partition); err != nil {
				return err
			}
			if putID != "" && (persist.CheckPutID(putID) != nil || len(putID) > maxPutIDPrefix) {
				return plane.Invalid("--put-id", putID, fmt.Sprintf("1–%d bytes of [A-Za-z0-9._:-] (batch k is put with the id ID.k)", maxPutIDPrefix))
			}
			// Back-pressure (persist.Admission, checked in the put's transaction by every
			// store): set when a bound is given.
			var adm *persist.Admission
			if c.Flags().Changed("max-unconsumed") || c.Flags().Changed("max-ahead") || admTask != "" || c.Flags().Changed("block") {
				if c.Flags().Changed("block") && block <= 0 {
					// Admission.Timeout 0 is its default wait (30 s), which --block 0 must
					// not silently mean; below 0, the same rule (not the Admission's "≥ 0").
					return plane.Invalid("--block", block, "a duration > 0, the longest a batch waits for room, e.g. 5m (leave --block out to fail at once)")
				}
				adm = &persist.Admission{Task: admTask, MaxUnconsumed: maxUnconsumed, MaxAhead: -1, Block: c.Flags().Changed("block"), Timeout: block}
				if c.Flags().Changed("max-ahead") {
					if maxAhead < 0 {
						// As the HTTP put's max_ahead: below 0 is no bound in Go's Admission,
						// which a flag given must not silently mean.
						return plane.Invalid("--max-ahead", maxAhead, "≥ 0 (leave --max-ahead out for no bound)")
					}
					adm.MaxAhead = maxAhead
				}
				if err := persist.CheckAdmission(adm); err != nil {
					// Named by the flag, not by the HTTP parameter the check names.
					var ie *plane.InvalidError
					if errors.As(err, &ie) {
						flag := map[string]string{"admission_task": "--admission-task", "max_unconsumed": "--max-unconsumed",
							"max_ahead": "--max-ahead", "admission_timeout": "--block"}[ie.Field]
						if flag != "" {
							named := *ie
							named.Field = flag
							named.Rule = putAdmissionFlags.Replace(ie.Rule)
							return &named
						}
					}
					return err
				}
			}
			// The queue is opened at the first batch, once it is read, and created only
			// when that batch passes the checks every store makes (filestore.CheckPut), so
			// that a refused put creates nothing, as the server's put routes.
			var q *persist.Queue
			err := func() error {
				sc := bufio.NewScanner(a.stdin)
				sc.Buffer(make([]byte, 1<<20), maxPutLine)
				var recs []persist.Record
				var idx []int64
				batches := 0
				flush := func() error {
					if len(recs) == 0 {
						return nil
					}
					opts := &persist.PutOpts{Admission: adm}
					if putID != "" {
						opts.ID = putID + "." + strconv.Itoa(batches)
					}
					if q == nil {
						var err error
						if q, err = a.openDataPut(c.Context(), o, args[0], partition, recs, opts); err != nil {
							return err
						}
					}
					var got []int64
					var err error
					got, err = q.PutAdmitted(c.Context(), partition, recs, opts)
					batches++
					if err != nil {
						return err
					}
					idx = append(idx, got...)
					recs = recs[:0]
					return nil
				}
				line := 0
				for sc.Scan() {
					line++
					text := strings.TrimSpace(sc.Text())
					if text == "" {
						continue
					}
					b, err := api.JSONToWire([]byte(text))
					if err != nil {
						return inputf("line %d: not JSON by the mapping of docs/http-api.md: %v", line, err)
					}
					rec, err := persist.RecordFromWire(fmt.Sprintf("line %d", line), b)
					if err != nil {
						return err
					}
					recs = append(recs, rec)
					if len(recs) == batch {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
					return inputf("line %d: longer than %s; a record is at most %s encoded (store large data in a blob store and put its key)",
						line+1, humanize.IBytes(maxPutLine), humanize.IBytes(persist.MaxRecordBytes))
				} else if err != nil {
					return fmt.Errorf("read stdin: %w", err)
				}
				if err := flush(); err != nil {
					return err
				}
				if a.json {
					if idx == nil {
						idx = []int64{}
					}
					return a.printJSON(map[string]any{"count": len(idx), "indexes": idx})
				}
				if len(idx) == 0 {
					_, err := fmt.Fprintln(a.stdout, "put 0 records")
					return err
				}
				if len(idx) == 1 {
					_, err := fmt.Fprintf(a.stdout, "put 1 record: index %d\n", idx[0])
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "put %d records: indexes %d–%d\n", len(idx), idx[0], idx[len(idx)-1])
				return err
			}()
			return closeData(c, q, err)
		},
	}
	cmd.Flags().StringVar(&admTask, "admission-task", "", "back-pressure: the trainer's task whose unconsumed records --max-unconsumed bounds")
	cmd.Flags().Int64Var(&maxUnconsumed, "max-unconsumed", 0, "back-pressure: put a batch only while --admission-task has at most this many records of the partition unconsumed, the batch's own included (0: no bound)")
	cmd.Flags().Int64Var(&maxAhead, "max-ahead", 0, "back-pressure: put a batch only while its records' target_weight_version (else weight_version) is at most this far above the queue's version")
	cmd.Flags().DurationVar(&block, "block", 0, "back-pressure: wait up to this long for room (the trainer consuming or advancing the version) instead of failing at once, e.g. 5m (> 0)")
	nonNegative(cmd, "max-unconsumed", "max-ahead")
	cmd.Flags().StringVar(&putID, "put-id", "", "idempotency id: batch k is put with the id ID.k, and a repeat with the same ID (a retried job) answers the first put's indexes and writes nothing (kept 10 min)")
	cmd.Flags().StringVar(&partition, "partition", persist.DefaultPartition, "partition of the records")
	cmd.Flags().IntVar(&batch, "batch", 1000, "records per atomic put")
	positive(cmd, "batch")
	return cmd
}

// rowJSON returns the JSON line of a row: {"index", "partition", "fields"}, values by the
// mapping of docs/http-api.md.
func rowJSON(r persist.Row) ([]byte, error) {
	b, err := persist.RecordToWire("fields", r.Fields)
	if err != nil {
		return nil, err
	}
	part, _ := json.Marshal(r.Partition)
	out := fmt.Appendf(nil, `{"index":%d,"partition":%s,"fields":`, r.Index, part)
	out = api.WireToJSON(out, b)
	return append(out, '}', '\n'), nil
}

func newDataGetCmd(a *app, o *dataOpts) *cobra.Command {
	var offset int64
	var limit int
	var fields, partition string
	cmd := &cobra.Command{
		Use:   "get QUEUE",
		Short: "Print records as JSON lines ({index, partition, fields})",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts := &persist.GetOpts{Partition: partition}
			if fields != "" {
				opts.Fields = strings.Split(fields, ",")
			}
			return a.withData(c, o, args[0], func(q *persist.Queue) error {
				// Pages: a Scan answers up to its limit (over HTTP at most
				// persist.ScanLimitMax) and where the next page starts; an empty page
				// is the end.
				w := bufio.NewWriter(a.stdout)
				for at, left := offset, limit; ; {
					b, next, err := q.Store().Scan(c.Context(), at, left, opts)
					if err != nil {
						return err
					}
					rows, err := b.Rows()
					b.Release()
					if err != nil {
						return err
					}
					for _, r := range rows {
						line, err := rowJSON(r)
						if err != nil {
							return err
						}
						w.Write(line) //nolint:errcheck // Flush reports it
					}
					if left -= len(rows); len(rows) == 0 || left <= 0 || next <= at {
						break
					}
					at = next
				}
				return w.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&offset, "offset", 0, "first global index")
	f.IntVar(&limit, "limit", 100, "most records to print")
	f.StringVar(&fields, "fields", "", "comma-separated fields (default: all)")
	f.StringVar(&partition, "partition", "", "only this partition (default: all)")
	nonNegative(cmd, "offset")
	return cmd
}

func newDataStatsCmd(a *app, o *dataOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "stats QUEUE",
		Short: "Counters and storage of a data queue",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.withData(c, o, args[0], func(q *persist.Queue) error {
				st, err := q.Stats(c.Context())
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"next_index": st.NextIndex, "len": st.Len, "cleared": st.Cleared,
						"tail_rows": st.TailRows, "fragment_rows": st.FragmentRows, "fragments": st.Fragments,
						"fragment_bytes": st.FragmentBytes, "manifest_version": st.ManifestVersion,
						"pending_fragments": st.PendingFragments, "partitions": nonNilMap(st.Partitions),
						"consumed_by_task": nonNilMap(st.ConsumedByTask), "weight_version": st.WeightVersion,
						"stale_dropped": st.StaleDropped, "groups_dropped": st.GroupsDropped, "samples_unused": st.SamplesUnused})
				}
				tw := a.table()
				for _, kv := range []struct {
					k string
					v any
				}{{"records", st.Len}, {"next index", st.NextIndex}, {"cleared", st.Cleared}, {"tail rows", st.TailRows},
					{"fragment rows", st.FragmentRows}, {"fragments", st.Fragments}, {"fragment bytes", st.FragmentBytes},
					{"partitions", len(st.Partitions)}, {"pending fragments", st.PendingFragments},
					// The RL figures (docs/persist.md, "Weight versions, …"): what a trainer
					// whose reads come back short asks first.
					{"weight version", st.WeightVersion}, {"stale dropped", st.StaleDropped},
					{"groups dropped", st.GroupsDropped}, {"samples unused", st.SamplesUnused}} {
					tw.row(kv.k, kv.v)
				}
				return tw.Flush()
			})
		},
	}
}

// newDataVersionCmd shows a data queue's current weight version (persist.Queue.Version),
// or advances it with --set (Queue.SetVersion: versions never go back).
func newDataVersionCmd(a *app, o *dataOpts) *cobra.Command {
	var set int64
	cmd := &cobra.Command{
		Use:   "version QUEUE",
		Short: "Show a data queue's current weight version, or advance it with --set N (versions never go back)",
		Long: `Prints the data queue's current weight version: the version the trainer published last
(Weights.publish, set_version), against which staleness-bounded reads judge records and
--max-ahead back-pressure holds producers. --set N advances it to N, as a trainer's
set_version does: the same version again changes nothing, a lower one is refused (exit 2).
A queue that does not exist yet is at version 0 (said on stderr; the read creates nothing);
--set creates it, as set_version does.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			show := func(v int64) error {
				if a.json {
					return a.printJSON(map[string]any{"version": v})
				}
				_, err := fmt.Fprintln(a.stdout, v)
				return err
			}
			// --set creates the queue, as POST D/version and the SDKs' set_version do; a
			// read creates nothing, and a queue that does not exist yet is at version 0,
			// as GET D/version and the SDKs' version() answer.
			setting := c.Flags().Changed("set")
			err := a.withDataQueue(c, o, args[0], setting, func(q *persist.Queue) error {
				if setting {
					if err := q.SetVersion(c.Context(), set); err != nil {
						return err
					}
				}
				v, err := q.Version(c.Context())
				if err != nil {
					return err
				}
				return show(v)
			})
			if !setting && errors.Is(err, persist.ErrNotFound) {
				ns := cmp.Or(a.namespace, os.Getenv(lakeshore.EnvNamespace), lakeshore.NamespaceDefault)
				fmt.Fprintf(a.stderr, "lakeshore: data queue %s does not exist in namespace %s yet: version 0 (its first put or version --set creates it)\n", args[0], ns)
				return show(0)
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&set, "set", 0, "advance the current version to this (≥ the current one)")
	nonNegative(cmd, "set")
	return cmd
}

func nonNilMap(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

func newDataFlushCmd(a *app, o *dataOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "flush QUEUE",
		Short: "Write the durable tail into Parquet fragments",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.withData(c, o, args[0], func(q *persist.Queue) error { return q.Flush(c.Context()) })
		},
	}
}

func newDataPartitionsCmd(a *app, o *dataOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "partitions QUEUE",
		Short: "Partitions and the records put into each (cleared ones included)",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.withData(c, o, args[0], func(q *persist.Queue) error {
				st, err := q.Stats(c.Context())
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(nonNilMap(st.Partitions))
				}
				names := make([]string, 0, len(st.Partitions))
				for p := range st.Partitions {
					names = append(names, p)
				}
				sort.Strings(names)
				tw := a.table()
				tw.row("PARTITION", "RECORDS") // always, as every list's header (consumption, jobs, queues)
				for _, p := range names {
					tw.row(p, st.Partitions[p])
				}
				return tw.Flush()
			})
		},
	}
}

func newDataConsumptionCmd(a *app, o *dataOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "consumption QUEUE",
		Short: "Samples each task is done with, per partition: handed out, or dropped by its reads",
		Long: `Samples each task is done with, per partition and task: the samples marked consumed,
which no read of the task hands out again. They are those its reads handed out (or marked
consumed), and also those its reads dropped without handing them out: stale records
(a staleness bound's drop policy), the samples of groups a group sampler dropped, and the
unused samples of over-sampled groups. CONSUMED is the task's progress through the
partition (what back-pressure counts against), not the number of samples it received.

When reads dropped samples, a note on stderr says how many, queue-wide over every task
(the counters of 'data stats': stale dropped, groups dropped, samples unused), since
they are counted in CONSUMED.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.withData(c, o, args[0], func(q *persist.Queue) error {
				st, err := q.Stats(c.Context())
				if err != nil {
					return err
				}
				type row struct {
					Partition string `json:"partition"`
					Task      string `json:"task"`
					Consumed  int64  `json:"consumed"`
				}
				var rows []row
				for k, n := range st.ConsumedByTask {
					p, t, _ := strings.Cut(k, "/")
					rows = append(rows, row{p, t, n})
				}
				sort.Slice(rows, func(i, j int) bool {
					return rows[i].Partition < rows[j].Partition || rows[i].Partition == rows[j].Partition && rows[i].Task < rows[j].Task
				})
				if a.json {
					for _, r := range rows {
						b, _ := json.Marshal(r)
						fmt.Fprintf(a.stdout, "%s\n", b)
					}
					return nil
				}
				tw := a.table()
				tw.row("PARTITION", "TASK", "CONSUMED")
				for _, r := range rows {
					tw.row(r.Partition, r.Task, r.Consumed)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if st.StaleDropped > 0 || st.GroupsDropped > 0 || st.SamplesUnused > 0 {
					// CONSUMED counts samples the reads dropped as well as those they handed
					// out: said, with the queue's drop counters (kept for all tasks at once).
					fmt.Fprintf(a.stderr, "note: CONSUMED includes samples dropped without being handed out; queue-wide, all tasks: "+
						"%d dropped as stale, %d groups dropped, %d samples of over-sampled groups unused (see 'lakeshore data stats')\n",
						st.StaleDropped, st.GroupsDropped, st.SamplesUnused)
				}
				return nil
			})
		},
	}
}
