package httpplane

// SubmitsWaiting is how many callers wait to submit to namespace/queue behind the
// request of that queue in flight: a test waits for it rather than sleeping while they
// queue up.
func (d *Driver) SubmitsWaiting(namespace, queue string) int {
	d.submits.mu.Lock()
	defer d.submits.mu.Unlock()
	if q := d.submits.queues[submitQueueKey{namespace, queue}]; q != nil {
		return len(q.calls)
	}
	return 0
}
