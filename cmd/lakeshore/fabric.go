package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// modeOptions adds the run declaration of mode (from the lakeshore.yaml found from the
// working directory, docs/fabric.md) to opts: its metadata and, unless given, its time
// limit as the attempt timeout. A mode that ships code needs a server (an http(s) plane):
// its archive is uploaded there once per digest. Errors: *fabric.ConfigError (no file, no
// such mode, a bad file), *fabric.CodeError, the upload's.
func (a *app) modeOptions(ctx context.Context, mode, namespace, queue string, opts *lakeshore.SubmitOptions) error {
	cfg, err := fabric.Load(".", nil)
	if err != nil {
		return err
	}
	m, err := cfg.Mode(mode)
	if err != nil {
		return err
	}
	digest, gitContext := "", ""
	if m.Code {
		base := a.planeURL()
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
			return fmt.Errorf("mode %q ships code, which needs a server to keep it: set --target or $%s to an http(s):// URL (lakeshore serve)", mode, lakeshore.EnvURL)
		}
		snap, err := fabric.Take(cfg.Dir, cfg.Code)
		if err != nil {
			return err
		}
		if err := uploadCode(ctx, strings.Split(base, ",")[0], namespace, queue, snap); err != nil {
			return err
		}
		digest = snap.Digest
		if snap.Git != nil {
			g, _ := json.Marshal(snap.Git)
			gitContext = string(g)
		}
	}
	if opts.Metadata == nil {
		opts.Metadata = map[string]string{}
	}
	maps.Copy(opts.Metadata, m.Metadata(digest))
	if gitContext != "" {
		opts.Metadata[fabric.MetaGit] = gitContext
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = m.TimeLimit
	}
	// A mode's resources are not the job's requirement (placement): the workers a provider
	// launches for the queue offer nothing yet, so such a job would wait for ever. --requires
	// sets one (docs/fabric.md, "Not built yet").
	return nil
}

// uploadCode puts snap's archive on the server unless it holds it already (HEAD first).
func uploadCode(ctx context.Context, base, namespace, queue string, snap *fabric.Snapshot) error {
	u := strings.TrimRight(base, "/") + "/v1/namespaces/" + url.PathEscape(namespace) + "/queues/" + url.PathEscape(queue) + "/code/" + snap.Digest
	client := &http.Client{Timeout: 5 * time.Minute}
	do := func(method string, body []byte) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if t := os.Getenv(httpplane.EnvToken); t != "" {
			req.Header.Set("Authorization", "Bearer "+t)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/gzip")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(msg), nil
	}
	status, _, err := do(http.MethodHead, nil)
	if err != nil {
		return fmt.Errorf("upload code: %w", err)
	}
	if status == http.StatusOK {
		return nil
	}
	status, msg, err := do(http.MethodPut, snap.Archive)
	if err != nil {
		return fmt.Errorf("upload code: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("upload code: the server answered %d: %s", status, strings.TrimSpace(msg))
	}
	return nil
}
