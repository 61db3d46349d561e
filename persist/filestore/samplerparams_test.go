package filestore

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestSamplerParamsRefused: sampler parameters are one JSON object with each key once
// (as the HTTP API requires), and a refusal says what is wrong in JSON terms.
func TestSamplerParamsRefused(t *testing.T) {
	t.Parallel()
	for params, want := range map[string]string{
		`[1]`:              "got a JSON array, not an object",
		`"s"`:              "got a JSON string, not an object",
		`{"n": 4, "n": 8}`: `parameter "n" is given twice`,
		`{"n": "x"}`:       "n must be a JSON number",
		`{"n": 4} 5`:       "data follows the object",
		`{"n": 4.0}`:       "n must be an integer (digits, no fraction or exponent)",
		`{"n": 4e0}`:       "n must be an integer (digits, no fraction or exponent)",
	} {
		_, err := persist.DefaultSamplers().New(persist.SamplerSpec{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(params)})
		require.ErrorIs(t, err, persist.ErrInvalid, params)
		require.ErrorContains(t, err, want, params)
	}
	_, err := persist.DefaultSamplers().New(persist.SamplerSpec{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(`{"n": 4}`)})
	require.NoError(t, err)
}

// TestRequestErrorsNameParameters: errors name a request's parameters as a user
// writes them (batch_size), never a Go type (MetaRequest.BatchSize).
func TestRequestErrorsNameParameters(t *testing.T) {
	t.Parallel()
	q := openTemp(t, nil)
	_, err := q.fileReader().GetMeta(context.Background(), &persist.MetaRequest{Fields: []string{"x"}, Task: "t"})
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.EqualError(t, err, "invalid batch_size 0: ≥ 1")
	_, err = q.fileReader().GetMeta(context.Background(), &persist.MetaRequest{BatchSize: 1, Task: "t"})
	require.EqualError(t, err, "invalid fields: at least one field name")
	err = (persist.Shard{WorldSize: 2, Rank: 2}).Validate()
	require.ErrorContains(t, err, "invalid shard rank 2: in [0, world_size)")
}
