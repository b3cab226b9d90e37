package inventory

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownSKU: no such product.
	ErrUnknownSKU = errors.New("inventory: unknown SKU")
	// ErrOutOfStock: fewer units left than asked for; nothing was changed.
	ErrOutOfStock = errors.New("inventory: out of stock")
	// ErrStaleToken: a deduction with a higher fencing token has already been written, so the
	// caller's lock is no longer the newest; nothing was changed.
	ErrStaleToken = errors.New("inventory: stale fencing token")
	// ErrKeyReused: the idempotency key belongs to an order for another SKU or quantity.
	ErrKeyReused = errors.New("inventory: idempotency key used for a different purchase")
	// ErrUnknownOrder: no such order (of that SKU).
	ErrUnknownOrder = errors.New("inventory: unknown order")
	// ErrMisconfigured: MYSQL_DSN, or the settings it gives the database's sessions, can never
	// work, whatever the database's state: trying again only delays the answer. (A refused
	// login or an unknown database is not one: a database being provisioned answers so.)
	ErrMisconfigured = errors.New("inventory: misconfigured")
	// ErrMissingPrivilege: the database user lacks a privilege the statement needs (the
	// server's message names it); an ErrMisconfigured too, since no retry grants it.
	ErrMissingPrivilege = fmt.Errorf("%w: the database user lacks a privilege", ErrMisconfigured)
)
