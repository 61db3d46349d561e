package rl_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/rl"
	"github.com/lakeshore-dev/lakeshore/scope"
)

// One trainer step after another: the trainer publishes version v's weights, a Pool keeps
// rollout jobs queued, a worker runs them with Rollout (each job's records tagged with the
// version it ran with), and the trainer reads a batch bounded by staleness, commits it and
// publishes the next version. Publishing a version below the current one is refused.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rl-example-")
	check(err)
	defer os.RemoveAll(dir)

	d, err := lakeshore.Open(ctx, ":memory:", nil) // the job plane: rollouts are jobs
	check(err)
	defer d.Close()
	jobs, err := d.Queue("rollouts", nil)
	check(err)
	data, err := persist.Open(ctx, "traj", &persist.Config{Dir: dir}, filestore.Driver()) // the data plane
	check(err)
	defer data.Close(ctx)
	s, err := scope.Open(ctx, "file://"+dir, "weights") // where the weights go, by version
	check(err)
	defer s.Close()
	weights := &rl.Weights{Data: data, Scope: s}

	play := rl.Rollout(weights, func(ctx context.Context, p rl.Policy, job *lakeshore.Job) ([]persist.Record, error) {
		var seed int64
		if err := job.Decode(&seed); err != nil {
			return nil, err
		}
		bias := p.Weights.(map[string]any)["bias"].(float64)
		return []persist.Record{{"seed": seed, "reward": bias + 1}, {"seed": seed, "reward": bias + 2}}, nil
	}, nil)
	pool := &rl.Pool{Queue: jobs, InFlight: 2, Payload: func(i int64) any { return i }}

	check(weights.Publish(ctx, 0, map[string]any{"bias": 0.0}))
	reader := data.Reader()
	for step := int64(1); step <= 2; step++ {
		_, err := pool.TopUp(ctx)
		check(err)
		for range 2 { // a worker's jobs (lakeshore.RunWorker with lakeshore.Handle("rollouts", play))
			_, err := jobs.Working(ctx, play, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
			check(err)
		}
		batch, meta, err := reader.GetBatchLeased(ctx, &persist.MetaRequest{Fields: []string{"reward", persist.WeightVersionField},
			BatchSize: 4, Task: "train", Staleness: &persist.Staleness{Max: 1}, Wait: true, Timeout: 10 * time.Second}, 30*time.Second)
		check(err)
		versions, err := batch.ValuesAt(persist.WeightVersionField, meta.Indexes)
		check(err)
		// ... the optimizer step on the batch's rewards ...
		check(reader.Commit(ctx, meta))
		check(weights.Publish(ctx, step, map[string]any{"bias": float64(step)}))
		fmt.Println("step", step, "trained on", batch.Len(), "records of versions", versions)
		batch.Release()
	}
	fmt.Println(weights.Publish(ctx, 1, map[string]any{"bias": 9.0}))
	// Output:
	// step 1 trained on 4 records of versions [0 0 0 0]
	// step 2 trained on 4 records of versions [1 1 1 1]
	// invalid version 1: the queue is at version 2: use 2 or more (versions never go back)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
