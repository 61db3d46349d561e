package compat

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The frame kinds of the real package (docs/wire.md, "Frame").
const (
	kindValue = 0
	kindChunk = 1
	kindBegin = 2
	kindEnd   = 3
	kindError = 4
)

// frame is one real-package Frame [kind, seq, body, meta] with body and meta kept as their
// msgpack bytes.
type frame struct {
	kind int
	seq  int64
	body []byte // one msgpack value, byte-exact
}

// parseFrame splits one whole Frame. Errors: *plane.InvalidError.
func parseFrame(b []byte) (frame, error) {
	bad := func(why string) (frame, error) {
		return frame{}, plane.Invalid("bytes", nil, "one Frame [kind, seq, body, meta]: "+why)
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil || n != 4 {
		return bad("not a 4-element array")
	}
	var f frame
	if f.kind, rest, err = msgp.ReadIntBytes(rest); err != nil || f.kind < kindValue || f.kind > kindError {
		return bad("kind is not 0–4")
	}
	if msgp.NextType(rest) == msgp.NilType {
		f.seq, rest = -1, rest[1:]
	} else if f.seq, rest, err = msgp.ReadInt64Bytes(rest); err != nil {
		return bad("seq is not an integer")
	}
	after, err := msgp.Skip(rest)
	if err != nil {
		return bad("body: " + err.Error())
	}
	f.body = rest[:len(rest)-len(after)]
	if after, err = msgp.Skip(after); err != nil || len(after) != 0 {
		return bad("meta is not one value")
	}
	return f, nil
}

// appendFrame re-frames one of our journal frames as the real package's Frame: VALUE →
// [0, seq, value, nil], END → [3, seq, nil, nil], ERROR → [4, seq, nil, {type, message}].
func appendFrame(b []byte, f *plane.Frame) []byte {
	b = msgp.AppendArrayHeader(b, 4)
	switch f.Kind {
	case plane.FrameValue:
		b = msgp.AppendInt(b, kindValue)
		b = msgp.AppendInt64(b, f.Seq)
		b = append(b, f.Value...)
		return msgp.AppendNil(b)
	case plane.FrameError:
		info, err := plane.DecodeErrorInfo(f.Value)
		if err != nil {
			info = plane.ErrorInfo{Type: "Error", Message: "undecodable error frame"}
		}
		b = msgp.AppendInt(b, kindError)
		b = msgp.AppendInt64(b, f.Seq)
		b = msgp.AppendNil(b)
		b = msgp.AppendMapHeader(b, 2)
		b = msgp.AppendString(b, "type")
		b = msgp.AppendString(b, info.Type)
		b = msgp.AppendString(b, "message")
		return msgp.AppendString(b, info.Message)
	default: // END
		b = msgp.AppendInt(b, kindEnd)
		b = msgp.AppendInt64(b, f.Seq)
		b = msgp.AppendNil(b)
		return msgp.AppendNil(b)
	}
}

// streamWait is how long one read of a stream waits for a frame before reading again.
const streamWait = 15 * time.Second

// writeStream answers journal's frames after since, then live ones, until the journal is
// closed (after its last frame), the client leaves or the server stops. The stream holds
// one of p's long-poll slots while it is open.
func (h *handlers) writeStream(w http.ResponseWriter, r *http.Request, p Principal, journal plane.Journal, since int64) error {
	rc := http.NewResponseController(w)
	wrote := false
	ctx, _, release, err := h.longPoll(r, p, waitMax)
	if err != nil {
		return err
	}
	defer release()
	wait := time.Duration(0) // the first read answers at once: the headers go out at once
	for {
		res, err := h.cfg.Driver.FrameRead(ctx, &plane.FrameReadParams{Journal: journal, Since: since, Wait: wait})
		wait = streamWait
		if err != nil {
			if wrote || ctx.Err() != nil {
				return nil // the stream has begun (or no one listens): end it
			}
			return err
		}
		// A stream lasts as long as its journal stays open: a token revoked or expired
		// meanwhile gets nothing more, and holds its long-poll slot no longer (the stream
		// ends; reconnecting answers 401).
		if err := h.recheck(r, p); err != nil {
			if wrote {
				return nil
			}
			return err
		}
		if !wrote {
			w.Header().Set("Content-Type", "application/x-msgpack-stream")
			w.WriteHeader(http.StatusOK)
			wrote = true
		}
		var b []byte
		for i := range res.Frames {
			b = appendFrame(b, &res.Frames[i])
			since = res.Frames[i].Seq
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		if res.Closed && len(res.Frames) == 0 || ctx.Err() != nil {
			return nil
		}
	}
}

// chunkRequest is the body of POST /v1/daemon/result-chunk.
type chunkRequest struct {
	InvocationID string `msgpack:"invocation_id"`
	Topic        string `msgpack:"topic"`
	Seq          *int64 `msgpack:"seq"`
	Bytes        []byte `msgpack:"bytes"`
	Final        bool   `msgpack:"final"`
}

// resultChunk appends one real-package Frame to an invocation's journal (the claimed job of
// some worker, fenced by its held token) or to a topic. The client's seq makes the post
// idempotent: a seq the journal already has is absorbed (duplicate: true). On an invocation,
// END is a final post: it ends the journal and the ack that follows settles the job (the
// plane's rule, planekit.JournalClosed; issue 24 semantics 1). An ERROR frame is not
// stored: the nack that follows ends the job, and the journal with its derived ERROR.
func (h *handlers) resultChunk(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req chunkRequest
	if err := h.readBody(w, r, &req); err != nil {
		return err
	}
	name := req.InvocationID
	if name == "" {
		name = req.Topic
	}
	f, err := parseFrame(req.Bytes)
	if err != nil {
		return err
	}
	if f.kind == kindChunk || f.kind == kindBegin {
		return plane.Invalid("bytes", nil, "CHUNK and BEGIN frames are not supported: post each value as one VALUE frame")
	}
	seq := f.seq
	if req.Seq != nil {
		seq = *req.Seq
	}
	ctx := r.Context()
	var journal plane.Journal
	token := ""
	var inv *plane.Invocation
	if plane.ValidateID(name) == nil {
		// A job handed out by poll (on any replica), whatever the namespace of the token
		// that posts.
		if inv, err = h.invocation(ctx, p, "", name, plane.PermissionConsume); err != nil && !errors.Is(err, plane.ErrNotFound) {
			return err
		}
	}
	if inv != nil {
		x, ok, err := h.leaseOf(ctx, inv)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: no worker polled invocation %s's attempt %d", plane.ErrLeaseLost, inv.ID, inv.Attempt)
		}
		journal.InvocationID, token = inv.ID, x.token
		h.extend(r, []string{inv.ID}, []string{token})
	} else if journal, err = h.journalOf(r, p, daemonNamespace(p), name, plane.PermissionConsume, plane.PermissionSubmit); err != nil {
		return err
	}
	if seq >= 0 {
		// Absorb a seq the journal already has (a retried post).
		got, err := h.cfg.Driver.FrameRead(ctx, &plane.FrameReadParams{Journal: journal, Since: seq - 1, Limit: 1})
		if err != nil {
			return err
		}
		if len(got.Frames) > 0 {
			return writeBody(w, map[string]any{"seq": seq, "duplicate": true})
		}
	}
	posted := seq
	if f.kind == kindValue || f.kind == kindEnd && journal.InvocationID != "" {
		n, err := h.cfg.Driver.FramePost(ctx, &plane.FramePostParams{Journal: journal, Token: token, Value: f.body, Final: f.kind == kindEnd})
		if err != nil {
			return err
		}
		if seq < 0 {
			posted = n
		}
	}
	if journal.Topic != "" && (req.Final || f.kind == kindEnd || f.kind == kindError) {
		n, err := h.cfg.Driver.FramePost(ctx, &plane.FramePostParams{Journal: journal, Value: []byte{0xc0}, Final: true})
		if err != nil {
			return err
		}
		if seq < 0 {
			posted = n
		}
	}
	if posted < 0 {
		return writeBody(w, map[string]any{"seq": nil, "duplicate": false})
	}
	return writeBody(w, map[string]any{"seq": posted, "duplicate": false})
}
