package pgdb

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listener is what Listen tells its owner.
type Listener struct {
	// Up is called with true when a connection listens, with false each time a connection
	// (or an attempt to make one) ends; may be nil.
	Up func(up bool)
	// Notified is called with the payload of each notification.
	Notified func(payload string)
	// Quiet, when set, is called after each Every that passed without a notification.
	Quiet func()
	Every time.Duration
	// Dropped is told why a connection ended (never after ctx ended).
	Dropped func(err error)
	// Delay is how long to wait before connecting again.
	Delay func() time.Duration
}

// Listen keeps a connection of cc LISTENing on channel until ctx ends, and connects again
// after l.Delay() when it drops. The owner's waiters re-check what they may have missed
// at l.Up (the notifications sent while no connection listened are lost).
func Listen(ctx context.Context, cc *pgx.ConnConfig, channel string, l Listener) {
	for ctx.Err() == nil {
		err := listenOnce(ctx, cc, channel, l)
		if l.Up != nil {
			l.Up(false)
		}
		if ctx.Err() != nil {
			return
		}
		l.Dropped(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.Delay()):
		}
	}
}

func listenOnce(ctx context.Context, cc *pgx.ConnConfig, channel string, l Listener) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if l.Up != nil {
		l.Up(true)
	}
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if l.Every > 0 {
			wctx, cancel = context.WithTimeout(ctx, l.Every)
		}
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && l.Every > 0 && (errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)) {
			l.Quiet()
			continue
		}
		if err != nil {
			return err
		}
		l.Notified(note.Payload)
	}
}
