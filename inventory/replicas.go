package inventory

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// Replica is one order-service replica as it last announced itself: for the live page, which shows
// every replica's lock mode.
type Replica struct {
	ID   string `gorm:"column:id;primaryKey;size:64" json:"replica"`
	Mode string `gorm:"column:mode;size:32;not null" json:"mode"`
	// Settled: the replica has no change in flight under a mode other than Mode, so a switch
	// of modes is over as far as it is concerned.
	Settled bool      `gorm:"column:settled;not null;default:false" json:"settled"`
	SeenAt  time.Time `gorm:"column:seen_at;not null" json:"seen_at"`
}

func (Replica) TableName() string { return "replicas" }

// Announce records a replica's mode, now.
func (s *Store) Announce(ctx context.Context, id, mode string, settled bool) error {
	r := Replica{ID: id, Mode: mode, Settled: settled, SeenAt: time.Now().UTC().Truncate(time.Millisecond)}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"mode", "settled", "seen_at"})}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("inventory: announce replica %s: %w", id, err)
	}
	return nil
}

// Replicas are the replicas that announced themselves within the last window, by id.
func (s *Store) Replicas(ctx context.Context, window time.Duration) ([]Replica, error) {
	rs := []Replica{}
	since := time.Now().UTC().Add(-window)
	if err := s.db.WithContext(ctx).Where("seen_at >= ?", since).Order("id").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("inventory: replicas: %w", err)
	}
	return rs, nil
}

// Products lists up to limit products, by SKU.
func (s *Store) Products(ctx context.Context, limit int) ([]Product, error) {
	ps := []Product{}
	if err := s.db.WithContext(ctx).Order("sku").Limit(limit).Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("inventory: products: %w", err)
	}
	return ps, nil
}
