package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// frameQuery reads since, limit and wait.
func frameQuery(r *http.Request) (since int64, limit int, wait time.Duration, err error) {
	if since, err = queryInt(r, "since", -1); err != nil {
		return
	}
	var l int64
	if l, err = queryInt(r, "limit", 0); err != nil {
		return
	}
	if l < 0 || l > plane.FrameReadLimitMax {
		return 0, 0, 0, plane.Invalid("limit", l, fmt.Sprintf("use 1–%d, or 0 for the default %d", plane.FrameReadLimitMax, plane.FrameReadLimitDefault))
	}
	wait, err = queryWait(r, "wait")
	return since, int(l), wait, err
}

// topicOf returns the validated journal of a route addressed by topic.
func topicOf(r *http.Request) (plane.Journal, error) {
	ns, q, err := queueOf(r)
	if err != nil {
		return plane.Journal{}, err
	}
	j := plane.Journal{Namespace: ns, Queue: q, Topic: r.PathValue("topic")}
	if err := plane.ValidateName("topic name", j.Topic); err != nil {
		return j, err
	}
	return j, nil
}

func (s *Server) handleInvocationFrames(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	since, limit, wait, err := frameQuery(r)
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	return s.frames(w, r, p, plane.Journal{InvocationID: id}, since, limit, wait)
}

func (s *Server) handleTopicFrames(w http.ResponseWriter, r *http.Request, p *principal) error {
	j, err := topicOf(r)
	if err != nil {
		return err
	}
	since, limit, wait, err := frameQuery(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, j.Namespace, j.Queue, anyPerms...); err != nil {
		return err
	}
	return s.frames(w, r, p, j, since, limit, wait)
}

func (s *Server) frames(w http.ResponseWriter, r *http.Request, p *principal, j plane.Journal, since int64, limit int, wait time.Duration) error {
	ctx, wait, release, err := s.longPoll(r, p, wait)
	if err != nil {
		return err
	}
	defer release()
	res, err := s.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: j, Since: since, Limit: limit, Wait: wait})
	if err != nil {
		return stopErr(ctx, err)
	}
	if err := s.recheckToken(r, p); err != nil {
		return err // revoked or expired while it waited: not the frames posted meanwhile
	}
	if len(res.Frames) == 0 && !res.Closed && ctx.Err() != nil {
		if err := stopErr(ctx, ctx.Err()); errors.Is(err, api.ErrShuttingDown) {
			return err
		}
	}
	s.write(w, r, http.StatusOK, api.NewFramesResponse(res))
	return nil
}

// Posts.

func (s *Server) handleInvocationPost(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	var req api.PostRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	value, err := s.value("value", req.Value)
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, plane.PermissionConsume); err != nil {
		return err
	}
	return s.post(w, r, &plane.FramePostParams{Journal: plane.Journal{InvocationID: id}, Token: req.Token, Value: value, Final: req.Final})
}

func (s *Server) handleTopicPost(w http.ResponseWriter, r *http.Request, p *principal) error {
	j, err := topicOf(r)
	if err != nil {
		return err
	}
	var req api.PostRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if req.Token != "" {
		return plane.Invalid("token", "…", "a topic's frames take no lease token; send it only to /v1/invocations/{id}/frames")
	}
	value, err := s.value("value", req.Value)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, j.Namespace, j.Queue, plane.PermissionSubmit, plane.PermissionConsume); err != nil {
		return err
	}
	return s.post(w, r, &plane.FramePostParams{Journal: j, Value: value, Final: req.Final})
}

func (s *Server) post(w http.ResponseWriter, r *http.Request, params *plane.FramePostParams) error {
	seq, err := s.drv.FramePost(r.Context(), params)
	if err != nil {
		return err
	}
	s.metrics.frames.Inc()
	s.write(w, r, http.StatusOK, &api.PostResponse{Seq: seq})
	return nil
}
