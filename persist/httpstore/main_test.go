package httpstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestMain runs a child role of a multi-process test (startHTTPChild) when asked to,
// else the tests, under goleak (persisttest.Main).
func TestMain(m *testing.M) { persisttest.Main(m, runChild) }

// runChild runs a child role: the directory argument is the server's URL.
func runChild(role string) int {
	ctx := context.Background()
	url, arg := os.Getenv(persisttest.ChildDirEnv), os.Getenv(persisttest.ChildArgEnv)
	switch role {
	case "httpfollower":
		return childHTTPFollower(ctx, url, arg)
	case "httpconsumer":
		return childHTTPConsumer(ctx, url, arg)
	case "httptrainer":
		holdAt, _ := strconv.Atoi(arg)
		q, err := persist.Open(ctx, "q", &persist.Config{URL: url}, httpstore.Driver())
		if err != nil {
			return persisttest.ChildFailed("open", err)
		}
		defer q.Close(ctx)
		return persisttest.Trainer(ctx, q, holdAt, os.Stdout, os.Stderr)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// childHTTPFollower opens queue q on the server at url (LAKESHORE_URL's way: Config
// without Dir), prints "ready", then follows the log with a waiting Stream and prints
// the index of every row until it has seen want rows.
func childHTTPFollower(ctx context.Context, url, want string) int {
	n, _ := strconv.Atoi(want)
	os.Setenv(persist.EnvURL, url)
	q, err := persist.Open(ctx, "q", &persist.Config{}, httpstore.Driver())
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	defer q.Close(ctx)
	fmt.Println("ready")
	s := q.Stream(&persist.StreamOpts{Wait: true, IdleTimeout: 30 * time.Second, BatchSize: 100})
	for seen := 0; seen < n; {
		rows, err := s.Next(ctx)
		if err != nil {
			return persisttest.ChildFailed("next", err)
		}
		for _, r := range rows {
			fmt.Println(r.Index)
		}
		seen += len(rows)
	}
	return 0
}

// childHTTPConsumer hands out batches of queue q on the server at url to task arg with
// the sequential sampler, waiting for full batches, and prints every index it got
// until it has PERSIST_TEST_COUNT of them.
func childHTTPConsumer(ctx context.Context, url, task string) int {
	count, _ := strconv.Atoi(os.Getenv("PERSIST_TEST_COUNT"))
	q, err := persist.Open(ctx, "q", &persist.Config{URL: url}, httpstore.Driver())
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	defer q.Close(ctx)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for got := 0; got < count; {
		m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"k"}, BatchSize: min(500, count-got), Task: task,
			Wait: true, Timeout: 60 * time.Second})
		if err != nil {
			return persisttest.ChildFailed("get meta", err)
		}
		for _, x := range m.Indexes {
			fmt.Fprintln(out, x)
		}
		got += len(m.Indexes)
	}
	return 0
}
