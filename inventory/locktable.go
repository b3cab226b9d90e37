package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// TableLock is a row in table_locks: the database lock of the classic comparison. Inserting the
// row takes the lock (the primary key lets only one insert win), deleting it releases it, and a row
// past its expiry may be taken over, so that a crashed holder blocks others for at most the TTL.
// Unlike a ZooKeeper lease there is no fencing and no queue: a holder that outlives its TTL does
// not know, and waiters poll.
type TableLock struct {
	Name      string    `gorm:"column:name;primaryKey;size:128"`
	Owner     string    `gorm:"column:owner;size:64;not null"`
	ExpiresAt time.Time `gorm:"column:expires_at;not null"`
}

func (TableLock) TableName() string { return "table_locks" }

// ErrLockTimeout: the table lock was not acquired before the context ended.
var ErrLockTimeout = errors.New("inventory: table lock not acquired in time")

// HeldTableLock is one holding; Release it.
type HeldTableLock struct {
	s     *Store
	name  string
	owner string
}

// AcquireTableLock polls every interval until it inserts the lock row, takes over an expired
// one, or ctx ends. The expiry is written and judged with the database's clock (UTC_TIMESTAMP, in
// the statements), never a replica's: replicas' clocks disagree, and a waiter whose clock ran
// ahead of the holder's would take over a lock still held.
//
// No row outlives an acquisition that fails: the INSERT, which commits by itself, is awaited
// whatever ctx does (within the store's read timeout), and a row it inserted for a caller that
// has given up meanwhile is deleted; when its answer never came, the row is deleted if it is
// there, now and once more after the read timeout, for an INSERT the server runs late.
func (s *Store) AcquireTableLock(ctx context.Context, name string, ttl, interval time.Duration) (*HeldTableLock, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("inventory: lock owner: %w", err)
	}
	l := &HeldTableLock{s: s, name: name, owner: hex.EncodeToString(b[:])}
	for {
		err := l.insert(ctx, ttl)
		switch {
		case err == nil && ctx.Err() != nil:
			l.dropLost()
			return nil, fmt.Errorf("%w: %w", ErrLockTimeout, ctx.Err())
		case err == nil:
			return l, nil
		case errors.Is(err, gorm.ErrDuplicatedKey), isLockConflict(err):
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrLockTimeout, ctx.Err())
			}
			// Someone holds it. Only when their time is up is their row taken away: a plain read
			// first, so that waiters do not lock the holder's row while it is still valid.
			var held struct {
				Owner   string
				Expired bool
			}
			rerr := s.db.WithContext(ctx).Raw("SELECT owner, expires_at < UTC_TIMESTAMP(6) AS expired FROM table_locks WHERE name = ?", name).
				Scan(&held).Error
			if rerr == nil && held.Expired {
				derr := s.db.WithContext(ctx).Exec("DELETE FROM table_locks WHERE name = ? AND owner = ? AND expires_at < UTC_TIMESTAMP(6)", name, held.Owner).Error
				if derr != nil && ctx.Err() == nil && !isLockConflict(derr) {
					return nil, fmt.Errorf("inventory: table lock %s: %w", name, derr)
				}
			}
		default: // no answer, or another refusal: the row may be in
			l.dropLost()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrLockTimeout, errors.Join(ctx.Err(), err))
			}
			return nil, fmt.Errorf("inventory: table lock %s: %w", name, err)
		}
		t := time.NewTimer(interval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", ErrLockTimeout, ctx.Err())
		}
	}
}

// insert tries once to insert the lock's row, and waits for the answer even when ctx ends first:
// the statement commits on its own, so an answer given up on would leave a row nobody knows of.
func (l *HeldTableLock) insert(ctx context.Context, ttl time.Duration) error {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.s.readTimeout)
	defer cancel()
	return l.s.db.WithContext(ictx).Exec("INSERT INTO table_locks (name, owner, expires_at) VALUES (?, ?, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6)))",
		l.name, l.owner, ttl.Microseconds()).Error
}

// dropLost deletes the row of an acquisition that will not hold it, if it is in: now, and once
// more after the read timeout, for an INSERT the server runs late. It runs in the background with
// contexts of its own; at worst the row expires with its TTL.
func (l *HeldTableLock) dropLost() {
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.s.readTimeout)
		defer cancel()
		if err := l.Release(ctx); err != nil {
			slog.Warn("inventory: drop a table lock nobody holds", "lock", l.name, "err", err)
		}
	}
	go func() {
		drop()
		time.Sleep(l.s.readTimeout)
		drop()
	}()
}

// Release deletes the row if it is still this holding's (it may have expired and been taken).
func (l *HeldTableLock) Release(ctx context.Context) error {
	if err := l.s.db.WithContext(ctx).Where("name = ? AND owner = ?", l.name, l.owner).Delete(&TableLock{}).Error; err != nil {
		return fmt.Errorf("inventory: release table lock %s: %w", l.name, err)
	}
	return nil
}

// isLockConflict: InnoDB resolved a conflict between concurrent inserters by failing one of them
// (deadlock, or lock wait timeout); for a lock attempt that simply means "try again".
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
