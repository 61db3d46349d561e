package lakeshore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
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
	files       map[string]bool // the shipped code's paths; nil when the mode ships none
}

// functionRe is the form of SubmitOptions.Function: [directory/]module:qualname, with
// Python identifiers (ASCII) separated by dots, and a directory of clean relative parts.
var functionRe = regexp.MustCompile(`^(?:((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+)/)?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$`)

// checkFunction checks that fn, a SubmitOptions.Function of mode, is well formed and
// names a module of the code the mode ships, as the Python worker will (code.load_function);
// refused here, nothing is uploaded and no job made that could only fail.
func (r *modeRun) checkFunction(mode, fn string) error {
	if r.files == nil {
		return plane.Invalid("function", fn, fmt.Sprintf("mode %q ships no code to import it from: name a mode that ships code", mode))
	}
	sm := functionRe.FindStringSubmatch(fn)
	if sm == nil {
		return plane.Invalid("function", fn, "use module:qualname or directory/module:qualname, e.g. sentiment.model:score or src/pkg.mod:main")
	}
	dir := sm[1]
	for _, part := range strings.Split(dir, "/") {
		if dir != "" && (part == "." || part == "..") {
			return plane.Invalid("function", fn, "the directory must be a clean relative path inside the code")
		}
	}
	mod := strings.ReplaceAll(sm[2], ".", "/")
	if dir != "" {
		mod = dir + "/" + mod
	}
	if !r.files[mod+".py"] && !r.files[mod+"/__init__.py"] {
		return plane.Invalid("function", fn, fmt.Sprintf("no %s.py or %s/__init__.py in the code mode %q ships: name a module of the project (its code.mounts or git tree)", mod, mod, mode))
	}
	return nil
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
	if o.Function != "" && o.Mode == "" {
		return plane.Invalid("function", o.Function, "name a --mode (SubmitOptions.Mode) that ships code: the function is imported from that code")
	}
	run, err := m.run(ctx, o.Mode, o.Function)
	if err != nil {
		return err
	}
	md := make(map[string]string, len(o.Metadata)+len(run.metadata))
	maps.Copy(md, o.Metadata)
	maps.Copy(md, run.metadata)
	if o.Function != "" {
		md[fabric.MetaFunction] = o.Function
	}
	o.Metadata = md
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = run.timeLimit
	}
	if o.Requirement == nil {
		o.Requirement = run.requirement
	}
	return nil
}

// run resolves mode name, checking function (SubmitOptions.Function; "" for none)
// against its code before the code is uploaded.
func (m *modeRuns) run(ctx context.Context, name, function string) (*modeRun, error) {
	if run := m.runs[name]; run != nil {
		if function != "" {
			if err := run.checkFunction(name, function); err != nil {
				return nil, err
			}
		}
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
	var files map[string]bool
	if mode.Code {
		up, ok := m.q.d.drv.(codeUploader)
		if !ok {
			return nil, plane.Invalid("mode", name, "it ships code, which needs a server to keep it: use an http(s):// target (lakeshore serve; the CLI's --target or $"+EnvURL+"), or set code: false on the mode")
		}
		snap, err := fabric.Scan(m.cfg.Dir, m.cfg.Code)
		if err != nil {
			return nil, err
		}
		files = make(map[string]bool, len(snap.Files))
		for _, f := range snap.Files {
			files[f.Path] = true
		}
		if function != "" {
			if err := (&modeRun{files: files}).checkFunction(name, function); err != nil {
				return nil, err
			}
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
	run := &modeRun{metadata: mode.Metadata(digest), timeLimit: mode.TimeLimit, requirement: mode.Resources.Requirement(), files: files}
	if function != "" && files == nil {
		return nil, run.checkFunction(name, function) // a mode shipping no code: refused
	}
	if gitContext != "" {
		run.metadata[fabric.MetaGit] = gitContext
	}
	if m.runs == nil {
		m.runs = map[string]*modeRun{}
	}
	m.runs[name] = run
	return run, nil
}
