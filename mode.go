package lakeshore

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// codeUploader is a plane that keeps code archives (the HTTP plane: a server's code store).
type codeUploader interface {
	CodeUpload(ctx context.Context, namespace, queue, digest string, archive func() ([]byte, error)) (bool, error)
}

// modeRun is what a submit of a compute mode adds to its options (SubmitOptions.Mode).
type modeRun struct {
	metadata    map[string]string
	timeLimit   time.Duration // 0: none
	requirement *plane.Requirement
}

// modeRuns resolves the modes a batch names, each once: the project file is read once
// per batch and a mode's code is snapshotted (and uploaded, when the server lacks it) once.
type modeRuns struct {
	q    *Queue
	cfg  *fabric.Config
	runs map[string]*modeRun
}

// apply merges the run of mode o.Mode into o (docs/fabric.md, "Submitting a mode"): the
// mode's metadata over o.Metadata (copied, never the caller's map), its time limit as
// AttemptTimeout and its resources as Requirement unless o sets them.
func (m *modeRuns) apply(ctx context.Context, o *SubmitOptions) error {
	run, err := m.run(ctx, o.Mode)
	if err != nil {
		return err
	}
	md := make(map[string]string, len(o.Metadata)+len(run.metadata))
	maps.Copy(md, o.Metadata)
	maps.Copy(md, run.metadata)
	o.Metadata = md
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = run.timeLimit
	}
	if o.Requirement == nil {
		o.Requirement = run.requirement
	}
	return nil
}

func (m *modeRuns) run(ctx context.Context, name string) (*modeRun, error) {
	if run := m.runs[name]; run != nil {
		return run, nil
	}
	if m.cfg == nil {
		cfg, err := fabric.Load(".", nil)
		if err != nil {
			return nil, err
		}
		m.cfg = cfg
	}
	mode, err := m.cfg.Mode(name)
	if err != nil {
		return nil, err
	}
	digest, gitContext := "", ""
	if mode.Code {
		up, ok := m.q.d.drv.(codeUploader)
		if !ok {
			return nil, plane.Invalid("mode", name, "it ships code, which needs a server to keep it: use an http(s):// target (lakeshore serve; the CLI's --target or $"+EnvURL+"), or set code: false on the mode")
		}
		snap, err := fabric.Scan(m.cfg.Dir, m.cfg.Code)
		if err != nil {
			return nil, err
		}
		if _, err := up.CodeUpload(ctx, m.q.opts.Namespace, m.q.name, snap.Digest, func() ([]byte, error) {
			if err := snap.BuildArchive(); err != nil {
				return nil, err
			}
			return snap.Archive, nil
		}); err != nil {
			return nil, err
		}
		digest = snap.Digest
		if snap.Git != nil {
			g, _ := json.Marshal(snap.Git) // strings and booleans: cannot fail
			gitContext = string(g)
		}
	}
	run := &modeRun{metadata: mode.Metadata(digest), timeLimit: mode.TimeLimit, requirement: mode.Resources.Requirement()}
	if gitContext != "" {
		run.metadata[fabric.MetaGit] = gitContext
	}
	if m.runs == nil {
		m.runs = map[string]*modeRun{}
	}
	m.runs[name] = run
	return run, nil
}
