// Package inventory keeps products and orders in MySQL (or MariaDB) through GORM and deducts stock
// in one transaction per purchase. It knows nothing of HTTP or ZooKeeper: a fencing token is a
// plain integer here.
package inventory

import "time"

// Product is one SKU's stock and its fence: the highest token each issuer has written (FenceToken
// is ZooKeeper's), the issuer of the latest fenced write and the epoch, which counts the changes of
// that issuer (see Issuer).
type Product struct {
	SKU             string `gorm:"column:sku;primaryKey;size:64" json:"sku"`
	Stock           int64  `gorm:"column:stock;not null" json:"stock"`
	InitialStock    int64  `gorm:"column:initial_stock;not null" json:"initial_stock"`
	FenceToken      int64  `gorm:"column:fence_token;not null;default:0" json:"fence_token"`
	RedisFenceToken int64  `gorm:"column:redis_fence_token;not null;default:0" json:"redis_fence_token"`
	FenceIssuer     string `gorm:"column:fence_issuer;size:16;not null;default:''" json:"fence_issuer"`
	FenceEpoch      int64  `gorm:"column:fence_epoch;not null;default:0" json:"fence_epoch"`
	// LostHigh and LostLow count the units the stock's writes overwrote, upward (deductions
	// lost) and downward (restocks lost): writeStockStatement.
	LostHigh  int64     `gorm:"column:lost_high;not null;default:0" json:"-"`
	LostLow   int64     `gorm:"column:lost_low;not null;default:0" json:"-"`
	UpdatedAt time.Time `gorm:"column:updated_at" json:"updated_at"`
}

// Order is one accepted purchase. RequestID is the idempotency key; NULL when the client sent none,
// so the unique index holds only for real keys.
type Order struct {
	ID        int64   `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	SKU       string  `gorm:"column:sku;size:64;not null;index" json:"sku"`
	Qty       int64   `gorm:"column:qty;not null" json:"qty"`
	RequestID *string `gorm:"column:request_id;size:200;uniqueIndex" json:"request_id,omitempty"` // see keys.go
	// BodyDigest names the request that made the order (keys.go): a key reused with another body
	// is refused.
	BodyDigest string    `gorm:"column:body_digest;size:64;not null;default:''" json:"-"`
	Replica    string    `gorm:"column:replica;size:64;not null" json:"replica"`
	FenceToken int64     `gorm:"column:fence_token;not null" json:"fence_token"`
	CreatedAt  time.Time `gorm:"column:created_at" json:"created_at"`
	// CancelledAt is when the order was cancelled and its units returned to stock; NULL while it stands.
	CancelledAt *time.Time `gorm:"column:cancelled_at" json:"cancelled_at,omitempty"`
	// CancelAttempt names the attempt whose cancellation marked the order, so that one whose
	// COMMIT went unanswered tells its own mark from a retry's. The time could not: an attempt
	// rolled back and a retry right behind it wrote the same millisecond.
	CancelAttempt string `gorm:"column:cancel_attempt;size:32;not null;default:''" json:"-"`
}

func (Product) TableName() string { return "products" }
func (Order) TableName() string   { return "orders" }
