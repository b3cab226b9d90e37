package inventory

import (
	"database/sql"
	"fmt"

	"gorm.io/gorm"
)

// SKUs and keys are compared byte for byte, as ZooKeeper compares lock paths. Under the default
// collations of MariaDB and MySQL 8 (case-insensitive), "case-1" would find the row of "CASE-1"
// while taking another lock than CASE-1's holders: a sale beside the holder, stopped only by the
// fence (the fuzzer found it as a stale token), and in unfenced modes not at all. Idempotency keys
// differing in case would replay each other's orders.
var binaryColumns = []struct{ table, column string }{
	{"products", "sku"},
	{"orders", "sku"},
	{"orders", "request_id"},
	{"table_locks", "name"},
	{"key_attempts", "request_id"},
}

// binaryCollation gives the identifier columns a binary collation where they lack it: on new
// tables, and on tables an older version created. It runs after AutoMigrate, so each column
// already has the type and nullability the models ask for; only its collation changes.
func binaryCollation(session func() *gorm.DB) error {
	for _, c := range binaryColumns {
		var collation sql.NullString
		var typ, nullable string
		if err := session().Raw(`SELECT COLLATION_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?`, c.table, c.column).Row().Scan(&collation, &typ, &nullable); err != nil {
			return fmt.Errorf("collation of %s.%s: %w", c.table, c.column, err)
		}
		if collation.String == "utf8mb4_bin" {
			continue
		}
		null := "NOT NULL"
		if nullable == "YES" {
			null = "NULL"
		}
		stmt := fmt.Sprintf("ALTER TABLE `%s` MODIFY `%s` %s CHARACTER SET utf8mb4 COLLATE utf8mb4_bin %s", c.table, c.column, typ, null)
		if err := session().Exec(stmt).Error; err != nil {
			return fmt.Errorf("binary collation for %s.%s: %w", c.table, c.column, err)
		}
	}
	return nil
}
