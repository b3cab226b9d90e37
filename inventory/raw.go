package inventory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// RawUpdates measures the database alone, with no lock and no ORM work around it: conns
// connections commit single-row conditional UPDATEs (stock = stock - 1 WHERE stock > 0, the
// statement of mode db-cas, each its own transaction) on rows random rows of a scratch table, for
// d. It returns the commits per second: the ceiling of purchases per second on this database.
func (s *Store) RawUpdates(ctx context.Context, conns, rows int, d time.Duration) (float64, error) {
	db := s.db.WithContext(ctx)
	if err := db.Exec("CREATE TABLE IF NOT EXISTS raw_bench (id INT PRIMARY KEY, stock BIGINT NOT NULL) ENGINE=InnoDB").Error; err != nil {
		return 0, fmt.Errorf("inventory: raw: %w", err)
	}
	defer db.Exec("DROP TABLE IF EXISTS raw_bench")
	if err := db.Exec("DELETE FROM raw_bench").Error; err != nil {
		return 0, fmt.Errorf("inventory: raw: %w", err)
	}
	for i := 0; i < rows; i++ {
		if err := db.Exec("INSERT INTO raw_bench (id, stock) VALUES (?, ?)", i, int64(1)<<40).Error; err != nil {
			return 0, fmt.Errorf("inventory: raw: %w", err)
		}
	}
	var commits atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for time.Now().Before(stop) && ctx.Err() == nil {
				if err := db.Exec("UPDATE raw_bench SET stock = stock - 1 WHERE id = ? AND stock > 0", rng.IntN(rows)).Error; err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				commits.Add(1)
			}
		}(uint64(c))
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, fmt.Errorf("inventory: raw: %w", err)
	}
	return float64(commits.Load()) / d.Seconds(), nil
}

// GlobalStatus reads the named counters of SHOW GLOBAL STATUS (Questions, Com_select, ...): what
// the database did for every client since it started. A benchmark reads them before and after a
// load to count the statements the load cost.
func (s *Store) GlobalStatus(ctx context.Context, names ...string) (map[string]float64, error) {
	rows, err := s.db.WithContext(ctx).Raw("SHOW GLOBAL STATUS WHERE Variable_name IN ?", names).Rows()
	if err != nil {
		return nil, fmt.Errorf("inventory: global status: %w", err)
	}
	defer rows.Close()
	out := make(map[string]float64, len(names))
	for rows.Next() {
		var name string
		var v float64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("inventory: global status: %w", err)
		}
		out[name] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inventory: global status: %w", err)
	}
	return out, nil
}
