package httpplane

import (
	"context"
	"net/url"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueProviderSet implements plane.Driver. The reference is validated here first: a bad one
// is refused without a request.
func (d *Driver) QueueProviderSet(ctx context.Context, params *plane.ProviderParams) error {
	if err := params.Validate(); err != nil {
		return err
	}
	return d.do(ctx, &call{method: "PUT", path: queuePath(params.Namespace, params.Queue) + "/provider",
		body: api.NewProvider(&params.Provider), out: &api.ProviderResponse{}, safe: true})
}

// QueueProviderGet implements plane.Driver.
func (d *Driver) QueueProviderGet(ctx context.Context, namespace, queue string) (*plane.ProviderRef, error) {
	if err := validQueue(namespace, queue); err != nil {
		return nil, err
	}
	var out api.ProviderResponse
	if err := d.do(ctx, &call{method: "GET", path: queuePath(namespace, queue) + "/provider", out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	return out.Provider.Plane(), nil
}

// QueueProviderDelete implements plane.Driver. Not repeated once sent (a repeat would
// report false).
func (d *Driver) QueueProviderDelete(ctx context.Context, namespace, queue string) (bool, error) {
	if err := validQueue(namespace, queue); err != nil {
		return false, err
	}
	var out api.ChangedResponse
	err := d.do(ctx, &call{method: "DELETE", path: queuePath(namespace, queue) + "/provider", out: &out})
	return out.Changed, err
}

// QueuePause implements plane.Driver: PUT …/pause pauses, DELETE …/pause resumes. Not
// repeated once sent (a repeat would report no change).
func (d *Driver) QueuePause(ctx context.Context, params *plane.PauseParams) (bool, error) {
	if err := params.Validate(); err != nil {
		return false, err
	}
	method := "DELETE"
	if params.Paused {
		method = "PUT"
	}
	var out api.ChangedResponse
	err := d.do(ctx, &call{method: method, path: queuePath(params.Namespace, params.Queue) + "/pause", out: &out})
	return out.Changed, err
}

// QueueProviderList implements plane.Driver. Through a scoped token it lists only the
// queues the token covers.
func (d *Driver) QueueProviderList(ctx context.Context, namespace string) ([]plane.QueueProvider, error) {
	q := url.Values{}
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
		q.Set("namespace", namespace)
	}
	var out api.QueueProvidersResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/providers", query: q, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	res := make([]plane.QueueProvider, len(out.Queues))
	for i := range out.Queues {
		qp := &out.Queues[i]
		res[i] = plane.QueueProvider{Namespace: qp.Namespace, Queue: qp.Queue, Provider: *qp.Provider.Plane()}
	}
	return res, nil
}

func leasePath(namespace, verb string) string {
	return "/v1/namespaces/" + pathID(namespace) + "/leases/" + verb
}

// LeaseAcquire implements plane.Driver. Repeating it is safe (the holder renews its own
// lease), so it is retried like a read.
func (d *Driver) LeaseAcquire(ctx context.Context, params *plane.LeaseParams) (bool, error) {
	if err := params.Validate(); err != nil {
		return false, err
	}
	var out api.LeaseResponse
	err := d.do(ctx, &call{method: "POST", path: leasePath(params.Namespace, "acquire"), body: &api.LeaseRequest{
		Name: params.Name, Holder: params.Holder, TTL: api.Seconds(params.TTL)}, out: &out, safe: true})
	return out.Acquired, err
}

// LeaseRelease implements plane.Driver.
func (d *Driver) LeaseRelease(ctx context.Context, namespace, name, holder string) error {
	if err := plane.ValidateLease(namespace, name, holder); err != nil {
		return err
	}
	return d.do(ctx, &call{method: "POST", path: leasePath(namespace, "release"), body: &api.LeaseRequest{
		Name: name, Holder: holder}, out: &api.EmptyResponse{}, safe: true})
}

func validQueue(namespace, queue string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("queue name", queue)
}
