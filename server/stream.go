package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// StreamTimeoutDefault is the silence after which a live stream ends with a timeout error
// when the request names no timeout.
const StreamTimeoutDefault = 30 * time.Second

func (s *Server) handleInvocationStream(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	return s.stream(w, r, p, plane.Journal{InvocationID: id})
}

func (s *Server) handleTopicStream(w http.ResponseWriter, r *http.Request, p *principal) error {
	j, err := topicOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, j.Namespace, j.Queue, anyPerms...); err != nil {
		return err
	}
	return s.stream(w, r, p, j)
}

// streamWriter writes the events of a live stream: SSE or a sequence of msgpack
// StreamEvents, flushed after each.
type streamWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	sse  bool
	err  error
	sent int
}

func (sw *streamWriter) event(ev *api.StreamEvent) {
	if sw.err != nil {
		return
	}
	var b []byte
	if sw.sse {
		var kind string
		var v any
		switch {
		case ev.Frame != nil:
			kind, v = "frame", ev.Frame
		case ev.Error != nil:
			kind, v = "error", ev.Error
		default:
			b = []byte(": ping\n\n")
		}
		if v != nil {
			data, err := api.JSON.Marshal(v)
			if err != nil {
				sw.err = err
				return
			}
			var sb strings.Builder
			if ev.Frame != nil {
				sb.WriteString("id: " + strconv.FormatInt(ev.Frame.Seq, 10) + "\n")
			}
			fmt.Fprintf(&sb, "event: %s\ndata: %s\n\n", kind, data)
			b = []byte(sb.String())
		}
	} else {
		var err error
		if b, err = ev.MarshalMsg(nil); err != nil {
			sw.err = err
			return
		}
	}
	if _, sw.err = sw.w.Write(b); sw.err == nil {
		sw.sent++
	}
}

func (sw *streamWriter) flush() {
	if sw.err == nil {
		sw.err = sw.rc.Flush()
	}
}

// stream serves a live stream of journal j from ?since= until its END or ERROR frame,
// ?timeout= seconds of silence (then an error event with code timeout), the client going
// away, or the server stopping (an error event with code shutting_down).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p *principal, j plane.Journal) error {
	since, limit, _, err := frameQuery(r)
	if err != nil {
		return err
	}
	silence, err := querySeconds(r, "timeout")
	if err != nil {
		return err
	}
	if silence == 0 {
		silence = StreamTimeoutDefault
	}
	// A first read without waiting reports not_found and invalid as a plain error body.
	res, err := s.drv.FrameRead(r.Context(), &plane.FrameReadParams{Journal: j, Since: since, Limit: limit})
	if err != nil {
		return err
	}
	ctx, _, release, err := s.longPoll(r, p, s.cfg.LongPollMax)
	if err != nil {
		return err
	}
	defer release()

	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	accept := r.Header.Get("Accept")
	sw.sse = !strings.Contains(accept, "msgpack")
	if sw.sse {
		w.Header().Set("Content-Type", api.ContentTypeEventStream)
	} else {
		w.Header().Set("Content-Type", api.ContentTypeMsgpack)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw.flush()
	// The stream outlives the http.Server's write timeout, if any.
	_ = sw.rc.SetWriteDeadline(time.Time{})

	lastFrame := time.Now()
	for sw.err == nil {
		// A stream may last as long as frames keep coming: a stored token revoked or expired
		// meanwhile ends it (an error event, code unauthorized) before it delivers more.
		if err := s.recheckToken(r, p); err != nil {
			eb, _, _ := publicErrorBody(err)
			sw.event(&api.StreamEvent{Error: &eb})
			sw.flush()
			return nil
		}
		for _, f := range res.Frames {
			fr := api.NewFrame(&f)
			sw.event(&api.StreamEvent{Frame: &fr})
			since = f.Seq
		}
		if len(res.Frames) > 0 {
			lastFrame = time.Now()
			sw.flush()
		}
		if res.Closed && len(res.Frames) == 0 || res.Closed && lastClosing(res.Frames) {
			return nil
		}
		if len(res.Frames) == 0 && !res.Closed {
			if time.Since(lastFrame) >= silence {
				eb, _, _ := publicErrorBody(fmt.Errorf("%w: no frame for %s", plane.ErrTimeout, silence))
				sw.event(&api.StreamEvent{Error: &eb})
				sw.flush()
				return nil
			}
		}
		if ctx.Err() != nil {
			if err := stopErr(ctx, ctx.Err()); err != ctx.Err() {
				eb, _, _ := publicErrorBody(err)
				sw.event(&api.StreamEvent{Error: &eb})
				sw.flush()
			}
			return nil
		}
		wait := min(s.cfg.StreamPing, max(silence-time.Since(lastFrame), time.Millisecond))
		res, err = s.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: j, Since: since, Limit: limit, Wait: wait})
		if err != nil {
			if ctx.Err() != nil {
				res = &plane.FrameReadResult{}
				continue // reported above on the next turn
			}
			eb, _, hidden := publicErrorBody(err)
			if hidden != "" {
				s.log.Error("stream: reading frames", logError, cut(hidden, maxLoggedError))
			}
			sw.event(&api.StreamEvent{Error: &eb})
			sw.flush()
			return nil
		}
		if len(res.Frames) == 0 && !res.Closed && time.Since(lastFrame) < silence && ctx.Err() == nil {
			sw.event(&api.StreamEvent{Ping: true})
			sw.flush()
		}
	}
	return nil
}

// lastClosing reports whether the last frame closes its journal.
func lastClosing(frames []plane.Frame) bool {
	if len(frames) == 0 {
		return false
	}
	k := frames[len(frames)-1].Kind
	return k == plane.FrameEnd || k == plane.FrameError
}
