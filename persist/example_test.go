package persist_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
)

func ExampleOpen() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "persist-example")
	defer os.RemoveAll(root)

	q, err := persist.Open(ctx, "events", &persist.Config{Dir: root}, filestore.Driver())
	if err != nil {
		panic(err)
	}
	i, _ := q.Put(ctx, persist.Record{"step": 1, "reward": 0.5})
	more, _ := q.PutBatch(ctx, []persist.Record{{"step": 2, "reward": 0.8}, {"step": 3, "reward": 0.9}})
	fmt.Println("indexes:", i, more)
	if err := q.Close(ctx); err != nil { // flushes into a Parquet fragment
		panic(err)
	}

	q, _ = persist.Open(ctx, "events", &persist.Config{Dir: root}, filestore.Driver())
	defer q.Close(ctx)
	rows, _ := q.Get(ctx, 1, 10, nil)
	for _, r := range rows {
		fmt.Println(r.Index, r.Fields["step"], r.Fields["reward"])
	}
	// Output:
	// indexes: 0 [1 2]
	// 1 2 0.8
	// 2 3 0.9
}

func ExampleReader_GetBatch() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "persist-example")
	defer os.RemoveAll(root)
	q, _ := persist.Open(ctx, "rollouts", &persist.Config{Dir: root}, filestore.Driver())
	defer q.Close(ctx)

	// Rollout workers put responses; a reward model adds rewards later.
	idx, _ := q.PutPartition(ctx, "train_0", []persist.Record{
		{"prompt": "2+2", "response": "4"}, {"prompt": "2+2", "response": "5"}, {"prompt": "3+3", "response": "6"},
	})
	_ = q.PutFields(ctx, "train_0", idx[:2], []persist.Record{{"reward": 1.0}, {"reward": 0.0}})

	// The trainer reads only samples whose fields are all produced.
	b, meta, _ := q.Reader().GetBatch(ctx, &persist.MetaRequest{
		Fields: []string{"response", "reward"}, BatchSize: 32, Task: "actor_train", Partition: "train_0",
	})
	defer b.Release()
	fmt.Println("size:", meta.Size, "indexes:", meta.Indexes, "fields:", meta.FieldNames())
	rows, _ := b.Rows()
	for _, r := range rows {
		fmt.Println(r.Index, r.Fields["response"], r.Fields["reward"])
	}
	// Output:
	// size: 2 indexes: [0 1] fields: [response reward]
	// 0 4 1
	// 1 5 0
}

func ExampleKV() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "persist-example")
	defer os.RemoveAll(root)
	q, _ := persist.Open(ctx, "kv_store", &persist.Config{Dir: root}, filestore.Driver())
	defer q.Close(ctx)
	kv := persist.KV(q)

	_, _ = kv.Put(ctx, "prod", "sess-42", persist.Record{"turns": 3}, map[string]string{"status": "running"})
	_, _ = kv.BatchPut(ctx, "prod", []string{"sess-43", "sess-44"}, []persist.Record{{"turns": 1}, {"turns": 7}}, nil)
	// Putting a key again merges fields and tags; its index stays.
	_, _ = kv.Put(ctx, "prod", "sess-42", persist.Record{"score": 0.9}, map[string]string{"status": "complete"})
	_ = kv.Clear(ctx, "prod", []string{"sess-43"})

	entries, _ := kv.BatchGet(ctx, "prod", []string{"sess-42", "sess-44"}, nil)
	for _, e := range entries {
		fmt.Println(e.Key, e.Index, e.Tags["status"], e.Fields["turns"], e.Fields["score"])
	}
	list, _ := kv.List(ctx, "prod")
	fmt.Println("keys:", len(list))
	// Output:
	// sess-42 0 complete 3 0.9
	// sess-44 2  7 <nil>
	// keys: 2
}

func ExampleQueue_Stream() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "persist-example")
	defer os.RemoveAll(root)
	q, _ := persist.Open(ctx, "events", &persist.Config{Dir: root}, filestore.Driver())
	defer q.Close(ctx)
	for i := 0; i < 5; i++ {
		_, _ = q.Put(ctx, persist.Record{"step": i})
	}
	// Without Wait the stream ends (io.EOF) when it has caught up; with Wait it
	// blocks for new rows until IdleTimeout passes without any.
	s := q.Stream(&persist.StreamOpts{BatchSize: 2, Wait: true, IdleTimeout: 50 * time.Millisecond})
	for {
		rows, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		fmt.Println(len(rows), "rows from index", rows[0].Index)
	}
	// Output:
	// 2 rows from index 0
	// 2 rows from index 2
	// 1 rows from index 4
}
