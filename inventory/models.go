// Package inventory keeps products and orders in MySQL (or MariaDB) through GORM and deducts stock
// in one transaction per purchase. It knows nothing of HTTP or ZooKeeper: a fencing token is a
// plain integer here.
package inventory

import "time"

// Product is one SKU's stock. FenceToken is the highest fencing token any deduction has claimed.
type Product struct {
	SKU          string    `gorm:"column:sku;primaryKey;size:64" json:"sku"`
	Stock        int64     `gorm:"column:stock;not null" json:"stock"`
	InitialStock int64     `gorm:"column:initial_stock;not null" json:"initial_stock"`
	FenceToken   int64     `gorm:"column:fence_token;not null;default:0" json:"fence_token"`
	UpdatedAt    time.Time `gorm:"column:updated_at" json:"updated_at"`
}

// Order is one accepted purchase. RequestID is the idempotency key; NULL when the client sent none,
// so the unique index holds only for real keys.
type Order struct {
	ID         int64     `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	SKU        string    `gorm:"column:sku;size:64;not null;index" json:"sku"`
	Qty        int64     `gorm:"column:qty;not null" json:"qty"`
	RequestID  *string   `gorm:"column:request_id;size:200;uniqueIndex" json:"request_id,omitempty"` // a cart item's: KEY#SKU
	Replica    string    `gorm:"column:replica;size:64;not null" json:"replica"`
	FenceToken int64     `gorm:"column:fence_token;not null" json:"fence_token"`
	CreatedAt  time.Time `gorm:"column:created_at" json:"created_at"`
	// CancelledAt is when the order was cancelled and its units returned to stock; NULL while it stands.
	CancelledAt *time.Time `gorm:"column:cancelled_at" json:"cancelled_at,omitempty"`
}

func (Product) TableName() string { return "products" }
func (Order) TableName() string   { return "orders" }
