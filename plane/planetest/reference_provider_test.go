package planetest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// refLease is a named lease of refDriver.
type refLease struct {
	holder  string
	expires time.Time
}

func (d *refDriver) QueueProviderSet(_ context.Context, p *plane.ProviderParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(p.Provider)
	if err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if d.providers == nil {
		d.providers = map[[2]string][]byte{}
	}
	d.providers[[2]string{p.Namespace, p.Queue}] = b
	return nil
}

func (d *refDriver) QueuePause(_ context.Context, p *plane.PauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	if err := d.lock(); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	key := [2]string{p.Namespace, p.Queue}
	if d.paused[key] == p.Paused {
		return false, nil
	}
	if d.paused == nil {
		d.paused = map[[2]string]bool{}
	}
	if p.Paused {
		d.paused[key] = true
	} else {
		delete(d.paused, key)
		d.notify() // waiting claimers look again
	}
	return true, nil
}

func (d *refDriver) QueueProviderGet(_ context.Context, namespace, queue string) (*plane.ProviderRef, error) {
	if err := validQueue(namespace, queue); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	b, ok := d.providers[[2]string{namespace, queue}]
	if !ok {
		return nil, nil
	}
	var ref plane.ProviderRef
	return &ref, json.Unmarshal(b, &ref)
}

func (d *refDriver) QueueProviderDelete(_ context.Context, namespace, queue string) (bool, error) {
	if err := validQueue(namespace, queue); err != nil {
		return false, err
	}
	if err := d.lock(); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	key := [2]string{namespace, queue}
	_, ok := d.providers[key]
	delete(d.providers, key)
	return ok, nil
}

func (d *refDriver) QueueProviderList(_ context.Context, namespace string) ([]plane.QueueProvider, error) {
	if namespace != "" {
		if err := plane.ValidateName("namespace", namespace); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	out := []plane.QueueProvider{}
	for key, b := range d.providers {
		if namespace != "" && key[0] != namespace {
			continue
		}
		qp := plane.QueueProvider{Namespace: key[0], Queue: key[1]}
		if err := json.Unmarshal(b, &qp.Provider); err != nil {
			return nil, err
		}
		out = append(out, qp)
	}
	slices.SortFunc(out, func(a, b plane.QueueProvider) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Queue, b.Queue))
	})
	return out, nil
}

func (d *refDriver) LeaseAcquire(_ context.Context, p *plane.LeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	if err := d.lock(); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	if d.leases == nil {
		d.leases = map[[2]string]refLease{}
	}
	key, now := [2]string{p.Namespace, p.Name}, d.now()
	if l, ok := d.leases[key]; ok && l.holder != p.Holder && now.Before(l.expires) {
		return false, nil
	}
	d.leases[key] = refLease{holder: p.Holder, expires: now.Add(p.TTL)}
	return true, nil
}

func (d *refDriver) LeaseRelease(_ context.Context, namespace, name, holder string) error {
	if err := plane.ValidateLease(namespace, name, holder); err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	key := [2]string{namespace, name}
	if l, ok := d.leases[key]; ok && l.holder == holder {
		delete(d.leases, key)
	}
	return nil
}

func validQueue(namespace, queue string) error {
	if err := plane.ValidateName("namespace", namespace); err != nil {
		return err
	}
	return plane.ValidateName("queue name", queue)
}
