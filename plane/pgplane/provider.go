package pgplane

import (
	"context"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueProviderSet implements plane.Driver.
func (d *Driver) QueueProviderSet(ctx context.Context, p *plane.ProviderParams) error {
	return plane.ErrNotImplemented
}

// QueueProviderGet implements plane.Driver.
func (d *Driver) QueueProviderGet(ctx context.Context, namespace, queue string) (*plane.ProviderRef, error) {
	return nil, plane.ErrNotImplemented
}

// QueueProviderDelete implements plane.Driver.
func (d *Driver) QueueProviderDelete(ctx context.Context, namespace, queue string) (bool, error) {
	return false, plane.ErrNotImplemented
}

// QueueProviderList implements plane.Driver.
func (d *Driver) QueueProviderList(ctx context.Context, namespace string) ([]plane.QueueProvider, error) {
	return nil, plane.ErrNotImplemented
}

// LeaseAcquire implements plane.Driver.
func (d *Driver) LeaseAcquire(ctx context.Context, p *plane.LeaseParams) (bool, error) {
	return false, plane.ErrNotImplemented
}

// LeaseRelease implements plane.Driver.
func (d *Driver) LeaseRelease(ctx context.Context, namespace, name, holder string) error {
	return plane.ErrNotImplemented
}
