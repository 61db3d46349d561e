package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

var allSentinels = []*plane.Error{
	plane.ErrNotFound, plane.ErrTimeout, plane.ErrFailed, plane.ErrCancelled, plane.ErrTimedOut, plane.ErrLeaseLost,
	plane.ErrJournalClosed, plane.ErrQueueFull, plane.ErrRateLimited, plane.ErrInvalid, plane.ErrClosed, plane.ErrNotImplemented,
	plane.ErrUnavailable, plane.ErrChanged,
}

// roundTrip sends err through the error body in both codecs and returns what a client
// rebuilds from each.
func roundTrip(t *testing.T, err error) []error {
	t.Helper()
	body, status := api.NewErrorBody(err)
	require.Equal(t, api.Status(body.Code), status)
	var out []error
	for _, c := range []api.Codec{api.Msgpack, api.JSON} {
		data, e := c.Marshal(&body)
		require.NoError(t, e)
		var got api.ErrorBody
		require.NoError(t, c.Unmarshal(data, &got))
		out = append(out, got.Err())
	}
	return out
}

func TestErrorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range allSentinels {
		for _, got := range roundTrip(t, s) {
			for _, other := range allSentinels {
				require.Equal(t, other == s, errors.Is(got, other), "%s: errors.Is %s", s.Code, other.Code)
			}
			require.Equal(t, s.Code, plane.Code(got))
		}
	}

	inv := &plane.InvalidError{Field: "queue name", Value: "bad queue!", Rule: plane.NameRule}
	for _, got := range roundTrip(t, inv) {
		var ie *plane.InvalidError
		require.ErrorAs(t, got, &ie)
		require.Equal(t, inv, ie)
		require.Equal(t, inv.Error(), got.Error())
	}

	te := &plane.TerminalError{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", State: plane.StateKilled, Info: plane.ErrorInfo{Type: "killed", Message: "by ops", Attempt: 2}}
	for _, got := range roundTrip(t, te) {
		var gte *plane.TerminalError
		require.ErrorAs(t, got, &gte)
		require.Equal(t, te, gte)
		require.ErrorIs(t, got, plane.ErrCancelled)
	}

	ae := &plane.AdmissionError{Sentinel: plane.ErrRateLimited, Queue: "default/jobs", Fit: 2, RetryAfter: 1500 * time.Millisecond, Detail: "over 10/s"}
	for _, got := range roundTrip(t, ae) {
		var gae *plane.AdmissionError
		require.ErrorAs(t, got, &gae)
		require.Equal(t, ae, gae)
		require.Equal(t, ae.Error(), got.Error())
		require.ErrorIs(t, got, plane.ErrRateLimited)
		require.False(t, errors.Is(got, plane.ErrQueueFull))
	}

	blocked := &plane.AdmissionError{Sentinel: plane.ErrQueueFull, Queue: "default/jobs", Detail: "at max depth 1", Cause: context.DeadlineExceeded}
	for _, got := range roundTrip(t, blocked) {
		require.ErrorIs(t, got, plane.ErrQueueFull)
		require.ErrorIs(t, got, context.DeadlineExceeded, "the cause of a given-up block survives")
	}

	for _, s := range []*plane.Error{api.ErrUnauthorized, api.ErrForbidden, api.ErrTooManyLongPolls, api.ErrShuttingDown} {
		for _, got := range roundTrip(t, s) {
			require.ErrorIs(t, got, s)
			for _, other := range allSentinels {
				require.False(t, errors.Is(got, other), "%s is no plane sentinel", s.Code)
			}
		}
	}
	for _, got := range roundTrip(t, errors.New("disk on fire")) {
		require.Equal(t, "internal", plane.Code(got))
	}
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	for _, s := range allSentinels {
		require.NotZero(t, api.Codes()[s.Code], "every sentinel has a status: %s", s.Code)
	}
	require.Equal(t, 429, api.Status("queue_full"))
	require.Equal(t, 429, api.Status("rate_limited"))
	require.Equal(t, 404, api.Status("not_found"))
	require.Equal(t, 401, api.Status("unauthorized"))
	require.Equal(t, 403, api.Status("forbidden"))
	require.Equal(t, 500, api.Status("no such code"))
}

func TestCodecFor(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]api.Codec{"application/msgpack": api.Msgpack, "application/x-msgpack": api.Msgpack,
		"application/json": api.JSON, "application/json; charset=utf-8": api.JSON} {
		c, err := api.CodecFor(ct)
		require.NoError(t, err, ct)
		require.Equal(t, want, c, ct)
	}
	for _, ct := range []string{"", "text/plain", "application/xml", "multipart/form-data; boundary=x", ";;"} {
		_, err := api.CodecFor(ct)
		require.ErrorIs(t, err, api.ErrUnsupportedMediaType, ct)
	}
}

func TestSubmitRequestFields(t *testing.T) {
	t.Parallel()
	req := api.SubmitRequest{Key: "k", Priority: 2, AttemptTimeout: 1.5, Deadline: time.UnixMilli(1_700_000_000_000),
		NotBefore: time.UnixMilli(1_700_000_100_000), Delay: 2.5, Payload: api.Value{Wire: []byte{0x81, 0xa1, 'x', 0x01}}}
	for _, c := range []api.Codec{api.Msgpack, api.JSON} {
		data, err := c.Marshal(&req)
		require.NoError(t, err)
		var got api.SubmitRequest
		require.NoError(t, c.UnmarshalRequest(data, &got))
		inv := got.Invocation()
		p := inv.Params()
		require.Equal(t, 1500*time.Millisecond, p.AttemptTimeout)
		require.Equal(t, 2500*time.Millisecond, p.Delay)
		require.True(t, req.Deadline.Equal(p.Deadline))
		require.True(t, req.NotBefore.Equal(p.NotBefore))
		require.Equal(t, req.Payload.Wire, p.Payload, "the payload survives byte-exact")
	}
	j, err := api.JSON.Marshal(&req)
	require.NoError(t, err)
	require.Contains(t, string(j), `"payload":{"x":1}`, "JSON carries the payload as a plain JSON value")
}
